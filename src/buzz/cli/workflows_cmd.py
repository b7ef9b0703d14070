"""`buzz workflows` (workflows.md §16): definitions, manual runs, approvals and run history.
A thin shell over `buzz.client.workflows`; JSON out, the exit-code table of agents.md §2.1
(an invalid definition or bad arguments exit 1, a `conflict:` exits 5)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from buzz.cli.common import run, stdin_or_now
from buzz.cli.groups import CommandGroup
from buzz.cli.output import Context
from buzz.client.errors import UserError

if TYPE_CHECKING:  # the client loads when a command runs (tests/cli/test_startup.py)
    from buzz.client.workflows import Workflows

_workflow = click.option("--workflow", "workflow_id", required=True, help="The workflow id (a UUID).")
_yaml = click.option("--yaml", "yaml_text", default=None, help="The definition text, or - for stdin.")
_file = click.option(
    "--file", "yaml_file", default=None, type=click.Path(dir_okay=False), help="A definition file."
)
_name = click.option("--name", default=None, help="Display name (the `name` tag).")


def _definition(yaml_text: str | None, yaml_file: str | None) -> str:
    if (yaml_text is None) == (yaml_file is None):
        raise UserError("give exactly one of --yaml and --file")
    if yaml_file is not None:
        try:
            return Path(yaml_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"cannot read {yaml_file}: {exc}") from None
    return stdin_or_now(yaml_text or "", "definition")


@click.group(cls=CommandGroup)
def workflows() -> None:
    """Workflows: YAML automations bound to a channel.

    \b
    Example:
      buzz workflows create --channel <C> --file standup.yaml
      buzz workflows trigger --workflow <W> --inputs '{"version": "1.4"}'
      buzz workflows runs --workflow <W>
    """


@workflows.command(name="list")
@click.option("--channel", "channel_id", required=True, help="The channel.")
@click.pass_obj
def list_(ctx: Context, channel_id: str) -> None:
    """The channel's workflows. Prints {"workflows": [...]}.

    \b
    Example:
      buzz workflows list --channel <C>
    """
    run(ctx, lambda ws: ws.workflows.list(channel_id))


def _on_workflow(name: str, call: Callable[[Workflows, str], Any], doc: str) -> None:
    """Declare `buzz workflows <name> --workflow <W>`: one client call on that workflow."""

    @workflows.command(name=name, help=doc)
    @_workflow
    @click.pass_obj
    def command(ctx: Context, workflow_id: str) -> None:
        run(ctx, lambda ws: call(ws.workflows, workflow_id))


_on_workflow(
    "get",
    lambda flows, workflow_id: flows.get(workflow_id),
    """One workflow and its YAML. Prints {"workflow", "yaml"}; unknown: not_found (exit 1).

    \b
    Example:
      buzz workflows get --workflow <W>
    """,
)
_on_workflow(
    "delete",
    lambda flows, workflow_id: flows.delete(workflow_id),
    """Delete a workflow (kind 5 with its `a` coordinate); its unfinished runs are cancelled.

    \b
    Example:
      buzz workflows delete --workflow <W>
    """,
)
_on_workflow(
    "enable",
    lambda flows, workflow_id: flows.set_enabled(workflow_id, True),
    """Turn a workflow on (a new version with `enabled: true`).

    \b
    Example:
      buzz workflows enable --workflow <W>
    """,
)
_on_workflow(
    "disable",
    lambda flows, workflow_id: flows.set_enabled(workflow_id, False),
    """Turn a workflow off (a new version with `enabled: false`); running runs continue.

    \b
    Example:
      buzz workflows disable --workflow <W>
    """,
)


@workflows.command()
@click.option("--channel", "channel_id", required=True, help="The channel.")
@_yaml
@_file
@_name
@click.pass_obj
def create(
    ctx: Context, channel_id: str, yaml_text: str | None, yaml_file: str | None, name: str | None
) -> None:
    """Save a new workflow (kind 30620). Prints {"workflow_id", "event_id", "webhook_secret",
    "warnings"}; the webhook secret is shown this once. `warnings` lists what is saved but will
    not work as written, e.g. an `@Name` that is not a channel member (it will not be pinged).

    \b
    Example:
      buzz workflows create --channel <C> --file standup.yaml
    """
    run(ctx, lambda ws: ws.workflows.create(channel_id, _definition(yaml_text, yaml_file), name))


@workflows.command()
@_workflow
@_yaml
@_file
@_name
@click.pass_obj
def update(
    ctx: Context, workflow_id: str, yaml_text: str | None, yaml_file: str | None, name: str | None
) -> None:
    """Replace a workflow's definition (with `expected-revision`: a concurrent change exits 5).
    Prints what `create` prints, `warnings` included.

    \b
    Example:
      buzz workflows update --workflow <W> --yaml - < standup.yaml
    """
    run(ctx, lambda ws: ws.workflows.update(workflow_id, _definition(yaml_text, yaml_file), name))


@workflows.command()
@_workflow
@click.option("--inputs", default=None, help="A JSON object: each key becomes trigger.<key>.")
@click.pass_obj
def trigger(ctx: Context, workflow_id: str, inputs: str | None) -> None:
    """Run a workflow now (kind 46020). Prints {"run_id", "workflow_id", "event_id"}.

    \b
    Example:
      buzz workflows trigger --workflow <W> --inputs '{"version": "1.4"}'
    """
    run(ctx, lambda ws: ws.workflows.trigger(workflow_id, inputs))


@workflows.command()
@_workflow
@click.option("--limit", type=int, default=None, help="1-100, default 20.")
@click.option("--before", default=None, help="Page cursor: `next.before` of the previous page.")
@click.option("--before-id", "before_id", default=None, help="Page cursor: `next.before_id`.")
@click.pass_obj
def runs(
    ctx: Context, workflow_id: str, limit: int | None, before: str | None, before_id: str | None
) -> None:
    """A workflow's runs, newest first. Prints {"runs", "next"}.

    \b
    Example:
      buzz workflows runs --workflow <W> --limit 5
    """
    run(ctx, lambda ws: ws.workflows.runs(workflow_id, limit, before, before_id))


@workflows.command(name="run")
@_workflow
@click.option("--run", "run_id", required=True, help="The run id.")
@click.pass_obj
def run_(ctx: Context, workflow_id: str, run_id: str) -> None:
    """One run with its step trace and approvals. Prints {"run", "approvals"}.

    \b
    Example:
      buzz workflows run --workflow <W> --run <R>
    """
    run(ctx, lambda ws: ws.workflows.run(workflow_id, run_id))


_approval = click.option("--approval", default=None, help="The approval reference or its 46010 event id.")
_token = click.option("--token", default=None, help="An approval token (UUID), hashed here.")
_note = click.option("--note", default="", help="A note recorded with the decision.")


@workflows.command()
@_approval
@_token
@_note
@click.option("--approved", type=bool, default=True, help="false is the same as `deny` (buzz's flag).")
@click.pass_obj
def approve(ctx: Context, approval: str | None, token: str | None, note: str, approved: bool) -> None:
    """Grant a pending approval (kind 46030). Prints what was approved: {"decision",
    "summary", "workflow_id", "workflow_name", "run_id", "step_id", "approval_ref",
    "request_event_id", "event_id"} (only "approval_ref" of those when the request is unreadable).

    \b
    Example:
      buzz workflows approve --approval <46010 id> --note "ship it"
    """
    run(ctx, lambda ws: ws.workflows.decide(approved, approval, token, note))


@workflows.command()
@_approval
@_token
@_note
@click.pass_obj
def deny(ctx: Context, approval: str | None, token: str | None, note: str) -> None:
    """Deny a pending approval (kind 46031): the run is cancelled. Prints what `approve` prints.

    \b
    Example:
      buzz workflows deny --token <uuid> --note "not today"
    """
    run(ctx, lambda ws: ws.workflows.decide(False, approval, token, note))
