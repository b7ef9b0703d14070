"""`buzz agents`: the agent directory records (jobs spec §13.2) — personas, teams and managed
agents (whom an agent answers, its parallelism; a running harness applies a change within 5 s).
A thin shell over `buzz.client.agent_records`; every `set` is checked with the relay's rules
before anything is signed (a secret in a system prompt exits 1)."""

from __future__ import annotations

from typing import Any

import click

from buzz.cli.common import keyed, run, stdin_or_now
from buzz.cli.groups import CommandGroup
from buzz.cli.output import Context
from buzz.client.errors import UserError
from buzz.client.workspace import Workspace

RESPOND_TO = click.Choice(["owner-only", "allowlist", "members", "anyone", "nobody"])


@click.group(cls=CommandGroup)
def agents() -> None:
    """Agent directory: who the agents are and what they do, personas, teams and the
    managed-agent policy owners set.

    \b
    Example:
      buzz agents list
      buzz agents managed set --agent npub1... --respond-to members --parallelism 2
      buzz agents personas set --slug reviewer --display-name Reviewer --system-prompt - < prompt.md
    """


# -- the directory --------------------------------------------------------------------------------
@agents.command(name="list")
@click.option("--channel", default=None, help="Only the agents of this channel, and their status there.")
@click.pass_obj
def agents_list(ctx: Context, channel: str | None) -> None:
    """The agents you can see — in the channels you can read, and your own — with owner,
    persona, whom each answers and live status from its work-status snapshots (working in
    #channel, queued, idle, offline). Channels you cannot read are never shown or counted; a
    snapshot older than 600 s is not "working". Prints {"agents": [{pubkey, npub, name, owner,
    owner_name, persona, persona_name, respond_to, respond_to_allowlist, parallelism, presence,
    status: {state, channels: [{id, name, working_on}], queued}}]}; an unknown or unreadable
    --channel: exit 1.

    \b
    Example:
      buzz agents list --channel eng-channel-uuid
    """
    run(ctx, lambda ws: keyed("agents", ws.agent_directory.list(channel)))


# -- personas -------------------------------------------------------------------------------------
@agents.group(cls=CommandGroup)
def personas() -> None:
    """Personas (30175): a system prompt, model and name an agent can run as.

    \b
    Example:
      buzz agents personas set --slug reviewer --display-name Reviewer --system-prompt-file prompt.md
    """


@personas.command(name="list")
@click.option("--mine", is_flag=True, help="Only my personas.")
@click.option("--author", default=None, help="Only this author's personas (hex or npub).")
@click.pass_obj
def personas_list(ctx: Context, mine: bool, author: str | None) -> None:
    """Prints {"personas": [{slug, author, display_name, model, provider, runtime, shared, event_id, created_at}]}.

    \b
    Example:
      buzz agents personas list --mine
    """
    run(ctx, lambda ws: keyed("personas", ws.agent_records.personas(author, mine)))


@personas.command(name="get")
@click.option("--slug", required=True)
@click.option("--author", default=None, help="The persona's author (default: me).")
@click.pass_obj
def personas_get(ctx: Context, slug: str, author: str | None) -> None:
    """Prints {"persona": {…, system_prompt}}; not readable: exit 1.

    \b
    Example:
      buzz agents personas get --slug reviewer
    """
    run(ctx, lambda ws: keyed("persona", ws.agent_records.persona(slug, author)))


@personas.command(name="set")
@click.option("--slug", required=True, help="^[a-z0-9][a-z0-9_-]{0,63}$")
@click.option("--display-name", default=None, help="Required for a new persona.")
@click.option("--system-prompt", default=None, help="The prompt text; - reads stdin.")
@click.option(
    "--system-prompt-file", default=None, type=click.Path(dir_okay=False), help="A file holding the prompt."
)
@click.option("--model", default=None)
@click.option("--provider", default=None)
@click.option("--runtime", default=None)
@click.option("--avatar-url", default=None)
@click.option(
    "--shared/--private", default=None, help="Readable by others (a tag; the content is unchanged)."
)
@click.pass_obj
def personas_set(
    ctx: Context,
    slug: str,
    display_name: str | None,
    system_prompt: str | None,
    system_prompt_file: str | None,
    model: str | None,
    provider: str | None,
    runtime: str | None,
    avatar_url: str | None,
    shared: bool | None,
) -> None:
    """Publish my persona, merged with its current version. Prints {"slug", "event_id"}.

    \b
    Example:
      buzz agents personas set --slug reviewer --display-name Reviewer --system-prompt - < prompt.md
    """

    async def body(ws: Workspace) -> Any:
        if system_prompt is not None and system_prompt_file is not None:
            raise UserError("--system-prompt and --system-prompt-file are mutually exclusive")
        prompt: str | None = None
        if system_prompt is not None:
            prompt = stdin_or_now(system_prompt, "--system-prompt")
        elif system_prompt_file is not None:
            try:
                with open(system_prompt_file, encoding="utf-8") as f:
                    prompt = f.read()
            except (OSError, UnicodeDecodeError) as exc:
                raise UserError(f"--system-prompt-file: {exc}") from None
        fields = {
            "display_name": display_name,
            "system_prompt": prompt,
            "model": model,
            "provider": provider,
            "runtime": runtime,
            "avatar_url": avatar_url,
        }
        return await ws.agent_records.set_persona(slug, fields, shared)

    run(ctx, body)


@personas.command(name="delete")
@click.option("--slug", required=True)
@click.pass_obj
def personas_delete(ctx: Context, slug: str) -> None:
    """Delete my persona (kind 5 with its `a` and `k`).

    \b
    Example:
      buzz agents personas delete --slug reviewer
    """
    run(ctx, lambda ws: ws.agent_records.delete_persona(slug))


