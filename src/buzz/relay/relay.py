"""The composition root: builds the store, the pipelines and the registries from a RelayConfig
and owns their lifetimes. Handlers reach everything through one `Relay` object."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from buzz.core import nip_oa
from buzz.core.errors import Blocked, BuzzError, ServerError
from buzz.core.event import Event
from buzz.core.keys import public_key
from buzz.core.kinds import KindTable
from buzz.core.nip42 import normalize_relay_url
from buzz.core.stored import StoredEvent
from buzz.media.blobs import DbBlobs, FileBlobs
from buzz.media.service import MediaService
from buzz.relay.auth import banwatch
from buzz.relay.auth.access import ChannelAccess
from buzz.relay.auth.admission import NOT_A_RELAY_MEMBER, Admission, nip_aa_owners
from buzz.relay.auth.sessions import Sessions
from buzz.relay.config import RelayConfig
from buzz.relay.connection import Connection
from buzz.relay.delivery.fanout import FanOut
from buzz.relay.delivery.presence import Presence
from buzz.relay.delivery.reads import Reads
from buzz.relay.delivery.subscriptions import SubscriptionIndex
from buzz.relay.huddle import Huddles
from buzz.relay.ingestion.emit import Emitter
from buzz.relay.ingestion.ingest import Ingest
from buzz.relay.ingestion.rules import VALIDATORS, KindRules
from buzz.relay.ingestion.workflow_host import WorkflowHost
from buzz.relay.operator import relay_key
from buzz.relay.operator.metrics_prom import Snapshot
from buzz.relay.operator.telemetry import Telemetry
from buzz.relay.replicas.bus import RedisBus
from buzz.relay.transport.http_guard import HttpGuard, fd_budget, open_file_limit
from buzz.relay.transport.pings import PingWheel
from buzz.store import open_store
from buzz.store.base import EventStore, StoreError
from buzz.workflows.engine import Engine

log = logging.getLogger(__name__)


class Relay:
    """Holds the relay's parts. `await start()` before serving, `await stop()` after."""

    def __init__(self, config: RelayConfig) -> None:
        self.config = config
        self.secret_key = relay_key.load_or_create(config.data_dir, config.relay_private_key)
        self.pubkey = public_key(self.secret_key)
        self.store: EventStore = open_store(config.database_url, config.data_dir)
        self.executor = ThreadPoolExecutor(max_workers=config.verify_workers, thread_name_prefix="verify")
        self.index = SubscriptionIndex()
        self.kinds = KindTable(config.open_kinds)  # the built-in kinds and the operator's (BUZZ_OPEN_KINDS)
        self.access = ChannelAccess(self.store, table=self.kinds)
        self.fanout = FanOut(self.index, self.access)
        self.rules = KindRules(self.store, self.access, self.pubkey, self.kinds, validators=VALIDATORS)
        self.ingest = Ingest(
            self.store,
            self.fanout,
            self.rules,
            self.executor,
            config.max_past_drift_s,
            config.verify_workers,
            self.kinds,
        )
        self.reads = Reads(self.store, self.access, self.kinds)
        self.connections: set[object] = set()
        # What revocation and the ban watch re-check: the sockets, and a mesh owner's remote seats.
        self.sessions = Sessions(self.connections, lambda: self.huddles.remote_seats())
        self.pings = PingWheel()  # relay.md §7.1 item 4, one timer for every connection
        # Workspace follow-ups (relay.md §4.6, §4.7) and presence (§12.2 item 2).
        self.emitter = Emitter(self.store, self.fanout, self.access, self.secret_key, self.sessions)
        self.presence = Presence()
        self.rules.emitter = self.emitter
        self.rules.presence = self.presence
        # media.md: blobs under <data>/media, or in PostgreSQL rows (`BUZZ_MEDIA_STORE`)
        media_root = config.data_dir / "media"
        blobs = (
            DbBlobs(self.store, media_root / "tmp")
            if config.media_store == "db"
            else FileBlobs(self.store, media_root)
        )
        self.media = MediaService(config.media, config.media_base_url, self.store, blobs)
        self.rules.media = self.media
        self.access.on_forget.append(self.media.forget_access)  # a membership change, anywhere
        self.reads.presence = self.presence
        # workflows.md: the engine acts through the relay's own paths (`WorkflowHost`); ingest
        # hands it committed events. Off (BUZZ_WORKFLOWS_ENABLED=false): definitions are stored only.
        self.workflow_host = WorkflowHost(self.store, self.fanout, self.rules, self.emitter, self.secret_key)
        self.workflows = Engine(
            self.store, self.workflow_host, self.secret_key, self.pubkey, config.workflows
        )
        if config.workflows.enabled:
            self.rules.workflows = self.workflows
            self.ingest.on_stored = self._workflow_door
        self.huddles = Huddles(self)  # huddle.md: audio sockets, rooms, lifecycle
        self.stats: collections.Counter[str] = collections.Counter()
        # The open-file limit shared out between HTTP and WebSockets (docs/limits.md).
        self.fd_budget = fd_budget(open_file_limit(), config.max_connections, config.max_http_connections)
        if self.fd_budget.websockets < config.max_connections:
            log.warning(
                "BUZZ_MAX_CONNECTIONS %d is more than %d open files allow: at most %d WebSockets "
                "(raise the limit: ulimit -n, or LimitNOFILE= in a systemd unit)",
                config.max_connections,
                self.fd_budget.nofile,
                self.fd_budget.websockets,
            )
        self.http_guard = HttpGuard(self.fd_budget, self.stats)
        self.telemetry = Telemetry(self.snapshot)  # operator log lines and /metrics
        self.fanout.metrics = self.ingest.metrics = self.reads.metrics = self.telemetry.metrics
        self.workspace_setting: str | None = None  # `buzz admin workspace`, as read at start
        self.metrics_url: str | None = None  # set by the server when /metrics listens
        self._ban_watch: asyncio.Task[None] | None = None  # closes sessions of keys banned later
        # relay.md §12.4: with Redis, fan-out, access changes and presence reach every replica.
        self.bus: RedisBus | None = self._attach_bus() if config.redis_url else None
        self._handlers_in_flight = 0
        self._configured_url = normalize_relay_url(config.relay_url)
        self._scheme = config.relay_url.split("://", 1)[0].lower()

    async def start(self) -> None:
        await self.store.open()
        if self.config.owner_pubkey:  # relay.md §4.4 item 2: the workspace owner is always a member
            await self.store.put_relay_member(self.config.owner_pubkey, "owner")  # type: ignore[attr-defined]
        self.workspace_setting = await self.store.get_setting("workspace")  # type: ignore[attr-defined]
        if self.bus is not None:
            await self.bus.start()
        await self.huddles.start()  # the mesh listener, when BUZZ_MESH is on
        if self.config.media.enabled:
            self.media.start()  # the collection of unreferenced blobs, now and hourly
        # A crash between a channel change's commit and its follow-ups left state behind.
        await self.emitter.repair_all()
        if self.config.workflows.enabled:
            await self.workflows.start(
                sole=not self.config.on_postgres
            )  # resumes runs a crash left behind (workflows.md §11.3)
        self._ban_watch = asyncio.get_running_loop().create_task(
            banwatch.watch(self.sessions, self.store.banned_among),  # type: ignore[attr-defined]
            name="ban-watch",
        )

    async def stop(self) -> None:
        self.pings.stop()
        await self.workflows.stop()
        await self.media.stop()
        await banwatch.stop(self._ban_watch)
        if self.bus is not None:
            await self.bus.stop()
        await self.store.close()
        self.executor.shutdown(wait=False, cancel_futures=True)

    def _attach_bus(self) -> RedisBus:
        """Build the Redis bus and wire it into fan-out, the subscription index, the membership
        cache and presence (which moves to Redis). Only with `config.redis_url`."""
        config = self.config
        assert config.redis_url
        bus = RedisBus(
            config.redis_url,
            config.workspace_id,
            self.fanout,
            self.access,
            self.sessions,  # sockets, and a mesh owner's remote huddle seats
            self.stats,
            config.redis_timeout_ms / 1000,
        )
        self.fanout.bus = bus
        self.index.listener = bus.refs
        self.access.on_invalidate = bus.access_changed
        self.presence = self.rules.presence = self.reads.presence = bus.presence
        return bus

    # -- what the operator sees (`Telemetry`) --------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The gauges of one /metrics scrape."""
        nostr = [c for c in list(self.connections) if isinstance(c, Connection)]  # also huddle sockets
        rooms = self.huddles.rooms
        bus = self.bus
        return Snapshot(
            connections=len(nostr),
            authenticated=sum(1 for c in nostr if c.pubkey is not None),
            huddle_rooms=len(rooms),
            huddle_peers=rooms.peer_count(),
            huddle_counters=dict(self.huddles.stats.counters),
            relay_stats=dict(self.stats),
            bus_enabled=bus is not None,
            bus_connected=bool(bus is not None and bus.connected),
            mesh_counters=self.huddles.mesh_counters(),
            http_connections=self.http_guard.connections,
            http_requests=self.http_guard.requests,
        )

    def report_stopping(self, signal_name: str) -> None:
        """The `relay stopping` line: what is still open when SIGINT/SIGTERM arrives."""
        huddle_sockets = len(self.huddles.sockets)  # also in self.connections (one budget)
        self.telemetry.relay_stopping(
            signal_name, len(self.connections) - huddle_sockets, huddle_sockets, self.huddles.mesh is not None
        )

    def _workflow_door(self, stored: StoredEvent) -> None:
        self.workflows.on_stored(stored)

    # -- NIP-42 ------------------------------------------------------------------------------
    def relay_urls(self, host: str | None) -> frozenset[str]:
        """Normalized URLs an AUTH `relay` tag may name: RELAY_URL, and RELAY_URL's scheme with
        the request's Host (relay.md §7.3 item 2)."""
        urls = {self._configured_url}
        if host:
            with contextlib.suppress(ValueError):  # an unparseable Host header names no URL
                urls.add(normalize_relay_url(f"{self._scheme}://{host}"))
        return frozenset(urls)

    async def admit(self, auth_event: Event, auth_tag: Sequence[str] | None = None) -> str:
        """`admission` for a one-request session (the HTTP bridge): the admitted pubkey."""
        return (await self.admission(auth_event, auth_tag)).pubkey

    async def admission(self, auth_event: Event, auth_tag: Sequence[str] | None = None) -> Admission:
        """After a verified AUTH event: the ban gate (relay.md §7.3 item 2.3), membership gates
        (§4.4, NIP-AA §7.3 item 3), then the registered owner (§7.3 item 4); returns who was
        admitted and the owners whose ban would have refused them.

        Raises Blocked("you are banned from this community") for a banned pubkey or a NIP-OA
        tag from a banned owner, Restricted("not a relay member") for a closed workspace and a
        non-member that NIP-AA (when enabled) does not admit. The ban list and the workspace
        switch are read from the store at every call, so `buzz admin` changes apply to the next
        AUTH of a running relay. `auth_tag` replaces the event's own `auth` tags for the HTTP
        bridge, whose NIP-98 event carries none (the `X-Auth-Tag` header).
        """
        if auth_tag is not None:
            auth_event = _with_auth_tag(auth_event, auth_tag)
        try:
            try:
                owners = await self._gates(auth_event)
            except StoreError as exc:  # fail closed, with an answer
                log.warning("admission lookup failed: %s", exc)
                raise ServerError("database error") from None
        except BuzzError as exc:
            self.telemetry.auth_answered(auth_event.pubkey, str(exc))
            raise
        self.telemetry.auth_answered(auth_event.pubkey, None)
        await self._register_owner(auth_event)
        return Admission(auth_event.pubkey, owners)

    async def _gates(self, auth_event: Event) -> frozenset[str]:
        """Raises the refusal; returns the owners whose ban refuses this AUTH (`Admission`)."""
        pubkey = auth_event.pubkey
        store = self.store
        owner = _claimed_owner(auth_event)
        owners = frozenset() if owner is None else frozenset({owner})
        if await store.banned_among({pubkey, *owners}):  # type: ignore[attr-defined]
            raise Blocked("you are banned from this community")
        if not await self.workspace_closed():
            return owners
        is_member = store.is_relay_member  # type: ignore[attr-defined]
        if await is_member(pubkey):
            return owners

        async def is_banned(key: str) -> bool:
            return bool(await store.banned_among({key}))  # type: ignore[attr-defined]

        chain = None
        if self.config.allow_nip_oa_auth:
            chain = await nip_aa_owners(
                auth_event, store, is_member, self.config.nip_aa_max_depth, is_banned=is_banned
            )
        if chain is None:
            raise NOT_A_RELAY_MEMBER()
        return owners | chain

    async def workspace_closed(self) -> bool:
        """Closed when BUZZ_REQUIRE_RELAY_MEMBERSHIP is true or `buzz admin workspace close` said
        so: either closes it (fail closed; docs/decisions.md)."""
        if self.config.require_relay_membership:
            return True
        return await self.store.get_setting("workspace") == "closed"  # type: ignore[attr-defined]

    async def _register_owner(self, auth_event: Event) -> None:
        """relay.md §7.3 item 4: exactly one NIP-OA `auth` tag that verifies against the AUTH
        event's pubkey (time clauses at its `created_at`, `kind=` not evaluated) records
        agent → owner unless a mapping exists. An invalid tag never fails the AUTH; a store
        failure is logged and leaves the agent without a registered owner (fail closed)."""
        owner = _claimed_owner(auth_event)
        if owner is None:
            return
        try:
            await self.store.set_agent_owner_if_absent(auth_event.pubkey, owner)
        except StoreError as exc:
            log.warning("could not record the registered owner: %s", exc)

    # -- saturation (relay.md §7.1 item 6) ---------------------------------------------------
    @property
    def max_connections(self) -> int:
        """WebSockets (Nostr and huddle audio) open at once: BUZZ_MAX_CONNECTIONS, or fewer when
        the open-file limit leaves fewer (relay.md §7.1 item 5, docs/limits.md)."""
        return self.fd_budget.websockets

    def try_acquire_handler(self) -> bool:
        if self._handlers_in_flight >= self.config.max_concurrent_handlers:
            return False
        self._handlers_in_flight += 1
        return True

    def release_handler(self) -> None:
        self._handlers_in_flight -= 1


def _claimed_owner(auth_event: Event) -> str | None:
    """The owner named by the AUTH event's one NIP-OA `auth` tag when it verifies (time clauses
    at its `created_at`), else None: the ban gate also refuses agents of a banned owner."""
    tags = nip_oa.auth_tags(auth_event)
    if len(tags) != 1:
        return None
    try:
        return nip_oa.verify_auth_tag_at(tags[0], auth_event.pubkey, auth_event.created_at)
    except nip_oa.InvalidAuthTag:
        return None


def _with_auth_tag(event: Event, tag: Sequence[str]) -> Event:
    """`event` seen as carrying exactly `tag` as its `auth` tag: for admission checks only (the
    signature is not re-checked; NIP-OA time clauses use its `created_at`)."""
    tags = (*(t for t in event.tags if not (t and t[0] == "auth")), tuple(tag))
    return dataclasses.replace(event, tags=tags)
