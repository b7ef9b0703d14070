"""What the harness itself publishes, all signed by the agent key (agents.md §4.13 item 2).

| event | when |
|---|---|
| kind 7 👀 on an accepted event | when it is queued |
| kind 7 💬 on the batch's events | when the prompt starts |
| kind 5 `["e", <reaction id>]` | when the turn ends (however it ends) and when an event leaves the queue |
| 20002 typing `["h", C]` | at turn start and every 5 s while it runs, content `stopped` when it ends (unless `--no-typing`) |
| 20001 presence | `online` on every (re)connect and every 60 s, `offline` on graceful exit (unless `--no-presence`) |
| kind 9 notices, tagged `["buzz:agent-notice", <type>]` | `retrying` after a batch's first failed attempt, `failure` after its last (§4.7 item 5), `not-admitted` to an author the respond-to policy does not admit (issue 14 items 1, 2, 6) |
| kind 40099 control outcome | for every owner command (§4.5) |

In an end-to-end encrypted DM (NIP-17, `prompts.is_private`) none of these is published: a
reaction, a typing indicator or a notice would tell the relay and the workspace that the
conversation exists. Its notices go to its participants as private DMs (`private_notice`).

The harness never posts the agent's answer. Builders are pure; `StatusPublisher` sends them and
logs (never raises) when a status event cannot be published.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence

import orjson

from buzz.agent.event_view import NOTICE_TAG
from buzz.agent.prompts import is_private
from buzz.agent.queue import Item
from buzz.client import PublishResult
from buzz.core.event import Event

log = logging.getLogger(__name__)

EYES = "\U0001f440"  # 👀 queued
SPEECH = "\U0001f4ac"  # 💬 working
TYPING_REFRESH_S = 5.0
TYPING_STOPPED = "stopped"  # a 20002's content that ends a typing line (the browser's, decision 223)
PRESENCE_REFRESH_S = 60.0
FAILURE_NOTICE = "Sorry, I could not process this message."
RETRYING_NOTICE = "I'm having trouble processing this message right now; I'm retrying."
NOTICE_RETRYING, NOTICE_FAILURE, NOTICE_NOT_ADMITTED = "retrying", "failure", "not-admitted"
# On a not-admitted notice: `["buzz:asker", <pubkey>, <respond-to mode>]`, so the agent's owner
# can let that asker in with one action (the browser's "Let … ask …"; decision 360).
ASKER_TAG = "buzz:asker"
Tags = Sequence[Sequence[str]]
NOTICE_TEXT: dict[str, str] = {NOTICE_RETRYING: RETRYING_NOTICE, NOTICE_FAILURE: FAILURE_NOTICE}

# Control outcome types of §4.5 (this project's vocabulary).
OUTCOME_SHUTDOWN = "agent_shutdown"
OUTCOME_CANCELLED = "agent_turn_cancelled"
OUTCOME_CANCEL_NOOP = "agent_cancel_noop"
OUTCOME_ROTATED = "agent_session_rotated"
OUTCOME_ROTATE_NOOP = "agent_rotate_noop"


def reaction(secret: str, target_id: str, emoji: str, channel: str) -> Event:
    """Kind 7 (§3.6): content one emoji, tags `[["e", target], ["h", C]]` — the target's
    channel, which the relay requires of a reaction in a channel (docs/decisions.md 174)."""
    return Event.create(secret, 7, emoji, [["e", target_id], ["h", channel]])


def removal(secret: str, reaction_id: str, channel: str) -> Event:
    """Kind 5 with `["e", <reaction id>]` and the reaction's channel `["h", C]` (§3.6)."""
    return Event.create(secret, 5, "", [["e", reaction_id], ["h", channel]])


def failure_level(exc: BaseException) -> int:
    """How loud a failed publish of the harness's own status or progress is: a relay verdict
    (the channel archived, the turn or job already over) is a race the harness cannot act on,
    INFO; no answer at all is an operator's WARNING."""
    return logging.INFO if getattr(exc, "relay_message", None) else logging.WARNING


def typing(secret: str, channel: str) -> Event:
    """Kind 20002 with `["h", C]` and empty content (§3.8 item 3)."""
    return Event.create(secret, 20002, "", [["h", channel]])


def typing_stopped(secret: str, channel: str) -> Event:
    """Kind 20002 with `["h", C]` and content `stopped`: the turn is over, so readers clear
    its typing line at once instead of after its time to live — a stopped turn posts no answer
    that would clear it (docs/decisions.md 223, 154)."""
    return Event.create(secret, 20002, TYPING_STOPPED, [["h", channel]])


def presence(secret: str, status: str) -> Event:
    """Kind 20001 with content `online`, `away` or `offline` (§3.8 item 3)."""
    return Event.create(secret, 20001, status, [])


