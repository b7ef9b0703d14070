"""Channel messages, threads and full-text search (agents.md §2.2, §2.3, §3).

Kinds: 9 (stream message, tags in the order `h`, NIP-10 marked `e`, `p`, `broadcast`), 40003
(edit), 5 / 9005 (deletion by the author or its owner / moderation). Read results are
`Message`s with the newest edit applied (agents.md §2.1 item 5). Everything goes through the
HTTP bridge; failures are `buzz.client.errors`.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Callable, Sequence
from itertools import zip_longest
from typing import Any

import aiohttp

from buzz.client.errors import AuthError, NetworkError, NotFound, Refused, UserError, WorkspaceError
from buzz.client.files import MAX_FILES_PER_MESSAGE, attachment_tag
from buzz.client.lookups import channel_members, profiles
from buzz.client.mentions import resolve_names, uri_mentions
from buzz.client.models import Deleted, Edited, Message, SentMessage, SentWithFiles, Thread
from buzz.client.relay_client import RelayError
from buzz.client.session import ACCESS_PREFIXES, Session
from buzz.client.values import Text, channel_arg, event_id_arg, first_channel, pubkey_arg, text_arg
from buzz.client.views import EDIT_KIND, display_name, message_view, newest_edits, thread_links
from buzz.core.event import Event
from buzz.core.nip_oa import owner_of

MESSAGE_KIND = 9
MAX_CONTENT_BYTES = 65_536  # agents.md §2.3 item 1 (the relay's own limit is 256 KiB)
MAX_MENTIONS = 50
MAX_THREAD_FETCH = 1000
WATCH_SEEN_MAX = 1000
# `messages watch` after a lost connection: the agent harness's backoff (agent/relay_link.py)
# and resume overlap, so both come back alike after a relay restart.
WATCH_BACKOFF_MIN_S = 1.0
WATCH_BACKOFF_MAX_S = 5.0
WATCH_RESUME_OVERLAP_S = 5


def _closed(reason: str, lost: bool) -> WorkspaceError:
    """A live subscription ended by the relay: access refusals are AuthError (like a refused
    bridge read), a dropped connection NetworkError, anything else Refused."""
    if reason.startswith(ACCESS_PREFIXES):  # also when the relay closed after saying why (a ban)
        return AuthError(reason, relay_message=reason)
    if lost:
        return NetworkError(f"connection lost: {reason}")
    return Refused(reason, relay_message=reason)


def parse_kinds(value: str | None) -> list[int]:
    """`--kinds` text "9,40003" → [9, 40003]; None → [9]. Raises UserError."""
    if value is None:
        return [MESSAGE_KIND]
    try:
        kinds = [int(k) for k in value.split(",") if k.strip()]
    except ValueError:
        raise UserError(f"invalid --kinds {value!r}: expected comma-separated integers") from None
    if not kinds or not all(0 <= k <= 65535 for k in kinds):
        raise UserError(f"invalid --kinds {value!r}: kinds are integers 0-65535")
    return kinds


def _depths(root_id: str, events: list[Event]) -> dict[str, int]:
    """Depth of every event reachable from the root through `reply` links (root = 0)."""
    parents = {e.id: thread_links(e)[0] for e in events}
    depths: dict[str, int] = {root_id: 0}

    def depth(event_id: str, seen: frozenset[str] = frozenset()) -> int | None:
        if event_id in depths:
            return depths[event_id]
        parent = parents.get(event_id)
        if parent is None or event_id in seen:
            return None
        d = depth(parent, seen | {event_id})
        if d is not None:
            depths[event_id] = d + 1
        return depths.get(event_id)

    for e in events:
        depth(e.id)
    return depths


class Messages:
    """Messages of the channels one identity can read and write."""

    def __init__(self, session: Session) -> None:
        self._s = session

    async def _with_edits(self, events: list[Event], channel_id: str | None = None) -> list[Message]:
        """Message values with the newest edit applied (agents.md §2.1 item 5)."""
        if not events:
            return []
        flt: dict[str, Any] = {"kinds": [EDIT_KIND], "#e": [e.id for e in events]}
        if channel_id is not None:
            flt["#h"] = [channel_id]
        edits = newest_edits(await self._s.query([flt]))
        return [message_view(e, edits.get(e.id)) for e in events]

    async def _mentions(self, channel_id: str, content: str, flags: Sequence[str]) -> list[str]:
        """The `p` values of agents.md §2.3 items 2–4, or a UserError."""
        explicit = list(dict.fromkeys([pubkey_arg(m, "--mention") for m in flags] + uri_mentions(content)))
        if not explicit and "@" not in content:
            return []
        members = await channel_members(self._s, channel_id)
        if members is None:
            raise NotFound(f"channel not found: {channel_id}")
        names = {pk: display_name(p) or "" for pk, p in (await profiles(self._s, members)).items()}
        names = {pk: names.get(pk, "") for pk in members}
        resolution = resolve_names(content, names)
        failed = resolution.unresolved + resolution.ambiguous
        if failed and not explicit:
            what = ", ".join(failed)
            raise UserError(f"cannot resolve mention {what}: use --mention with a pubkey, or fix the name")
        pubkeys = list(dict.fromkeys(explicit + resolution.resolved))
        if len(pubkeys) > MAX_MENTIONS:
            raise UserError(f"too many mentions: {len(pubkeys)} (max {MAX_MENTIONS})")
        outsiders = [pk for pk in pubkeys if pk not in members]
        if outsiders:
            raise UserError(f"mentioned pubkey is not a member of the channel: {', '.join(outsiders)}")
        return pubkeys

    async def send(
        self,
        channel: str,
        content: Text,
        reply_to: str | None = None,
        mentions: Sequence[str] = (),
        broadcast: bool = False,
        files: Sequence[str] = (),
    ) -> SentMessage:
        """Publish a kind 9 (agents.md §2.3, §3.2), a thread reply with `reply_to`.

        `content` is at most 65 536 UTF-8 bytes; `@Name` is resolved against the members'
        names, `mentions` (hex or npub) and `nostr:npub1…` URIs are explicit. `files` (1–10
        paths) are uploaded first; the message then carries one URL line and one `imeta` tag
        each, and `content` may be empty (media.md §13). Raises UserError (bad values,
        unresolved mentions, a parent in another channel, a refused file), NotFound (parent or
        channel) or the relay's refusal; a failed upload publishes nothing.
        """
        channel_id = channel_arg(channel)
        if broadcast and reply_to is None:
            raise UserError("--broadcast requires --reply-to")
        if len(files) > MAX_FILES_PER_MESSAGE:
            raise UserError(f"too many files: {len(files)} (max {MAX_FILES_PER_MESSAGE})")
        parent_id = event_id_arg(reply_to, "--reply-to") if reply_to is not None else None
        given = content() if callable(content) else content
        text = text_arg(given, "content", MAX_CONTENT_BYTES) if given or not files else ""
        tags: list[list[str]] = [["h", channel_id]]
        root: str | None = None
        if parent_id is not None:
            parent = await self._s.get_event(parent_id)
            if first_channel(parent) != channel_id:
                raise UserError(f"reply parent {parent_id} is not in channel {channel_id}")
            parent_reply, parent_root = thread_links(parent)
            if parent_reply is None:
                root = parent_id
                tags.append(["e", parent_id, "", "reply"])
            else:
                root = parent_root
                tags += [["e", str(parent_root), "", "root"], ["e", parent_id, "", "reply"]]
        tags += [["p", pk] for pk in await self._mentions(channel_id, text, mentions)]
        if broadcast:
            tags.append(["broadcast", "1"])
        attached = await self._s.files.upload_many(files) if files else []
        if attached:
            lines = "\n".join(d["url"] for _, d in attached)
            text = f"{text}\n{lines}" if text else lines
            text_arg(text, "content", MAX_CONTENT_BYTES)
            tags += [attachment_tag(d, name) for name, d in attached]
        event = self._s.sign(MESSAGE_KIND, text, tags)
        await self._s.publish(event)
        sent = (event.id, channel_id, event.created_at, parent_id, root, event.tag_values("p"))
        if not attached:
            return SentMessage(*sent)
        listed = [{k: d[k] for k in ("url", "sha256", "size", "type")} | {"name": n} for n, d in attached]
        return SentWithFiles(*sent, files=listed)

    async def get(
        self,
        channel: str,
        limit: int = 50,
        before: int | None = None,
        since: int | None = None,
        kinds: Sequence[int] | None = None,
    ) -> list[Message]:
        """A channel's messages newest first (thread replies included); `before` is exclusive,
        `since` inclusive (unix seconds); `kinds` None means [9]."""
        channel_id = channel_arg(channel)
        flt: dict[str, Any] = {
            "kinds": list(kinds) if kinds is not None else [MESSAGE_KIND],
            "#h": [channel_id],
            "limit": limit,
        }
        if before is not None:
            flt["until"] = before - 1
        if since is not None:
            flt["since"] = since
        return await self._with_edits(await self._s.query([flt]), channel_id)

    async def thread(self, channel: str, event_id: str, limit: int = 100, depth_limit: int = 100) -> Thread:
        """The thread of any of its events, oldest first (a parent before its same-second
        replies), at most `limit`, replies deeper than `depth_limit` left out. Raises NotFound
        when the event is missing or in another channel."""
        channel_id, wanted = channel_arg(channel), event_id_arg(event_id, "--event")
        anchor = await self._s.get_event(wanted)
        if first_channel(anchor) != channel_id:
            raise NotFound(f"event {wanted} is not in channel {channel_id}")
        root_id = thread_links(anchor)[1] or anchor.id
        found = await self._s.query(
            [
                {"ids": [root_id], "#h": [channel_id]},
                {"kinds": [MESSAGE_KIND], "#h": [channel_id], "#e": [root_id], "limit": MAX_THREAD_FETCH},
            ]
        )
        depths = _depths(root_id, found)
        kept = [e for e in found if e.id in depths and depths[e.id] <= depth_limit]
        kept.sort(key=lambda e: (e.created_at, depths[e.id], e.id))
        return Thread(root_id, await self._with_edits(kept[:limit], channel_id))

    async def edit(self, event_id: str, content: Text) -> Edited:
        """Publish a 40003 replacing the text of one of my messages (agents.md §3.5)."""
        target_id = event_id_arg(event_id, "--event")
        text = text_arg(content, "content", MAX_CONTENT_BYTES)
        target = await self._s.get_event(target_id)
        channel_id = first_channel(target)
        if channel_id is None:
            raise UserError(f"event {target_id} is not a channel message")
        event = self._s.sign(EDIT_KIND, text, [["h", channel_id], ["e", target_id]])
        await self._s.publish(event)
        return Edited(event.id, channel_id, target_id)

    async def delete(
        self,
        event_id: str,
        reason_code: str | None = None,
        public_reason: str | None = None,
        action_id: str | None = None,
    ) -> Deleted:
        """Delete a message (agents.md §3.7): kind 5 for my own or my agent's, else kind 9005
        (moderation, with the optional reason tags) which the relay allows owners/admins."""
        target_id = event_id_arg(event_id, "--event")
        target = await self._s.get_event(target_id)
        channel_id = first_channel(target)
        own = target.pubkey == self._s.pubkey
        if not own:
            author_profile = (await profiles(self._s, [target.pubkey])).get(target.pubkey)
            own = author_profile is not None and owner_of(author_profile) == self._s.pubkey
        if own:
            kind, tags = 5, ([["h", channel_id]] if channel_id else []) + [["e", target_id]]
        else:
            if channel_id is None:
                raise UserError(f"event {target_id} is not yours and not in a channel")
            kind, tags = 9005, [["h", channel_id], ["e", target_id]]
            for name, value in (
                ("action_id", action_id),
                ("reason_code", reason_code),
                ("public_reason", public_reason),
            ):
                if value is not None:
                    tags.append([name, value])
        event = self._s.sign(kind, "", tags)
        await self._s.publish(event)
        return Deleted(event.id, kind, target_id, channel_id)

    async def search(
        self,
        query_text: str,
        channel: str | None = None,
        author: str | None = None,
        since: int | None = None,
        limit: int = 20,
    ) -> list[Message]:
        """NIP-50 search over the readable kind 9 (relay.md §11), as displayed: a message is
        found by the text of its newest edit, never by text an edit replaced.

        Two searches run, over kind 9 and over edits (40003, same author/channel scope); an
        edit hit stands for its target message. A candidate with an edit is kept only when its
        newest edit was a hit, one without only when it was. Ranks of the two answers are
        interleaved (best first), at most `limit` messages.
        """
        if not query_text.strip():
            raise UserError("--query is empty")
        channel_id = channel_arg(channel) if channel is not None else None
        scope: dict[str, Any] = {"search": query_text, "limit": limit}
        if channel_id is not None:
            scope["#h"] = [channel_id]
        if author is not None:
            scope["authors"] = [pubkey_arg(author, "--author", on_curve=False)]  # a read
        flt = {"kinds": [MESSAGE_KIND], **scope} | ({"since": since} if since is not None else {})
        hits = await self._s.query([flt])
        edit_hits = await self._s.query([{"kinds": [EDIT_KIND], **scope}])
        hit_ids, edit_hit_ids = {e.id for e in hits}, {e.id for e in edit_hits}
        edited_ids = list(dict.fromkeys(t for e in edit_hits if (t := e.first_tag("e")) and t not in hit_ids))
        targets: dict[str, Event] = {}
        if edited_ids:
            tflt: dict[str, Any] = {"ids": edited_ids, "kinds": [MESSAGE_KIND]}
            if channel_id is not None:
                tflt["#h"] = [channel_id]
            if since is not None:
                tflt["since"] = since
            targets = {e.id: e for e in await self._s.query([tflt])}
        by_edit = [targets[t] for t in edited_ids if t in targets]
        ranked = [e for pair in zip_longest(hits, by_edit) for e in pair if e is not None]
        candidates = list({e.id: e for e in ranked}.values())
        if not candidates:
            return []
        eflt: dict[str, Any] = {"kinds": [EDIT_KIND], "#e": [e.id for e in candidates]}
        if channel_id is not None:
            eflt["#h"] = [channel_id]
        edits = newest_edits(await self._s.query([eflt]))
        kept = [
            message_view(e, edits.get(e.id))
            for e in candidates
            if (edits[e.id].id in edit_hit_ids if e.id in edits else e.id in hit_ids)
        ]
        return kept[:limit]

    async def watch(
        self, channel: str, since: int | None = None, notify: Callable[[str], None] | None = None
    ) -> AsyncIterator[Message]:
        """New kind 9 messages of `channel` as they arrive (a live REQ over WebSocket), from
        `since` (unix seconds; default now, so the stored ones of the current second too),
        each once. Ends only when the caller stops iterating.

        A lost connection (a relay restart) is not the end: as the agent harness does, it
        reconnects with jittered backoff from 1 s to WATCH_BACKOFF_MAX_S, re-authenticates and
        resumes from the newest message seen (less WATCH_RESUME_OVERLAP_S; what was seen is
        not yielded again), so messages sent meanwhile arrive too; `notify` gets one line per
        loss and per recovery. Raises NetworkError when the first connection fails, AuthError
        (no access, AUTH refused, a ban), NotFound (no such channel) or Refused (another
        CLOSED)."""
        channel_id = channel_arg(channel)
        start = int(time.time()) if since is None else since
        newest: int | None = None
        seen: dict[str, None] = {}  # ids already yielded (stored and live can overlap), bounded
        backoff, lost_at, connected = WATCH_BACKOFF_MIN_S, None, False
        while True:
            resume = start if newest is None else max(start, newest - WATCH_RESUME_OVERLAP_S)
            flt = {"kinds": [MESSAGE_KIND], "#h": [channel_id], "since": resume}
            try:
                async with self._s.websocket() as client:
                    try:
                        sub = await client.subscribe([flt])
                    except (aiohttp.ClientError, OSError) as exc:  # the socket went at once
                        raise NetworkError(f"connection lost: {exc or type(exc).__name__}") from None
                    connected = True
                    if lost_at is not None and notify is not None:
                        notify(f"reconnected after {time.monotonic() - lost_at:.1f} s")
                    backoff, lost_at = WATCH_BACKOFF_MIN_S, None
                    reason = "the relay ended the subscription"
                    try:
                        async for event in sub:
                            if event.id not in seen:
                                seen[event.id] = None
                                if len(seen) > WATCH_SEEN_MAX:
                                    del seen[next(iter(seen))]
                                newest = max(newest or 0, event.created_at)
                                yield message_view(event)
                    except RelayError as exc:
                        reason = exc.message
                    finally:
                        await sub.close()
                    # A relay that went away, or closed the subscription with `error:` (shutting
                    # down), is waited for; an access refusal (a ban too) or another CLOSED is
                    # the relay's answer.
                    if reason.startswith(ACCESS_PREFIXES) or not (
                        client.closed or reason.startswith("error:")
                    ):
                        raise await self._s.explain_not_a_member(_closed(reason, False), [channel_id])
            except NetworkError as exc:
                if not connected:  # the first connection: a wrong URL or a relay that is down
                    raise
                reason = exc.message
            lost_at = lost_at if lost_at is not None else time.monotonic()
            delay = backoff * (0.5 + random.random() / 2)  # jittered, as the harness does
            if notify is not None:
                notify(f"connection lost ({reason}); reconnecting in {delay:.1f} s")
            await asyncio.sleep(delay)
            backoff = min(backoff * 2, WATCH_BACKOFF_MAX_S)
