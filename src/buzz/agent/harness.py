"""`buzz agent run`: the ACP harness, one process (agents.md §4).

Startup, in the order of §4.2:

1. configuration (`buzz.agent.config`, done by the caller) and the wake rules;
2. owner resolution (`buzz.agent.identity`, done by the caller);
3. start-up checks (`buzz.agent.preflight`, issue 14 item 3): the agent command is spawned and
   initialized, and so is each `--mcp-command` server; a failure ends `run` with
   `PreflightError` (one line). Then the subprocess pool, unless `--lazy-pool`;
4. the relay connection with NIP-42 AUTH carrying the NIP-OA tag (`RelayLink`, which also
   reconnects, re-authenticates, republishes presence and re-subscribes);
5. presence `online` (the link's connect hook);
6. channel discovery (39002 → 39000), limited by `--channels`; the respond-to policy is logged;
7. catch-up (issue 14 item 5): each channel's events of the last `--catch-up` seconds go
   through the gate chain oldest first, one batch each, skipping what this agent already
   claimed on the relay (`buzz.agent.claims`); then one subscription per channel from the
   start time (after a reconnect the link reports the gap and it is caught up the same way);
8. the `membership-notif` subscription (44100/44101 for A, from the start time), and the
   `nip17-inbox` one (the gift wraps to A: private DMs, `buzz.agent.private_inbox`);
9. the heartbeat timer.

Then events flow: relay → inbound buffer (`--event-buffer`) → `Intake` (gate chain) → queue
→ `Dispatcher` (turns). `Harness.run` returns the exit code: 0 after `!shutdown`, a signal,
or `--exit-after-inactivity`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import time
from pathlib import Path

import orjson

from buzz.agent.acp_pool import AgentGone, AgentPool, AgentProcess
from buzz.agent.base_prompt import DEFAULT_HEARTBEAT_PROMPT
from buzz.agent.claims import Claims
from buzz.agent.config import ConfigError, HarnessConfig
from buzz.agent.directory import Members, Profiles, discover_channels
from buzz.agent.gates import WakeRule, build_rules, describe_policy
from buzz.agent.identity import AgentIdentity
from buzz.agent.intake import CHANNEL_SUB_PREFIX, MEMBERSHIP_SUB, Intake
from buzz.agent.jobs import JOBS_SUB_PREFIX, JobDesk
from buzz.agent.persona import PERSONA_SUB, apply_persona, newest, parse_persona_ref, persona_filter
from buzz.agent.policy import POLICY_DELETE_SUB, POLICY_SUB, Policy, PolicyWatch
from buzz.agent.preflight import PreflightError, check_mcp
from buzz.agent.private_inbox import PrivateInbox
from buzz.agent.queue import WorkQueue
from buzz.agent.relay_link import RelayLink
from buzz.agent.reports import STATUS_REFRESH_S, status_event
from buzz.agent.runtime import Runtime
from buzz.agent.sessions import SessionTable
from buzz.agent.status import StatusPublisher
from buzz.agent.turns import Dispatcher
from buzz.client.files import Files
from buzz.client.http_bridge import relay_signing_key
from buzz.client.identity import Identity as ClientIdentity
from buzz.core.event import Event

log = logging.getLogger(__name__)

DISCOVERY_RETRY_S = 2.0


def load_rules(config: HarnessConfig) -> tuple[WakeRule, ...]:
    """The wake rules of §4.4; config mode reads `--config`. Raises ConfigError."""
    text = None
    if config.subscribe == "config":
        try:
            text = Path(config.config).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--config: cannot read {config.config!r}: {exc}") from None
    return build_rules(config.subscribe, config.kinds, config.no_mention_filter, text)


def agent_environment(config: HarnessConfig, identity: AgentIdentity) -> dict[str, str]:
    """The harness's environment plus the three identity variables (§4.14 item 2)."""
    env = dict(os.environ)
    env["BUZZ_RELAY_URL"] = config.ws_url
    env["BUZZ_PRIVATE_KEY"] = identity.secret
    if identity.auth_tag is not None:
        env["BUZZ_AUTH_TAG"] = orjson.dumps(identity.auth_tag).decode()
    else:
        env.pop("BUZZ_AUTH_TAG", None)
    return env


