"""Jobs from the client side (jobs spec §7, §8): request a job of an agent and wait for its end,
list and show jobs folded from their events, cancel one, hand off a result.

This is the one client implementation: the CLI (`buzz jobs`), the MCP tools and the workflow
runner's `ask_agent` call it. Every event is built by `buzz.jobs.build`, which runs the
relay's own validators, so nothing the relay would refuse is ever signed.

    async with Workspace(url, identity) as ws:
        asked = await ws.jobs.request(channel, agent, "Fix the flaky test")
        end = await ws.jobs.wait(asked.job_id, timeout=600)     # JobView, terminal
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from buzz.client.errors import NotFound, UserError, WorkspaceError
from buzz.client.session import Session, websocket_failure
from buzz.client.users import Users
from buzz.client.values import channel_arg, event_id_arg, first_channel, pubkey_arg
from buzz.core.errors import BuzzError
from buzz.core.event import Event
from buzz.jobs import build, machine
from buzz.jobs import limits as L

LIST_DEFAULT = 50
LIST_MAX = 500


@dataclass(frozen=True, slots=True)
class JobRequested:
    job_id: str
    event_id: str
    channel_id: str
    assignee: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "event_id": self.event_id,
            "channel_id": self.channel_id,
            "assignee": self.assignee,
        }


@dataclass(frozen=True, slots=True)
class JobView:
    """A job with its events: the summary folded by the relay's machine, the result (43004
    content) or failure (43006 content) when it ended so."""

    job: machine.Job
    request: Event
    events: list[Event] = field(default_factory=list)

    @property
    def result(self) -> dict[str, Any] | None:
        return _content_of(self.events, L.KIND_JOB_RESULT, self.job.assignee)

    @property
    def failure(self) -> dict[str, Any] | None:
        return _content_of(self.events, L.KIND_JOB_FAILED, self.job.assignee)

    def to_dict(self, *, with_events: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"job": self.job.summary()}
        if with_events:
            out["events"] = [e.to_dict() for e in sorted(self.events, key=lambda e: (e.created_at, e.kind))]
        out["result"] = self.result
        out["failure"] = self.failure
        return out


def _content_of(events: list[Event], kind: int, author: str) -> dict[str, Any] | None:
    for event in sorted(events, key=lambda e: e.created_at):
        if event.kind == kind and event.pubkey == author:
            try:
                body = orjson.loads(event.content)
            except orjson.JSONDecodeError:
                return {"text": event.content}  # from elsewhere: shown as plain text (§4.4)
            return body if isinstance(body, dict) else {"text": event.content}
    return None


def _user_error(exc: BuzzError) -> UserError:
    return UserError(exc.reason)


class Jobs:
    def __init__(self, session: Session) -> None:
        self._s = session

    async def _resolve_agent(self, agent: str) -> str:
        """`agent` as hex, npub or `@Name` (an agent's name or display name, exactly one match)."""
        if agent.startswith("@"):
            name = agent[1:].strip().lower()
            found = [
                p
                for p in await Users(self._s).find(name)
                if name in {(p.name or "").lower(), (p.display_name or "").lower()}
            ]
            if len(found) != 1:
                raise UserError(
                    f"--agent {agent}: {'no' if not found else 'more than one'} user has that name"
                )
            return found[0].pubkey
        return pubkey_arg(agent, "--agent")

    async def request(
        self,
        channel_id: str,
        agent: str,
        prompt: str,
        *,
        requested_outcome: str | None = None,
        deadline_secs: int | None = None,
        parent: str | None = None,
        source: dict[str, Any] | None = None,
        on_signed: Callable[[str], None] | None = None,
    ) -> JobRequested:
        """Publish a 43001 asking `agent` (hex, npub or @Name) for `prompt` in the channel.
        `on_signed(job_id)` runs once the id is known, before the publish (the CLI's Ctrl-C
        line names it). Raises UserError (bad values; the relay's `invalid: job request:`
        refusals, such as a target that is not an agent member), Refused, NotFound."""
        channel = channel_arg(channel_id)
        if not prompt or not prompt.strip():
            raise UserError("--prompt is empty")
        assignee = await self._resolve_agent(agent)
        now = int(time.time())
        if deadline_secs is not None and not 0 < deadline_secs <= L.DEADLINE_MAX_S:
            raise UserError(f"--deadline must be 1-{L.DEADLINE_MAX_S} seconds")
        try:
            template = build.request(
                channel,
                assignee,
                prompt=prompt,
                requested_outcome=requested_outcome,
                created_at=now,
                deadline=now + deadline_secs if deadline_secs else None,
                parent=event_id_arg(parent, "--parent") if parent else None,
                source=source,
            )
        except BuzzError as exc:
            raise _user_error(exc) from None
        event = self._s.sign(template.kind, template.content, template.tags, now)
        if on_signed is not None:
            on_signed(event.id)
        await self._publish_or_user_error(event)
        return JobRequested(event.id, event.id, channel, assignee)

    async def _publish_or_user_error(self, event: Event) -> None:
        try:
            await self._s.publish(event)
        except WorkspaceError as exc:
            if exc.relay_message and exc.relay_message.startswith("invalid: job"):
                raise UserError(exc.relay_message, relay_message=exc.relay_message) from None
            raise

    async def _request_event(self, job_id: str) -> Event:
        found = await self._s.query([{"ids": [job_id], "kinds": [L.KIND_JOB_REQUEST]}])
        if not found:
            raise NotFound(f"job not found: {job_id}")
        return found[0]

    async def get(self, job_id: str) -> JobView:
        """The job and its events. Raises NotFound when the 43001 is not readable to me."""
        job_id = event_id_arg(job_id, "--job")
        request = await self._request_event(job_id)
        events = await self._s.query([{"kinds": sorted(L.LIFECYCLE_KINDS), "#e": [job_id], "limit": 500}])
        return self._view(request, events, await self._s.relay_pubkey())

    @staticmethod
    def _view(request: Event, events: list[Event], relay_pubkey: str | None) -> JobView:
        channel = first_channel(request) or ""
        mine = [e for e in events if job_of(e) == request.id]
        return JobView(machine.fold(request, channel, mine, relay_pubkey), request, mine)

    async def list(
        self,
        channel_id: str,
        *,
        state: str | None = None,
        agent: str | None = None,
        mine: bool = False,
        limit: int = LIST_DEFAULT,
    ) -> list[machine.Job]:
        """Jobs of the channel, newest first, folded from their events."""
        channel = channel_arg(channel_id)
        if not 1 <= limit <= LIST_MAX:
            raise UserError(f"--limit must be 1-{LIST_MAX}")
        if state is not None and state not in {s.value for s in machine.State}:
            raise UserError(f"--state must be one of {', '.join(s.value for s in machine.State)}")
        flt: dict[str, Any] = {
            "kinds": [L.KIND_JOB_REQUEST],
            "#h": [channel],
            "limit": limit if state is None else LIST_MAX,
        }
        if agent is not None:
            flt["#p"] = [await self._resolve_agent(agent)]
        if mine:
            flt["authors"] = [self._s.pubkey]
        requests = await self._s.query([flt])
        if not requests:
            return []
        events = await self._s.query(
            [{"kinds": sorted(L.LIFECYCLE_KINDS), "#e": [r.id for r in requests], "limit": 5000}]
        )
        relay_pubkey = await self._s.relay_pubkey()
        jobs = [self._view(r, events, relay_pubkey).job for r in requests]
        if state is not None:
            jobs = [j for j in jobs if j.state.value == state]
        return jobs[:limit]

    async def cancel(self, job_id: str, reason: str | None = None) -> dict[str, str]:
        """Publish a 43005. Raises NotFound, Refused (`restricted: not allowed to cancel this job`)."""
        view = await self.get(job_id)
        if view.job.terminal:  # the relay would refuse it as `invalid:`; say why in words
            raise UserError(f"job {view.job.id} is already {view.job.state}: there is nothing to cancel")
        try:
            template = build.cancel(view.job.channel_id, view.job.id, view.job.assignee, reason=reason)
        except BuzzError as exc:
            raise _user_error(exc) from None
        event = self._s.sign(template.kind, template.content, template.tags)
        await self._publish_or_user_error(event)
        return {"job_id": view.job.id, "event_id": event.id}

    async def handoff(self, channel_id: str, job_id: str, manifest: Any) -> dict[str, str]:
        """Publish a 43004 carrying the NIP-AJ `manifest` (an object). The manifest is checked
        with the relay's validator before anything is signed; failures are UserError."""
        channel = channel_arg(channel_id)
        job = event_id_arg(job_id, "--job")
        if not isinstance(manifest, dict):
            raise UserError("the manifest must be a JSON object")
        if manifest.get("jobRequest") != job:
            raise UserError("job result: jobRequest must equal --job")
        view = await self.get(job)
        if view.job.channel_id != channel:
            raise UserError(f"job {job} is not in channel {channel}")
        try:
            template = build.result(channel, job, view.job.requester, manifest)
        except BuzzError as exc:
            raise _user_error(exc) from None
        event = self._s.sign(template.kind, template.content, template.tags)
        await self._publish_or_user_error(event)
        return {"event_id": event.id, "job_id": job, "disposition": str(manifest["disposition"])}

    async def wait(self, job_id: str, timeout: float | None = None) -> JobView:
        """Block until the job is terminal (completed, failed or cancelled) and return it.
        One live subscription to the job's lifecycle events (its stored phase first, so an
        end already reached is seen at once). Raises TimeoutError after `timeout` seconds."""
        job_id = event_id_arg(job_id, "--job")
        request = await self._request_event(job_id)
        relay_pubkey = await self._s.relay_pubkey()
        events: list[Event] = []
        try:
            async with self._s.websocket() as client:
                # Channel events are delivered live to `#h` filters only (relay.md §12).
                flt = {
                    "kinds": sorted(L.LIFECYCLE_KINDS),
                    "#e": [job_id],
                    "#h": [first_channel(request) or ""],
                }
                sub = await client.subscribe([flt])

                async def until_terminal() -> JobView:
                    async for event in sub:
                        events.append(event)
                        view = self._view(request, events, relay_pubkey)
                        if view.job.terminal:
                            return view
                    raise WorkspaceError("the relay closed the job's subscription")

                first = self._view(request, events, relay_pubkey)
                if first.job.terminal:
                    return first
                return await asyncio.wait_for(until_terminal(), timeout)
        except (TimeoutError, WorkspaceError):
            raise
        except Exception as exc:
            raise websocket_failure(exc) from None


def job_of(event: Event) -> str | None:
    """The job a lifecycle event names (its `reply` `e` tag), or None."""
    return next((t[1] for t in event.tags if t[0] == "e" and len(t) >= 4 and t[3] == "reply"), None)
