"""`buzz agent run`: the ACP harness, one process (agents.md §4).

Startup, in the order of §4.2:

1. configuration (`buzz.agent.config`, done by the caller) and the wake rules;
2. owner resolution (`buzz.agent.identity`, done by the caller);
3. the subprocess pool, unless `--lazy-pool`;
4. the relay connection with NIP-42 AUTH carrying the NIP-OA tag (`RelayLink`, which also
   reconnects, re-authenticates, republishes presence and re-subscribes);
5. presence `online` (the link's connect hook);
6. channel discovery (39002 → 39000), limited by `--channels`;
7. one subscription per channel from the start time;
8. the `membership-notif` subscription (44100/44101 for A, from the start time);
9. the heartbeat timer.

Then events flow: relay → inbound buffer (`--event-buffer`) → `Intake` (gate chain) → queue
→ `Dispatcher` (turns). `Harness.run` returns the exit code: 0 after `!shutdown`, a signal,
or `--exit-after-inactivity`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from pathlib import Path

import orjson

from buzz.agent.acp_pool import AgentPool, AgentProcess
from buzz.agent.base_prompt import DEFAULT_HEARTBEAT_PROMPT
from buzz.agent.config import ConfigError, HarnessConfig
from buzz.agent.directory import Profiles, discover_channels
from buzz.agent.gates import WakeRule, build_rules
from buzz.agent.identity import AgentIdentity
from buzz.agent.intake import MEMBERSHIP_SUB, Intake
from buzz.agent.queue import WorkQueue
from buzz.agent.relay_link import RelayLink
from buzz.agent.runtime import Runtime
from buzz.agent.sessions import SessionTable
from buzz.agent.status import StatusPublisher
from buzz.agent.turns import Dispatcher
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
        rules = load_rules(config)
        if config.relay_observer:
            log.warning("--relay-observer: observer frames (kind 24200) are a later feature; ignored")
        env = agent_environment(config, identity)
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
            queue=WorkQueue(),
            status=status,
            link=link,
            profiles=Profiles(link.query),
        )
        self.dispatcher = Dispatcher(self.runtime)
        self.intake = Intake(self.runtime, self.dispatcher, self.request_shutdown)

    # -- hooks -------------------------------------------------------------------------------
    async def _enqueue_inbound(self, sub_id: str, event: Event) -> None:
        await self._inbound.put((sub_id, event))

    async def _on_closed(self, sub_id: str, reason: str) -> None:
        await self.intake.closed(sub_id, reason)

    async def _on_connected(self) -> None:
        await self.runtime.status.presence("online")

    async def request_shutdown(self) -> None:
        """Stop accepting events; `run` then cancels turns, goes offline and returns 0."""
        self.intake.accepting = False
        self._stop.set()

    # -- run ---------------------------------------------------------------------------------
    async def run(self) -> int:
        rt = self.runtime
        start = int(time.time())
        log.info("agent %s starting (owner %s)", self.identity.pubkey, self.identity.owner or "none")
        if not self.config.lazy_pool:
            await rt.pool.start_all()
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
            ]
            if not self.config.no_presence:
                self._tasks.append(asyncio.create_task(rt.status.presence_loop(), name="presence"))
            if self.config.heartbeat_interval:
                self._tasks.append(asyncio.create_task(self._heartbeat(), name="heartbeat"))
            if self.config.exit_after_inactivity:
                self._tasks.append(asyncio.create_task(self._inactivity(), name="inactivity"))
            self.ready.set()
            await self._stop.wait()
        finally:
            await self._shutdown()
        return 0

    async def _startup(self, start: int) -> None:
        rt = self.runtime
        await rt.link.connected.wait()
        own = await rt.profiles.get(self.identity.pubkey)
        rt.agent_name = own.display_name
        while True:
            try:
                channels = await discover_channels(rt.link.query, self.identity.pubkey)
                break
            except Exception as exc:
                log.warning("channel discovery failed (%s); retrying", exc)
                await asyncio.sleep(DISCOVERY_RETRY_S)
        if self.config.channels is not None:
            channels = {c: info for c, info in channels.items() if c in self.config.channels}
        rt.channels.update(channels)
        for channel in channels:
            await self.intake.open_channel(channel, start)
        await rt.link.subscribe(
            MEMBERSHIP_SUB, {"kinds": [44100, 44101], "#p": [self.identity.pubkey]}, start
        )
        log.info(
            "serving %d channel(s): %s", len(channels), ", ".join(i.name for i in channels.values()) or "none"
        )

    async def _consume(self) -> None:
        while True:
            sub_id, event = await self._inbound.get()
            try:
                await self.intake.route(sub_id, event)
            except Exception:
                log.exception("could not handle event %s", event.id)

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
        await self.dispatcher.shutdown()
        for task in self._tasks:
            if task.get_name() != "relay-link":
                task.cancel()
        if rt.link.connected.is_set():
            await rt.status.presence("offline")
        await rt.link.stop()
        await rt.pool.close()
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        log.info("agent %s stopped", self.identity.pubkey)
