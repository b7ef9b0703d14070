"""The parts of a running harness, in one place so each module receives what it uses.

Built by `buzz.agent.harness.Harness`; read by the turn dispatcher (`turns.py`), the session
factory (`session_factory.py`) and the intake (`intake.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from buzz.agent.acp_pool import AgentPool
from buzz.agent.claims import Claims
from buzz.agent.config import HarnessConfig
from buzz.agent.directory import Members, Profiles
from buzz.agent.gates import WakeRule
from buzz.agent.identity import AgentIdentity
from buzz.agent.policy import Policy, from_flags
from buzz.agent.prompts import PRIVATE_DM_TYPE, ChannelInfo, is_private
from buzz.agent.queue import WorkQueue
from buzz.agent.relay_link import RelayLink
from buzz.agent.sessions import SessionTable
from buzz.agent.status import StatusPublisher
from buzz.agent.work_status import WorkStatus
from buzz.client.files import Files
from buzz.core.event import Event
from buzz.core.keys import is_hex


@dataclass
class Runtime:
    """Everything a running harness shares. `channels` holds the member channels it serves;
    `agent_name` is the agent's display name (for session titles and slash commands)."""

    config: HarnessConfig
    identity: AgentIdentity
    cwd: str
    rules: tuple[WakeRule, ...]
    pool: AgentPool
    sessions: SessionTable
    queue: WorkQueue
    status: StatusPublisher
    link: RelayLink
    profiles: Profiles
    members: Members
    claims: Claims
    channels: dict[str, ChannelInfo] = field(default_factory=dict)
    agent_name: str | None = None
    voice_guidelines: dict[str, Event] = field(default_factory=dict)  # channel → newest 48106 seen
    persona_name: str | None = None  # the --persona's display name (default session titles)
    # whom the agent answers and its pool size: the flags, or the owner's 30177 applied live
    policy: Policy | None = None
    # the relay's own signing key (NIP-11 `self`), read at start: a relay-signed message is a
    # workflow's post, answered as its owner's (its `actor` tag, relay.md §10.3)
    relay_pubkey: str | None = None
    work: WorkStatus = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.policy is None:
            self.policy = from_flags(self.config)
        # the 30181 snapshots (jobs spec §12.3); the queue tells it when `queued` changes
        self.work = WorkStatus(self, enabled=not self.config.no_work_status)
        self.queue.on_change = self.work.queue_changed

    def author_of(self, event: Event) -> str:
        """Whom the author gate weighs: the signer, or for a message the relay signed on a
        workflow's behalf the workflow's owner, as the relay itself reads it (relay.md §10.3
        effective author). Only the relay's key makes `actor` count: anyone else's is ignored."""
        if self.relay_pubkey is None or event.pubkey != self.relay_pubkey:
            return event.pubkey
        actor = event.first_tag("actor")
        return actor if actor is not None and is_hex(actor, 64) else event.pubkey

    def note_voice_guidelines(self, channel_id: str, event: Event) -> None:
        """Keep `event` (a 48106 of the channel) when it is the newest seen there."""
        known = self.voice_guidelines.get(channel_id)
        if known is None or (event.created_at, event.id) > (known.created_at, known.id):
            self.voice_guidelines[channel_id] = event

    def voice_text(self, channel_id: str) -> str | None:
        """The channel's voice guidelines (its newest 48106), None when it is no voice huddle."""
        known = self.voice_guidelines.get(channel_id)
        return known.content if known is not None else None

    files: Files | None = None  # downloads attached files for the agent (media.md §14.1)

    def channel(self, channel_id: str) -> ChannelInfo:
        """Known metadata of `channel_id`, else a placeholder of type `unknown`; a private
        conversation's key gives its `private-dm` placeholder."""
        if is_private(channel_id):
            return ChannelInfo(channel_id, "private DM", PRIVATE_DM_TYPE)
        return self.channels.get(channel_id) or ChannelInfo(channel_id, channel_id, "unknown")
