"""The workspace client API: one `Workspace` per authenticated identity on one relay.

    identity = Identity.from_text(private_key_text, auth_tag_text)
    async with Workspace(relay_url, identity) as ws:
        sent = await ws.messages.send(channel_id, "hello")        # SentMessage
        rows = await ws.channels.listing(member=True)              # [ChannelSummary]
        text = await ws.memory().get("core")                       # agent side (owner from the tag)

Areas (each a small class over the same `Session`): `channels` (and members), `messages`
(threads, edits, deletion, search), `reactions`, `dms`, `private_dms` (NIP-17 gift wraps),
`users` (profiles, presence),
`huddles` (start, list, status), `jobs` (request, wait, list, cancel, handoff), `files` (blob upload and download, media.md §13) and
`memory(owner=…, agent=…)` (engrams). Values are the
dataclasses of `buzz.client.models`; every failure is a `buzz.client.errors.WorkspaceError`.
Transports are the API's choice: the HTTP bridge (NIP-98) for one-shot reads and writes, a
NIP-42 WebSocket for presence and engrams. The CLI (`buzz.cli`), the MCP server (`buzz.mcp`)
and the agent harness (`buzz.agent`) are faces over this API and never import each other.
"""

from __future__ import annotations

import functools
from types import TracebackType
from typing import TYPE_CHECKING

from buzz.client.channels import Channels
from buzz.client.dms import Dms
from buzz.client.identity import Identity
from buzz.client.messages import Messages
from buzz.client.reactions import Reactions
from buzz.client.session import DEFAULT_TIMEOUT_S, Session
from buzz.client.users import Users
from buzz.client.workflows import Workflows

if TYPE_CHECKING:
    from buzz.client.agent_directory import AgentDirectory
    from buzz.client.agent_records import AgentRecords
    from buzz.client.huddles import Huddles
    from buzz.client.jobs import Jobs
    from buzz.client.memory import Memory
    from buzz.client.private_dms import PrivateDms


class Workspace:
    """The workspace as seen by `identity` on the relay at `relay_url` (ws/wss/http/https).

    `timeout` bounds each bridge request, in seconds. Raises UserError for a bad relay URL.
    Use as an async context manager: the bridge session opens on entry and closes on exit.
    """

    def __init__(self, relay_url: str, identity: Identity, *, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.session = Session(relay_url, identity, timeout=timeout)
        self.channels = Channels(self.session)
        self.messages = Messages(self.session)
        self.reactions = Reactions(self.session)
        self.dms = Dms(self.session)
        self.users = Users(self.session)
        self.workflows = Workflows(self.session)  # workflows.md §16
        self.files = self.session.files  # upload and download blobs (media.md §13)

    # Huddles, memory (engram crypto, unified diffs) and private DMs (NIP-44) load when first
    # used: a CLI command that sends a message does not import them.
    @functools.cached_property
    def huddles(self) -> Huddles:
        from buzz.client.huddles import Huddles

        return Huddles(self.session)

    @functools.cached_property
    def private_dms(self) -> PrivateDms:
        """End-to-end encrypted DMs (NIP-17 gift wraps)."""
        from buzz.client.private_dms import PrivateDms

        return PrivateDms(self.session)

    @functools.cached_property
    def jobs(self) -> Jobs:
        """Jobs (jobs spec §7): request, wait, list, show, cancel, hand off."""
        from buzz.client.jobs import Jobs

        return Jobs(self.session)

    @functools.cached_property
    def agent_records(self) -> AgentRecords:
        """Personas, teams and managed agents (jobs spec §11, §13.2)."""
        from buzz.client.agent_records import AgentRecords

        return AgentRecords(self.session)

    @functools.cached_property
    def agent_directory(self) -> AgentDirectory:
        """The agents I can see, with owner, policy and live status (jobs spec §13)."""
        from buzz.client.agent_directory import AgentDirectory

        return AgentDirectory(self.session)

    async def __aenter__(self) -> Workspace:
        await self.session.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.session.__aexit__(exc_type, exc, tb)

    @property
    def identity(self) -> Identity:
        return self.session.identity

    @property
    def pubkey(self) -> str:
        return self.session.pubkey

    def memory(self, owner: str | None = None, agent: str | None = None) -> Memory:
        """The engram memory of one pair (engram.md §12.3): agent side by default (owner from
        `owner`, 64 hex, else the identity's NIP-OA tag), owner side with `agent`. Raises
        UserError (both given, bad key, no owner known, `agent` is myself)."""
        from buzz.client.memory import Memory, resolve_pair

        return Memory(self.session, resolve_pair(self.session, owner, agent))
