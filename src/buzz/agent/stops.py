"""Stop means stop (issue 27 item 5): `!cancel` ends the turn in flight in its channel, the
harness says so twice — the kind 40099 control outcome of agents.md §4.5 and a short visible
reply in the turn's thread, "stopped by <name>" — and the stopped batch is never prompted
again (its claims are settled as any cancelled batch's).

Who may stop (docs/decisions.md 334): the owner, always (agents.md §4.5 step 3); and the
person who asked — the author of an event in the batch in flight — for that turn only. A job
turn is stopped by its 43005 (jobs spec §6.7), so a requester's `!cancel` does not apply to
it; the owner's does (the job ends with a 43006).
"""

from __future__ import annotations

import logging

from buzz.agent.event_view import reply_anchor, thread_refs
from buzz.agent.runtime import Runtime
from buzz.agent.sessions import TurnEnd
from buzz.agent.status import OUTCOME_CANCEL_NOOP, OUTCOME_CANCELLED
from buzz.agent.turns import Dispatcher, Turn
from buzz.core.event import Event
from buzz.core.nip19 import npub

log = logging.getLogger(__name__)

NOTICE_STOPPED = "stopped"


def may_stop(turn: Turn | None, who: str) -> bool:
    """A requester's stop: `who` wrote an event of the channel batch in flight."""
    if turn is None or turn.job is not None:
        return False
    return any(item.event.pubkey == who for item in turn.batch.items)


def stopped_text(name: str | None, pubkey: str) -> str:
    return f"stopped by {name or npub(pubkey)}"


async def stop(rt: Runtime, dispatcher: Dispatcher, channel: str, command: Event) -> None:
    """Cancel `channel`'s turn in flight for the author of `command` (who may: the caller
    checked), publish the control outcome, and reply "stopped by …" in the turn's thread."""
    turn = dispatcher.in_flight(channel)
    busy = await dispatcher.request_end(channel, TurnEnd.OWNER_CANCEL)
    actor, agent = command.pubkey, rt.identity.pubkey
    outcome = OUTCOME_CANCELLED if busy else OUTCOME_CANCEL_NOOP
    await rt.status.outcome(channel, outcome, actor, agent, thread_refs(command).root)
    if not busy or turn is None or turn.job is not None or not turn.batch.items:
        return
    name = (await rt.profiles.get(actor)).display_name
    log.info("turn in %s stopped by %s", channel, name or actor[:12])
    anchor = reply_anchor(turn.batch.items[-1].event)
    await rt.status.notice(channel, anchor, NOTICE_STOPPED, stopped_text(name, actor))