# -- teams ----------------------------------------------------------------------------------------
@agents.group(cls=CommandGroup)
def teams() -> None:
    """Teams (30176): a named group of personas with shared instructions.

    \b
    Example:
      buzz agents teams set --team review --name Review --persona reviewer
    """


@teams.command(name="list")
@click.option("--author", default=None)
@click.pass_obj
def teams_list(ctx: Context, author: str | None) -> None:
    """Prints {"teams": [...]}.

    \b
    Example:
      buzz agents teams list
    """
    run(ctx, lambda ws: keyed("teams", ws.agent_records.teams(author)))


@teams.command(name="get")
@click.option("--team", "team_id", required=True)
@click.option("--author", default=None)
@click.pass_obj
def teams_get(ctx: Context, team_id: str, author: str | None) -> None:
    """Prints {"team": {...}}.

    \b
    Example:
      buzz agents teams get --team review
    """
    run(ctx, lambda ws: keyed("team", ws.agent_records.team(team_id, author)))


@teams.command(name="set")
@click.option("--team", "team_id", required=True)
@click.option("--name", required=True)
@click.option("--description", default=None)
@click.option("--instructions", default=None, help="Text; - reads stdin.")
@click.option("--clear-instructions", is_flag=True)
@click.option("--persona", "persona_ids", multiple=True, help="A persona slug (repeat).")
@click.pass_obj
def teams_set(
    ctx: Context,
    team_id: str,
    name: str,
    description: str | None,
    instructions: str | None,
    clear_instructions: bool,
    persona_ids: tuple[str, ...],
) -> None:
    """Publish my team with both instructions and persona_ids. Prints {"team", "event_id"}.

    \b
    Example:
      buzz agents teams set --team review --name Review --persona reviewer --persona tester
    """

    async def body(ws: Workspace) -> Any:
        text: str | None = None
        if instructions is not None:
            text = stdin_or_now(instructions, "--instructions")
        return await ws.agent_records.set_team(
            team_id, name, description, text, list(persona_ids) or None, clear_instructions
        )

    run(ctx, body)


@teams.command(name="delete")
@click.option("--team", "team_id", required=True)
@click.pass_obj
def teams_delete(ctx: Context, team_id: str) -> None:
    """Delete my team (kind 5).

    \b
    Example:
      buzz agents teams delete --team review
    """
    run(ctx, lambda ws: ws.agent_records.delete_team(team_id))


# -- managed agents -------------------------------------------------------------------------------
@agents.group(cls=CommandGroup)
def managed() -> None:
    """Managed agents (30177): whom your agent answers and how many turns it runs at once.

    \b
    Example:
      buzz agents managed set --agent npub1... --respond-to allowlist --allowlist <hex>,<hex>
    """


@managed.command(name="list")
@click.option("--owner", default=None, help="Default: me.")
@click.pass_obj
def managed_list(ctx: Context, owner: str | None) -> None:
    """Prints {"agents": [{agent, name, persona_id, respond_to, respond_to_allowlist, parallelism, event_id}]}.

    \b
    Example:
      buzz agents managed list
    """
    run(ctx, lambda ws: keyed("agents", ws.agent_records.managed(owner)))


@managed.command(name="get")
@click.option("--agent", required=True)
@click.pass_obj
def managed_get(ctx: Context, agent: str) -> None:
    """My record for this agent, or exit 1.

    \b
    Example:
      buzz agents managed get --agent npub1...
    """
    run(ctx, lambda ws: ws.agent_records.managed_agent(agent))


@managed.command(name="set")
@click.option("--agent", required=True, help="The agent (hex or npub); you must be its owner.")
@click.option("--name", default=None)
@click.option("--persona", default=None, help="A persona slug of yours.")
@click.option("--no-persona", is_flag=True)
@click.option("--respond-to", type=RESPOND_TO, default=None)
@click.option("--allowlist", default=None, help="Comma-separated pubkeys (hex) it also answers.")
@click.option("--clear-allowlist", is_flag=True)
@click.option(
    "--allow",
    "allow_add",
    multiple=True,
    help="A pubkey (hex or npub) added to the current allowlist; repeatable.",
)
@click.option("--parallelism", type=click.IntRange(1, 32), default=None)
@click.pass_obj
def managed_set(
    ctx: Context,
    agent: str,
    name: str | None,
    persona: str | None,
    no_persona: bool,
    respond_to: str | None,
    allowlist: str | None,
    clear_allowlist: bool,
    allow_add: tuple[str, ...],
    parallelism: int | None,
) -> None:
    """Publish my managed-agent record (merged with the current one); a running harness applies
    it within 5 s, without a restart. Prints {"agent", "event_id"}.

    \b
    Example:
      buzz agents managed set --agent npub1... --respond-to members --parallelism 2
      buzz agents managed set --agent npub1... --respond-to allowlist --allow npub1...
    """
    allow = [p.strip().lower() for p in allowlist.split(",") if p.strip()] if allowlist else None
    fields = {
        "name": name,
        "persona_id": persona,
        "respond_to": respond_to,
        "respond_to_allowlist": allow,
        "parallelism": parallelism,
    }
    run(
        ctx,
        lambda ws: ws.agent_records.set_managed(agent, fields, clear_allowlist, no_persona, list(allow_add)),
    )


@managed.command(name="delete")
@click.option("--agent", required=True)
@click.pass_obj
def managed_delete(ctx: Context, agent: str) -> None:
    """Delete my record for this agent (its harness goes back to its flags).

    \b
    Example:
      buzz agents managed delete --agent npub1...
    """
    run(ctx, lambda ws: ws.agent_records.delete_managed(agent))
