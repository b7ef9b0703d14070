"""`buzz jobs`: request, list, show, cancel and hand off jobs (jobs spec §7). A thin shell over
`buzz.client.jobs`; a summary is the job folded by the relay's own state machine."""

from __future__ import annotations

from typing import Any

import click
import orjson

from buzz.cli import interrupt
from buzz.cli.common import run, stdin_or, stdin_or_now
from buzz.cli.groups import CommandGroup
from buzz.cli.output import Context, emit, fail
from buzz.client.errors import UserError, WorkspaceError
from buzz.client.workspace import Workspace

_job_option = click.option("--job", "job_id", required=True, help="The job id (the 43001's event id).")
# `jobs request --wait`: a job that ended without completing → its failure category (exit 6, 7)
ENDED_AS = {"failed": "job_failed", "cancelled": "job_cancelled"}


@click.group(cls=CommandGroup)
def jobs() -> None:
    """Jobs for agents: request one, follow it, cancel it, hand off its result.

    \b
    Example:
      buzz jobs request --channel 0b5c...50 --agent @reviewer --prompt "Review PR 12" --wait
      buzz jobs list --channel 0b5c...50 --state running
    """


@jobs.command()
@click.option("--channel", "channel_id", required=True, help="The channel the job lives in.")
@click.option(
    "--agent", required=True, help="The agent: hex, npub or @Name (an agent member of the channel)."
)
@click.option("--prompt", required=True, help="What to do; - reads stdin.")
@click.option(
    "--outcome", default=None, help="The requested outcome (default: the prompt, cut to 8192 bytes)."
)
@click.option("--deadline", type=int, default=None, help="Seconds from now the job must end within.")
@click.option("--parent", default=None, help="The job this one was delegated from.")
@click.option(
    "--wait",
    is_flag=True,
    help="Block until the job ends and add its summary and result (exit 6 if it failed, 7 if it was cancelled).",
)
@click.option(
    "--timeout", type=float, default=None, help="With --wait: give up after this many seconds (exit 4)."
)
@click.pass_obj
def request(
    ctx: Context,
    channel_id: str,
    agent: str,
    prompt: str,
    outcome: str | None,
    deadline: int | None,
    parent: str | None,
    wait: bool,
    timeout: float | None,
) -> None:
    """Ask an agent for a job (kind 43001).

    Prints {"job_id", "event_id", "channel_id", "assignee"}; --wait adds {"job", "result",
    "failure"} once the job is completed, failed or cancelled — and for a failed job also a
    `job_failed` error line on stderr and exit 6, for a cancelled one `job_cancelled` and exit
    7, so `&&` stops there. Ctrl-C while waiting leaves the job running; its error line
    carries `job_id`.

    \b
    Example:
      buzz jobs request --channel 0b5c...50 --agent npub1... --prompt "Summarise #eng today"
    """
    text = stdin_or(prompt, "--prompt")

    def noted(job_id: str) -> None:  # Ctrl-C from now on stops the waiting, not the job: name it
        hint = (
            f"stopped waiting, not the job: `buzz jobs show --job {job_id}` follows it, "
            f"`buzz jobs cancel --job {job_id}` stops it"
        )
        interrupt.note(orjson.dumps({"job_id": job_id, "hint": hint}))

    async def body(ws: Workspace) -> Any:
        asked = await ws.jobs.request(
            channel_id,
            agent,
            text() if callable(text) else text,
            requested_outcome=outcome,
            deadline_secs=deadline,
            parent=parent,
            on_signed=noted if wait else None,
        )
        if not wait:
            return asked.to_dict()
        try:
            return {**asked.to_dict(), **(await ws.jobs.wait(asked.job_id, timeout)).to_dict()}
        except TimeoutError:
            raise WorkspaceError(
                f"job {asked.job_id} had not ended after {timeout} s; it goes on: `buzz jobs show "
                f"--job {asked.job_id}` follows it, `buzz jobs cancel --job {asked.job_id}` stops it"
            ) from None

    def render(result: dict[str, Any]) -> None:
        emit(ctx, result)
        job = result.get("job")
        category = ENDED_AS.get(job["state"]) if wait and job is not None else None
        if category is None:
            return
        failure = result.get("failure") or {}
        why = ": ".join(str(failure[k]) for k in ("code", "message") if failure.get(k))
        fail(f"job {job['id']} {job['state']}" + (f" ({why})" if why else ""), category)

    run(ctx, body, render)


@jobs.command(name="list")
@click.option("--channel", "channel_id", required=True, help="The channel.")
@click.option(
    "--state",
    default=None,
    help="Only jobs in this state (requested, accepted, running, completed, failed, cancelled).",
)
@click.option("--agent", default=None, help="Only jobs of this agent (hex, npub or @Name).")
@click.option("--mine", is_flag=True, help="Only jobs I requested.")
@click.option("--limit", type=int, default=50, show_default=True, help="At most this many (1-500).")
@click.pass_obj
def list_(
    ctx: Context, channel_id: str, state: str | None, agent: str | None, mine: bool, limit: int
) -> None:
    """The channel's jobs, newest first. Prints {"jobs": [summary…]}.

    \b
    Example:
      buzz jobs list --channel $CHANNEL --state running --mine
    """

    async def body(ws: Workspace) -> Any:
        found = await ws.jobs.list(channel_id, state=state, agent=agent, mine=mine, limit=limit)
        return {"jobs": [j.summary() for j in found]}

    run(ctx, body)


@jobs.command()
@_job_option
@click.pass_obj
def show(ctx: Context, job_id: str) -> None:
    """One job: {"job", "events", "result", "failure"}; an unknown job is not_found (exit 1).

    \b
    Example:
      buzz jobs show --job $JOB
    """

    async def body(ws: Workspace) -> Any:
        return (await ws.jobs.get(job_id)).to_dict(with_events=True)

    run(ctx, body)


@jobs.command()
@_job_option
@click.option("--reason", default=None, help="Why (shown to the agent and the channel).")
@click.pass_obj
def cancel(ctx: Context, job_id: str, reason: str | None) -> None:
    """Stop a job (kind 43005). Prints {"job_id", "event_id"}.

    \b
    Example:
      buzz jobs cancel --job $JOB --reason 'wrong branch'
    """
    run(ctx, lambda ws: ws.jobs.cancel(job_id, reason))


@jobs.command()
@click.option("--channel", "channel_id", required=True, help="The job's channel.")
@_job_option
@click.option("--manifest", required=True, help="The NIP-AJ result document: a file path, or - for stdin.")
@click.pass_obj
def handoff(ctx: Context, channel_id: str, job_id: str, manifest: str) -> None:
    """Publish a job's result (kind 43004) from a NIP-AJ manifest.

    The manifest is validated first (invariants, limits, no local paths or file: URLs, and
    jobRequest equal to --job); an invalid one exits 1 and nothing is signed. Prints
    {"event_id", "job_id", "disposition"}.

    \b
    Example:
      buzz jobs handoff --channel 0b5c...50 --job 5c0f...e1 --manifest result.json
    """

    def load() -> Any:
        if manifest == "-":
            raw = stdin_or_now("-", "--manifest")
        else:
            try:
                with open(manifest, "rb") as f:
                    raw = f.read().decode("utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise UserError(f"--manifest {manifest}: {exc}") from None
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise UserError("--manifest is not valid JSON") from None

    async def body(ws: Workspace) -> Any:
        return await ws.jobs.handoff(channel_id, job_id, load())

    run(ctx, body)
