"""End-to-end encrypted DMs to the agent (NIP-17; docs/decisions.md 283).

The harness subscribes to the gift wraps addressed to its agent (`{"kinds":[1059],"#p":[A]}`)
over the last `GIFT_WRAP_PAST_DRIFT_S` (a wrap's time is random up to two days back, so a
`since` of "now" would miss live ones; after a reconnect the whole window is read again) and
opens each with the agent key (`buzz.core.nip59`). A message counts when it was written (the
rumor's own time) after start − `--catch-up`; older ones were the business of an earlier run.

A private message then takes the mention path with the same rules (`Intake.accept`): the
respond-to policy of a DM (`author_decision`), the answered-once claim on the relay
(`buzz.agent.claims`, keyed by the rumor id — the message's own id, the same in every copy),
the queue, the turn. The queue and the sessions are keyed per conversation
(`prompts.private_key_of`). The agent answers privately itself (`buzz dms send --private`,
which the turn's `[Context]` names); its copy to itself tags the message it answers, which is
how a restarted harness knows the answer is on the relay (`answered`). Nothing public is
published about the conversation: no reactions, typing or channel notices (`status`); the
harness's own notices (retrying, failure) are private DMs to the participants.
"""

from __future__ import annotations

import logging
import time

from buzz.agent.claims import Claim
from buzz.agent.event_view import NOTICE_TAG, is_notice
from buzz.agent.gates import Decision, author_decision
from buzz.agent.intake import PRIVATE_SUB, Intake
from buzz.agent.prompts import is_private, private_key_of, private_participants
from buzz.agent.runtime import Runtime
from buzz.core import nip59
from buzz.core.event import Event
from buzz.core.limits import GIFT_WRAP_PAST_DRIFT_S
from buzz.core.nip59 import GIFT_WRAP_KIND

log = logging.getLogger(__name__)

PRIVATE_PROMPT_TAG = "private DM"
MAX_OWN_WRAPS = 500  # own copies read to find an answer after a restart
ANSWERED_MEMORY = 10_000


class PrivateInbox:
    """Opens the agent's gift wraps and hands the messages to the intake (`accept`, or its
    claim watcher when another process holds the claim)."""

    def __init__(self, runtime: Runtime, intake: Intake) -> None:
        self.rt = runtime
        self.intake = intake
        self.start = int(time.time())
        self.answered: dict[str, None] = {}  # rumor ids our own copies answer (bounded)
        self.seen: dict[str, None] = {}  # rumor ids handled (bounded)
        runtime.claims.private_answered = self.has_answer
        runtime.status.private_notice = self.notice

    async def open(self, start: int) -> None:
        self.start = start
        agent = self.rt.identity.pubkey
        await self.rt.link.subscribe(
            PRIVATE_SUB,
            {"kinds": [GIFT_WRAP_KIND], "#p": [agent]},
            start - GIFT_WRAP_PAST_DRIFT_S,
            window=GIFT_WRAP_PAST_DRIFT_S,
        )

    def _remember(self, store: dict[str, None], key: str) -> bool:
        if key in store:
            return False
        store[key] = None
        if len(store) > ANSWERED_MEMORY:
            del store[next(iter(store))]
        return True

    async def wrap(self, wrap: Event) -> None:
        """One gift wrap from the subscription: open it, gate it, claim it, queue it."""
        rt = self.rt
        agent, owner = rt.identity.pubkey, rt.identity.owner
        try:
            opened = nip59.unwrap(rt.identity.secret, wrap)
        except nip59.UnwrapError as exc:
            log.info("gift wrap %s does not open: %s", wrap.id[:12], exc.reason)
            return
        rumor = opened.rumor
        if rumor.pubkey == agent:  # our own copy of an answer (or of a notice: not an answer)
            for target in () if is_notice(rumor) else rumor.tag_values("e"):
                self._remember(self.answered, target)
            return
        if rumor.created_at < self.start - rt.config.catch_up or not self._remember(self.seen, rumor.id):
            return
        others = nip59.conversation_of(rumor, agent)
        decision = author_decision(
            rt.config.respond_to, "dm", rumor.pubkey, agent, owner, rt.config.respond_to_allowlist
        )
        if decision is Decision.CHECK_MEMBER:
            decision = Decision.ADMIT  # the author is a participant of the conversation by construction
        elif decision is Decision.CHECK_SIBLING:
            admitted = owner is not None and await rt.profiles.is_sibling(rumor.pubkey, agent, owner)
            decision = Decision.ADMIT if admitted else Decision.DROP
        if decision is Decision.DROP:
            log.info("dropped private DM %s: author %s not admitted", rumor.id[:12], rumor.pubkey[:12])
            return  # DMs stay silent (the DM rule)
        key = private_key_of(others)
        # The claim (public app data, 30078) names the rumor id, a hash that says nothing of
        # the message; its time is the message's own (a wrap's random one is outside the relay's
        # clock window for 30078, and the heartbeat says when the agent works anyway).
        claim = await rt.claims.claim(rumor)
        if claim is Claim.SETTLED:
            log.info("skipped private DM %s: this agent already answered it", rumor.id[:12])
            return
        if claim is Claim.HELD:
            log.info("private DM %s is taken by another process; watching its claim", rumor.id[:12])
            self.intake.watch(key, rumor, PRIVATE_PROMPT_TAG)
            return
        log.info("private DM %s from %s queued", rumor.id[:12], rumor.pubkey[:12])
        await self.intake.accept(key, rumor, PRIVATE_PROMPT_TAG, False)

    async def has_answer(self, rumor: Event) -> bool:
        """True when one of the agent's own wraps answers `rumor` (tags it with `e`): an answer
        sent by a process that died before it marked the claim done."""
        if rumor.id in self.answered:
            return True
        agent = self.rt.identity.pubkey
        since = max(rumor.created_at - nip59.RANDOM_PAST_S, 0)
        flt = {"kinds": [GIFT_WRAP_KIND], "#p": [agent], "since": since, "limit": MAX_OWN_WRAPS}
        for wrap in await self.rt.link.query([flt], 10.0):
            try:
                opened = nip59.unwrap(self.rt.identity.secret, wrap)
            except nip59.UnwrapError:
                continue
            mine = opened.rumor
            if mine.pubkey == agent and not is_notice(mine) and rumor.id in mine.tag_values("e"):
                return True
        return False

    async def notice(self, key: str, anchor: str, text: str) -> bool:
        """A harness notice (retrying, failure) to the conversation, privately."""
        if not is_private(key):
            return False
        rt = self.rt
        others = private_participants(key)
        try:
            tags = [["e", anchor], [NOTICE_TAG, "notice"]]
            rumor = nip59.make_rumor(rt.identity.secret, others, text, tags)
            for wrap in nip59.wrap_message(rt.identity.secret, rumor, [*others, rt.identity.pubkey]):
                result = await rt.link.publish(wrap)
                if not result.accepted:
                    log.warning("relay refused a private notice: %s", result.message)
                    return False
        except Exception as exc:
            log.warning("could not send a private notice: %s", exc)
            return False
        return True
