"""NIP-42 on a `Connection`: the challenge's deadline (relay.md §7.3), AUTH — several keys
per connection (decision 172), failed attempts rate-limited, never final (issue 25 item 2) —
and the session the keys make, which every read and write is checked against."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from buzz.core import messages, nip42
from buzz.core.errors import AuthRequired, Blocked, BuzzError
from buzz.core.limits import MAX_AUTH_PUBKEYS
from buzz.core.messages import AuthMessage
from buzz.core.visibility import Reader
from buzz.relay.auth.session import Session

if TYPE_CHECKING:
    from buzz.relay.connection.host import ConnectionHost


class Nip42Auth:
    """Who this connection is (state in `Connection`)."""

    __slots__ = ()
    relay: ConnectionHost
    host: str | None
    _loop: asyncio.AbstractEventLoop
    challenge: str
    pubkey: str | None
    owners: frozenset[str]
    _session: Session
    _auth_strikes: nip42.AuthStrikes | None
    _auth_timer: asyncio.Handle | None
    _auth_deadline: float
    _auth_handling: int
    _closing: bool

    @property
    def session(self) -> Session:
        return self._session

    @property
    def reader(self) -> Reader:
        """Who reads on this connection: its one key, or every key it authenticated."""
        return self._session.reader

    @property
    def pubkeys(self) -> frozenset[str]:
        """Every key this connection authenticated (empty before AUTH)."""
        session = self._session
        return frozenset() if session.pubkey is None else session.also | {session.pubkey}

    def _auth_due(self) -> None:
        # Decided one loop turn later: after a stall of this process, a frame the loop read in
        # the same turn as this timer reaches `_on_frame` first, and counts as in time.
        self._auth_timer = self._loop.call_soon(self._auth_expired)

    def _auth_expired(self) -> None:
        self._auth_timer = None
        if self.pubkey is None and not self._auth_handling and not self._closing:
            self._spawn(self._close(1008, b"auth-required: authentication timeout"))

    def _auth_answered(self) -> None:
        """An AUTH is answered: if none authenticated the connection and the deadline went by
        meanwhile, it is enforced now (a refused AUTH past the deadline closes it)."""
        self._auth_handling -= 1
        if self.pubkey is None and not self._auth_handling and self._auth_timer is None and not self._closing:
            self._auth_timer = self._loop.call_at(self._auth_deadline, self._auth_due)

    def _auth_failed_now(self) -> None:
        if self._auth_strikes is None:
            self._auth_strikes = nip42.AuthStrikes()
        self._auth_strikes.fail(time.monotonic())

    async def _on_auth(self, msg: AuthMessage) -> None:
        """NIP-42: each valid AUTH adds its pubkey to the session (several per connection, up
        to MAX_AUTH_PUBKEYS); failed attempts are rate-limited, never final (issue 25 item 2)."""
        event = msg.event
        wait = 0 if self._auth_strikes is None else self._auth_strikes.wait_s(time.monotonic())
        if wait:
            self.send(
                messages.ok(
                    event.id, False, f"rate-limited: too many failed AUTH attempts; retry in {wait} s"
                )
            )
            return
        session = self._session
        added = session.pubkey is None or not session.signs_as(event.pubkey)
        if added and len(self.pubkeys) >= MAX_AUTH_PUBKEYS:
            self.send(
                messages.ok(event.id, False, f"restricted: at most {MAX_AUTH_PUBKEYS} pubkeys per connection")
            )
            return
        try:
            nip42.check_auth_event(event, self.challenge, self.relay.relay_urls(self.host), int(time.time()))
            try:
                await self.relay.ingest.verify(event)
            except BuzzError:
                raise nip42.VERIFICATION_FAILED() from None  # a bad id or signature is a failed AUTH
            admitted = await self.relay.admission(event)  # Restricted / Blocked keep their own text
        except BuzzError as exc:
            self._auth_failed_now()
            if isinstance(exc, AuthRequired):  # admission verdicts are logged by Relay.admit
                self.relay.telemetry.auth_answered(event.pubkey, str(exc))
            self.send(messages.ok(event.id, False, str(exc)))
            if isinstance(exc, Blocked):
                self.close_soon(code=1008, message=b"blocked", last_words=True)
            return
        pubkey = admitted.pubkey
        if admitted.owners:  # a ban of any key's owner ends the session (none: no new set)
            self.owners = self.owners | admitted.owners
        session = self._session  # AUTHs are handled in order, but re-read after the awaits
        if session.pubkey is None:
            self.pubkey = pubkey
            self._session = Session(pubkey, "ws")
            if self._auth_timer is not None:
                self._auth_timer.cancel()  # the AUTH deadline is met: its handle need not live on
                self._auth_timer = None
        elif not session.signs_as(pubkey):
            self._session = Session(session.pubkey, "ws", session.also | {pubkey})
        self.send(messages.ok(event.id, True, ""))