class Harness:
    """One running harness. `ready` is set once startup step 8 is done (tests wait on it)."""

    def __init__(self, config: HarnessConfig, identity: AgentIdentity, cwd: str | None = None) -> None:
        self.config = config
        self.identity = identity
        self.cwd = os.path.abspath(cwd or os.getcwd())
        self.ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._inbound: asyncio.Queue[tuple[str, Event]] = asyncio.Queue(maxsize=config.event_buffer)
        self._tasks: list[asyncio.Task[object]] = []
        self._started_at = int(time.time())
        self._status_at = 0
        rules = load_rules(config)
        if config.relay_observer:
            log.warning("--relay-observer: observer frames (kind 24200) are a later feature; ignored")
        env = agent_environment(config, identity)
        self._env = env
        pool = AgentPool(
            config.agents,
            lambda i: AgentProcess(
                i,
                config.agent_command,
                config.agent_args,
                env,
                self.cwd,
                config.permission_mode,
                lambda w, sid, upd: self.dispatcher.on_update(w, sid, upd),
            ),
        )
        link = RelayLink(
            config.ws_url,
            identity.secret,
            [identity.auth_tag] if identity.auth_tag else [],
            on_event=self._enqueue_inbound,
            on_closed=self._on_closed,
            on_connected=self._on_connected,
        )
        status = StatusPublisher(
            link.publish,
            identity.secret,
            typing_enabled=not config.no_typing,
            presence_enabled=not config.no_presence,
        )
        self.runtime = Runtime(
            config=config,
            identity=identity,
            cwd=self.cwd,
            rules=rules,
            pool=pool,
            sessions=SessionTable(),
            queue=WorkQueue(max_attempts=config.max_attempts, backoff_base=config.retry_backoff),
            status=status,
            link=link,
            profiles=Profiles(link.query),
            members=Members(link.query),
            claims=Claims(link.query, link.publish, identity.secret, identity.pubkey, config.claim_lease),
            files=Files(config.ws_url, ClientIdentity(identity.secret, identity.auth_tag)),
        )
        self.dispatcher = Dispatcher(self.runtime)
        self.intake = Intake(self.runtime, self.dispatcher, self.request_shutdown)
        self.jobs = JobDesk(self.runtime, self.dispatcher)
        self.intake.jobs = self.jobs
        self.policy: PolicyWatch | None = None
        if identity.owner is not None and not config.no_managed_policy:
            self.policy = PolicyWatch(config, identity.pubkey, identity.owner, self._apply_policy)
        self.intake.private = PrivateInbox(self.runtime, self.intake)

    # -- hooks -------------------------------------------------------------------------------
    async def _enqueue_inbound(self, sub_id: str, event: Event) -> None:
        await self._inbound.put((sub_id, event))

    async def _on_closed(self, sub_id: str, reason: str) -> None:
        await self.intake.closed(sub_id, reason)

    async def _on_connected(self, gaps: dict[str, int]) -> None:
        await self.runtime.status.presence("online")
        if gaps:
            task = asyncio.create_task(self._catch_up_gaps(gaps), name="catch-up")
            self._tasks.append(task)

    async def _catch_up_gaps(self, gaps: dict[str, int]) -> None:
        """After a reconnect: answer what each channel received while we were away."""
        now = int(time.time())
        for sub_id, since in gaps.items():
            channel = sub_id[len(CHANNEL_SUB_PREFIX) :]
            await self._catch_up(channel, max(since, now - self.config.catch_up), now)

    async def _catch_up(self, channel: str, since: int, until: int) -> None:
        try:
            found = await self.intake.catch_up(channel, since, until)
        except Exception as exc:
            log.warning("catch-up of %s failed: %s", channel, exc)
            return
        if found:
            log.info("caught up %d event(s) of %s from the last %d s", found, channel, until - since)

    async def _load_persona(self) -> None:
        """§10.2: the persona at startup (none → ConfigError, exit 1), then watched."""
        rt = self.runtime
        assert self.config.persona is not None
        author, slug = parse_persona_ref(self.config.persona, self.identity.owner)
        flt = persona_filter(author, slug)
        found = newest(await rt.link.query([flt]))
        if found is None:
            raise ConfigError(f"persona not found: {slug} (author {author[:12]}…)")
        self._persona_head = (found.created_at, found.id)
        rt.config, rt.persona_name = apply_persona(rt.config, found, self.config)
        log.info("persona %s applied (%s)", slug, rt.persona_name or "no display name")
        await rt.link.subscribe(PERSONA_SUB, {k: v for k, v in flt.items() if k != "limit"}, found.created_at)

    async def _persona_changed(self, event: Event) -> None:
        key = (event.created_at, event.id)
        head = getattr(self, "_persona_head", None)
        if head is not None and (-key[0], key[1]) >= (-head[0], head[1]):
            return
        self._persona_head = key
        rt = self.runtime
        rt.config, rt.persona_name = apply_persona(rt.config, event, self.config)
        log.info("persona %s updated; new sessions use it", event.d_tag)

    async def _record_persona(self, slug: str | None) -> None:
        """§10.2 item 5: without `--persona`, the owner's 30177 `persona_id` (a persona of the
        owner) is used the same way, for sessions created from now on; cleared, the flags'
        prompt and model come back. A persona the agent cannot read is logged and skipped."""
        rt, owner = self.runtime, self.identity.owner
        if slug is None or owner is None:
            rt.config = dataclasses.replace(
                rt.config, system_prompt=self.config.system_prompt, model=self.config.model
            )
            rt.persona_name = None
            return
        try:
            found = newest(await rt.link.query([persona_filter(owner, slug)]))
        except Exception as exc:
            log.warning("persona %s of the managed-agent record not read: %s", slug, exc)
            return
        if found is None:
            log.warning(
                "persona %s of the managed-agent record not found (or not shared with the agent)", slug
            )
            return
        rt.config, rt.persona_name = apply_persona(rt.config, found, self.config)
        log.info("persona %s (from the managed-agent record) applies to new sessions", slug)

    async def _apply_policy(self, policy: Policy) -> None:
        """The owner's 30177 changed (jobs spec §10.1): the author gate reads it at once; the
        pool grows now and shrinks as its surplus workers go idle."""
        rt = self.runtime
        previous, rt.policy = rt.policy, policy
        if self.config.persona is None and policy.persona_id != (previous.persona_id if previous else None):
            await self._record_persona(policy.persona_id)
        rt.pool.resize(policy.parallelism)
        if not self.config.lazy_pool:
            for worker in rt.pool.free():
                if rt.pool.process(worker) is None:
                    try:
                        await rt.pool.ensure(worker)
                    except AgentGone as exc:
                        log.warning("agent[%d] did not start: %s", worker, exc)
        await self.dispatcher.trim_pool()
        self.dispatcher.wake()

    async def request_shutdown(self) -> None:
        """Stop accepting events; `run` then cancels turns, goes offline and returns 0."""
        self.intake.accepting = False
        self.jobs.accepting = False
        self._stop.set()

    # -- run ---------------------------------------------------------------------------------
    async def run(self) -> int:
        rt = self.runtime
        start = int(time.time())
        await self._preflight()
        log.info("agent %s starting (owner %s)", self.identity.pubkey, self.identity.owner or "none")
        if self.identity.owner is None and self.config.respond_to == "owner-only":
            # §4.2 item 2: owner-only without an owner admits nobody; say so once, loudly, here
            # rather than only in a per-mention INFO line (each mention still gets its notice).
            log.warning(
                "no owner (BUZZ_AUTH_TAG unset): with --respond-to owner-only this agent answers "
                "nobody; set BUZZ_AUTH_TAG (buzz agent attest) or choose another --respond-to"
            )
        link_task = asyncio.create_task(rt.link.run(), name="relay-link")
        self._tasks.append(link_task)
        try:
            startup = asyncio.create_task(self._startup(start), name="startup")
            stop = asyncio.create_task(self._stop.wait())
            await asyncio.wait({startup, stop}, return_when=asyncio.FIRST_COMPLETED)
            if not startup.done():  # a signal or !shutdown before startup finished
                startup.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await startup
                return 0
            stop.cancel()
            startup.result()
            self._tasks += [
                asyncio.create_task(self._consume(), name="intake"),
                asyncio.create_task(self.dispatcher.run(), name="dispatcher"),
                asyncio.create_task(rt.claims.heartbeat(), name="claim-heartbeat"),
            ]
            if not self.config.no_presence:
                self._tasks.append(asyncio.create_task(rt.status.presence_loop(), name="presence"))
            if self.config.heartbeat_interval:
                self._tasks.append(asyncio.create_task(self._heartbeat(), name="heartbeat"))
            if self.config.exit_after_inactivity:
                self._tasks.append(asyncio.create_task(self._inactivity(), name="inactivity"))
            if self.identity.owner is not None:
                self._tasks.append(asyncio.create_task(self._status_loop(), name="owner-status"))
            self.ready.set()
            await self._stop.wait()
        finally:
            await self._shutdown()
        return 0

    async def _preflight(self) -> None:
        """Refuse to start when the agent command or an MCP server does not start (item 3)."""
        rt = self.runtime
        try:
            await rt.pool.ensure(0)
            await check_mcp(self.config.mcp_command, self._env, self.cwd)
        except AgentGone as exc:
            await rt.pool.close()
            raise PreflightError(
                f"--agent-command {self.config.agent_command!r} does not start: {exc}"
            ) from None
        except PreflightError:
            await rt.pool.close()
            raise
        if self.config.lazy_pool:
            await rt.pool.restart(0)
        else:
            await rt.pool.start_all()

    async def _learn_relay_key(self) -> None:
        """The relay's signing key (NIP-11 `self`; `pubkey` only from relays that name no
        `self`), so that a workflow's post is answered as its owner's. Without it such posts are
        weighed as the relay's own, which the author gate refuses: a WARNING says so."""
        try:
            info = await self.runtime.link.bridge.relay_info()
        except Exception as exc:
            log.warning("relay info not read (%s): workflow posts are weighed as the relay's", exc)
            return
        key = relay_signing_key(info)
        if key is not None:
            self.runtime.relay_pubkey = key

    async def _startup(self, start: int) -> None:
        rt = self.runtime
        await rt.link.connected.wait()
        await self._learn_relay_key()
        if self.config.persona is not None:
            await self._load_persona()
        own = await rt.profiles.get(self.identity.pubkey)
        rt.agent_name = own.display_name
        owner = self.identity.owner
        owner_name = (await rt.profiles.get(owner)).display_name if owner is not None else None
        log.info(
            "respond-to %s: answering %s",
            self.config.respond_to,
            describe_policy(self.config.respond_to, owner_name),
        )
        while True:
            try:
                channels = await discover_channels(rt.link.query, self.identity.pubkey)
                break
            except Exception as exc:
                log.warning("channel discovery failed (%s); retrying", exc)
                await asyncio.sleep(DISCOVERY_RETRY_S)
        if self.config.channels is not None:
            channels = {c: info for c, info in channels.items() if c in self.config.channels}
        # Archived channels are not served; each is watched for its unarchiving (decision 386).
        self.intake.archived.update(c for c, info in channels.items() if info.archived)
        channels = {c: info for c, info in channels.items() if not info.archived}
        rt.channels.update(channels)
        catch_up = self.config.catch_up
        await rt.work.seed()
        for channel in channels:
            rt.work.open(channel)
            if catch_up:
                await self._catch_up(channel, start - catch_up, start)
            await self.intake.open_channel(channel, start, catch_up=catch_up > 0)
            await self.jobs.open_channel(channel, start)
        await rt.link.subscribe(
            MEMBERSHIP_SUB, {"kinds": [44100, 44101], "#p": [self.identity.pubkey]}, start
        )
        await self.intake.watch_state(start)
        if self.policy is not None:  # the head version comes with the stored phase
            for sub_id, flt in self.policy.filters().items():
                await rt.link.subscribe(sub_id, flt, 0)
        for channel in channels:  # after the subscriptions: a job arriving meanwhile is seen once
            try:
                await self.jobs.catch_up(channel, start)
            except Exception as exc:
                log.warning("job catch-up of %s failed: %s", channel, exc)
        assert self.intake.private is not None
        await self.intake.private.open(start)  # end-to-end encrypted DMs (NIP-17)
        log.info(
            "serving %d channel(s): %s", len(channels), ", ".join(i.name for i in channels.values()) or "none"
        )
        if self.intake.archived:
            log.info("%d archived channel(s) served once unarchived", len(self.intake.archived))

    async def _consume(self) -> None:
        while True:
            sub_id, event = await self._inbound.get()
            try:
                if sub_id.startswith(JOBS_SUB_PREFIX):
                    await self.jobs.route(sub_id, event)
                elif sub_id == PERSONA_SUB:
                    await self._persona_changed(event)
                elif sub_id in (POLICY_SUB, POLICY_DELETE_SUB):
                    if self.policy is not None:
                        await self.policy.route(sub_id, event)
                else:
                    await self.intake.route(sub_id, event)
            except Exception as exc:  # one line; the traceback only at DEBUG (issue 14 item 2)
                log.warning("could not handle event %s: %s: %s", event.id, type(exc).__name__, exc)
                log.debug("traceback of the failed event", exc_info=True)

    def status_snapshot(self, state: str) -> dict[str, object]:
        """The owner's view of this harness (issue 14 item 12; `buzz.agent.reports`)."""
        rt, d = self.runtime, self.dispatcher
        channels = [
            {"id": c, "name": info.name, "queue": rt.queue.pending_count(c), "in_flight": c in d.turns}
            for c, info in rt.channels.items()
        ]
        return {
            "agent": self.identity.pubkey,
            "name": rt.agent_name,
            "state": state,
            "started_at": self._started_at,
            "updated_at": int(time.time()),
            "channels": channels,
            **d.stats,
            "last_turn": d.last_turn,
        }

    async def _publish_status(self, state: str) -> None:
        owner = self.identity.owner
        if owner is None:
            return
        # a newer snapshot must win at its address: never reuse a second (ties keep the lowest id)
        at = max(int(time.time()), self._status_at + 1)
        self._status_at = at
        event = status_event(self.identity.secret, owner, self.status_snapshot(state), at)
        await self.runtime.status.send(event, "owner status")

    async def _status_loop(self) -> None:
        """A snapshot now, after every turn (at most one per second) and every 60 s."""
        while True:
            self.dispatcher.turn_ended.clear()
            await self._publish_status("running")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.dispatcher.turn_ended.wait(), STATUS_REFRESH_S)
            await asyncio.sleep(1.0)

    async def _heartbeat(self) -> None:
        text = self.config.heartbeat_prompt or DEFAULT_HEARTBEAT_PROMPT
        while True:
            await asyncio.sleep(self.config.heartbeat_interval)
            await self.dispatcher.heartbeat_once(text)

    async def _inactivity(self) -> None:
        limit = self.config.exit_after_inactivity
        while True:
            await asyncio.sleep(min(limit, 1.0))
            idle_since = max(self.intake.last_accepted, self.dispatcher.last_activity)
            if not self.runtime.queue.has_work() and time.monotonic() - idle_since >= limit:
                log.info("no activity for %d s; exiting", limit)
                self._stop.set()
                return

    async def _shutdown(self) -> None:
        rt = self.runtime
        self.intake.accepting = False
        self.jobs.accepting = False
        await self.dispatcher.shutdown()
        self.intake.stop_watching()
        self.jobs.stop_watching()
        for task in self._tasks:  # no heartbeat may outlive the release below
            if task.get_name() == "claim-heartbeat":
                task.cancel()
        await rt.claims.release_all()
        for task in self._tasks:
            if task.get_name() != "relay-link":
                task.cancel()
        await rt.work.close(publish=rt.link.connected.is_set())  # `idle` everywhere (jobs spec §12.3)
        if self.ready.is_set():
            await self._publish_status("stopped")
        if rt.link.connected.is_set():
            await rt.status.presence("offline")
        await rt.link.stop()
        await rt.pool.close()
        if rt.files is not None:
            await rt.files.close()
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        log.info("agent %s stopped", self.identity.pubkey)