def control_outcome(
    secret: str, channel: str, outcome: str, actor: str, target: str, root: str | None
) -> Event:
    """Kind 40099 (§4.5): `["h", C]` (+ `["e", R, "", "reply"]` when the command was a reply in
    the thread rooted at R); content `{"type", "actor", "target", "channel_id"}`."""
    tags = [["h", channel]]
    if root is not None:
        tags.append(["e", root, "", "reply"])
    content = orjson.dumps(
        {"type": outcome, "actor": actor, "target": target, "channel_id": channel}
    ).decode()
    return Event.create(secret, 40099, content, tags)


def notice(
    secret: str, channel: str, anchor: str, kind: str, text: str | None = None, extra: Tags = ()
) -> Event:
    """Kind 9 replying to `anchor` (a thread root or top-level event, §4.12 step 1) with the
    marker tag `["buzz:agent-notice", kind]`: no `p` tags, no stack trace, no secret (§4.7
    item 5). `text` defaults to `NOTICE_TEXT[kind]`; `extra` tags follow the marker."""
    tags = [["h", channel], ["e", anchor, "", "reply"], [NOTICE_TAG, kind], *map(list, extra)]
    return Event.create(secret, 9, text if text is not None else NOTICE_TEXT[kind], tags)


def failure_notice(secret: str, channel: str, anchor: str) -> Event:
    """The dead-letter notice (§4.7 item 5)."""
    return notice(secret, channel, anchor, NOTICE_FAILURE)


Publish = Callable[[Event], Awaitable[PublishResult]]
PrivateNotice = Callable[[str, str, str], Awaitable[bool]]  # (conversation key, anchor, text)


class StatusPublisher:
    """Sends status events through `publish`; failures are logged, never raised."""

    def __init__(
        self, publish: Publish, secret: str, *, typing_enabled: bool, presence_enabled: bool
    ) -> None:
        self._publish = publish
        self._secret = secret
        self.typing_enabled = typing_enabled
        self.presence_enabled = presence_enabled
        self.private_notice: PrivateNotice | None = None  # set by the private inbox

    async def send(self, event: Event, what: str) -> bool:
        try:
            result = await self._publish(event)
        except Exception as exc:
            # a channel archived meanwhile, a turn already over: `failure_level`
            log.log(failure_level(exc), "could not publish %s: %s", what, exc)
            return False
        if not result.accepted:
            log.info("relay refused %s: %s", what, result.message)
        return result.accepted

    async def react(self, items: Iterable[Item], emoji: str) -> None:
        """Add `emoji` to each item's event and remember the reaction id on the item."""
        for item in items:
            if emoji in item.reactions or is_private(item.channel):
                continue
            event = reaction(self._secret, item.event.id, emoji, item.channel)
            if await self.send(event, f"{emoji} reaction"):
                item.reactions[emoji] = event.id

    async def unreact(self, items: Iterable[Item], emojis: Iterable[str] = (EYES, SPEECH)) -> None:
        """Remove our `emojis` reactions from the items (kind 5 per reaction)."""
        wanted = tuple(emojis)
        for item in items:
            for emoji in wanted:
                reaction_id = item.reactions.pop(emoji, None)
                if reaction_id is not None:
                    await self.send(removal(self._secret, reaction_id, item.channel), f"{emoji} removal")

    async def presence(self, status: str) -> None:
        if self.presence_enabled:
            await self.send(presence(self._secret, status), f"presence {status}")

    async def presence_loop(self) -> None:
        """`online` every 60 s (the (re)connect hook sends the first one)."""
        while True:
            await asyncio.sleep(PRESENCE_REFRESH_S)
            await self.presence("online")

    @contextlib.asynccontextmanager
    async def typing(self, channel: str) -> AsyncIterator[None]:
        """Typing indicators for `channel` while the block runs: now, then every 5 s."""
        if not self.typing_enabled or is_private(channel):
            yield
            return

        async def loop() -> None:
            while True:
                await self.send(typing(self._secret, channel), "typing")
                await asyncio.sleep(TYPING_REFRESH_S)

        task = asyncio.create_task(loop(), name=f"typing-{channel}")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            await asyncio.shield(self.send(typing_stopped(self._secret, channel), "typing stopped"))

    async def outcome(self, channel: str, outcome: str, actor: str, target: str, root: str | None) -> None:
        await self.send(
            control_outcome(self._secret, channel, outcome, actor, target, root), f"control outcome {outcome}"
        )

    async def failure(self, channel: str, anchor: str) -> None:
        await self.notice(channel, anchor, NOTICE_FAILURE)

    async def notice(
        self, channel: str, anchor: str, kind: str, text: str | None = None, extra: Tags = ()
    ) -> bool:
        if is_private(channel):
            if self.private_notice is None:
                return False
            return await self.private_notice(channel, anchor, text or NOTICE_TEXT.get(kind, kind))
        return await self.send(notice(self._secret, channel, anchor, kind, text, extra), f"{kind} notice")
