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
from buzz.agent.prompts import ChannelInfo
from buzz.agent.queue import WorkQueue
from buzz.agent.relay_link import RelayLink
from buzz.agent.sessions import SessionTable
from buzz.agent.status import StatusPublisher
from buzz.client.files import Files


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
    voice_guidelines: dict[str, str] = field(default_factory=dict)  # channel → latest 48106 text
    files: Files | None = None  # downloads attached files for the agent (media.md §14.1)

    def channel(self, channel_id: str) -> ChannelInfo:
        """Known metadata of `channel_id`, else a placeholder of type `unknown`."""
        return self.channels.get(channel_id) or ChannelInfo(channel_id, channel_id, "unknown")
