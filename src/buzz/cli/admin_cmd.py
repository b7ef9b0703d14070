"""`buzz admin`: the operator's commands, run on the relay's machine against its database.

They open the store directly (the relay's `--data-dir` SQLite file, or `--db postgresql://…`),
like `synapse_admin` or strfry's CLI; a running relay needs no restart: it reads the member list,
the ban list and the workspace switch at every AUTH (relay.md §4.4, §7.3 item 2.3). SQLite's
own locking lets these short writes run beside the relay.

Output is one JSON document on stdout; failures are one JSON line on stderr (agents.md §2.1):
exit 1 for bad values, a missing database or a bad destination, 2 for an unreachable
database server, 4 for a database failure.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from buzz.cli import interrupt
from buzz.cli.groups import CommandGroup, report
from buzz.cli.output import Context, emit
from buzz.client.errors import NetworkError, UserError, WorkspaceError
from buzz.client.identity import parse_pubkey
from buzz.core import nip19
from buzz.store import check_database_url, open_store, sqlite_path
from buzz.store.base import StoreError, StoreUnreachable
from buzz.store.operator import RELAY_ADMIN_ROLES, RELAY_MEMBER_ROLES

T = TypeVar("T")


class _Target:
    """Where the relay keeps its data, from the group options."""

    def __init__(self, data_dir: Path, db: str | None) -> None:
        self.data_dir = data_dir
        self.db = db

    @property
    def sqlite_file(self) -> Path | None:
        try:
            check_database_url(self.db)
        except ValueError as exc:
            report(UserError(str(exc)))
        return sqlite_path(self.db, self.data_dir)


def _pubkey(value: str, on_curve: bool = True) -> str:
    # Adding or banning needs a real key; removing and unbanning take any 64 hex, so a key an
    # older version let in can still be taken out.
    try:
        return parse_pubkey(value, "pubkey", on_curve=on_curve)
    except WorkspaceError as exc:
        report(exc)


def _when(ts: int) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).isoformat(timespec="seconds")


def _key(pubkey: str) -> dict[str, str]:
    return {"pubkey": pubkey, "npub": nip19.npub(pubkey)}


def _with_store(target: _Target, body: Callable[[Any], Awaitable[T]]) -> T:
    """Open the relay's store, run `body(store)`, close it; failures are reported and exit."""
    db_file = target.sqlite_file
    if db_file is not None and not db_file.is_file():
        report(
            UserError(
                f"no relay database at {db_file}: pass the relay's --data-dir (or --db), or start the relay once"
            )
        )

    async def main() -> T:
        store = open_store(target.db, target.data_dir)
        await store.open()
        try:
            return await body(store)
        finally:
            await store.close()

    try:
        return interrupt.run(main())
    except StoreUnreachable as exc:
        report(NetworkError(f"database unreachable: {exc}"))
    except StoreError as exc:
        report(WorkspaceError(f"database failure: {exc}"))
    except ValueError as exc:
        report(UserError(str(exc)))


@click.group(cls=CommandGroup)
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    envvar="BUZZ_DATA_DIR",
    default="./buzz-data",
    show_default=True,
    help="The relay's data directory (SQLite file) [env BUZZ_DATA_DIR]",
)
@click.option(
    "--db",
    envvar=["BUZZ_DATABASE_URL", "DATABASE_URL"],
    default=None,
    help="postgresql://… [env BUZZ_DATABASE_URL]",
)
@click.pass_context
def admin(ctx: click.Context, data_dir: Path, db: str | None) -> None:
    """Operate a relay: members, open/closed workspace, bans, backup and restore, stats.

    Runs on the relay's machine against its database; a running relay applies changes at the
    next AUTH, and closes the open sessions of a banned key within 5 s.

    \b
    Example:
      buzz admin --data-dir ./buzz-data members add npub1...
      buzz admin --data-dir ./buzz-data workspace close
      buzz admin --data-dir ./buzz-data backup ./buzz-backup.tar.gz
      buzz admin --data-dir ./restored-data restore ./buzz-backup.tar.gz
    """
    parent: Context = ctx.obj
    ctx.obj = (parent, _Target(data_dir, db))


def _objs(ctx: click.Context) -> tuple[Context, _Target]:
    return ctx.obj  # type: ignore[no-any-return]


# -- members ---------------------------------------------------------------------------------------
@admin.group(cls=CommandGroup)
def members() -> None:
    """The workspace member list of a closed workspace: only they may sign in while it is closed.

    \b
    Example:
      buzz admin --data-dir ./buzz-data members list
      buzz admin --data-dir ./buzz-data members add npub1... --role admin
    """


@members.command("list")
@click.pass_context
def members_list(ctx: click.Context) -> None:
    """Print every member: pubkey, npub, role, added_at (UTC).

    \b
    Example:
      buzz admin --data-dir ./buzz-data members list
    """
    out, target = _objs(ctx)
    rows = _with_store(target, lambda s: s.list_relay_members())
    emit(out, [{**_key(m.pubkey), "role": m.role, "added_at": _when(m.added_at)} for m in rows])


@members.command("add")
@click.argument("pubkey")
@click.option("--role", type=click.Choice(RELAY_MEMBER_ROLES), default="member", show_default=True)
@click.pass_context
def members_add(ctx: click.Context, pubkey: str, role: str) -> None:
    """Add PUBKEY (npub or hex) as a member, or change its role.

    \b
    Example:
      buzz admin --data-dir ./buzz-data members add npub1...
      buzz admin --data-dir ./buzz-data members add npub1... --role admin
    """
    out, target = _objs(ctx)
    key = _pubkey(pubkey)
    _with_store(target, lambda s: s.put_relay_member(key, role))
    emit(out, {**_key(key), "role": role, "member": True})


@members.command("remove")
@click.argument("pubkey")
@click.pass_context
def members_remove(ctx: click.Context, pubkey: str) -> None:
    """Take PUBKEY (npub or hex) off the member list; `removed` is false if it was not on it.

    \b
    Example:
      buzz admin --data-dir ./buzz-data members remove npub1...
    """
    out, target = _objs(ctx)
    key = _pubkey(pubkey, on_curve=False)
    removed = _with_store(target, lambda s: s.remove_relay_member(key))
    emit(out, {**_key(key), "removed": removed})


# -- workspace -------------------------------------------------------------------------------------
@admin.group(cls=CommandGroup)
def workspace() -> None:
    """Open (any key that authenticates) or closed (members only) workspace.

    \b
    Example:
      buzz admin --data-dir ./buzz-data workspace show
      buzz admin --data-dir ./buzz-data workspace close
    """


def _set_workspace(ctx: click.Context, value: str) -> None:
    out, target = _objs(ctx)
    _with_store(target, lambda s: s.set_setting("workspace", value))
    emit(out, {"workspace": value})


@workspace.command("open")
@click.pass_context
def workspace_open(ctx: click.Context) -> None:
    """Let any key that authenticates in (BUZZ_REQUIRE_RELAY_MEMBERSHIP=true still keeps it closed).

    \b
    Example:
      buzz admin --data-dir ./buzz-data workspace open
    """
    _set_workspace(ctx, "open")


@workspace.command("close")
@click.pass_context
def workspace_close(ctx: click.Context) -> None:
    """Admit only members (`buzz admin members add`), and NIP-AA agents when enabled.

    \b
    Example:
      buzz admin --data-dir ./buzz-data members add npub1...
      buzz admin --data-dir ./buzz-data workspace close
    """
    _set_workspace(ctx, "closed")


@workspace.command("show")
@click.pass_context
def workspace_show(ctx: click.Context) -> None:
    """Print who may come in: {"workspace": "open" | "closed", "switch", "members", "admins"}.

    "workspace" is what the stored switch makes it: "switch" is that switch as `workspace
    open|close` last set it, null when never set, which is the default, open. "members" counts
    the member list, "admins" are its owners and admins ({pubkey, npub, role}). The relay's own
    environment can close it too (BUZZ_REQUIRE_RELAY_MEMBERSHIP=true), which this command
    cannot see: an open workspace carries a "note" saying so; the relay's start banner shows
    the state it applies.

    \b
    Example:
      buzz admin --data-dir ./buzz-data workspace show
    """
    out, target = _objs(ctx)

    async def read(store: Any) -> tuple[str | None, list[Any]]:
        return await store.get_setting("workspace"), await store.list_relay_members()

    switch, members = _with_store(target, read)
    state = "closed" if switch == "closed" else "open"
    shown: dict[str, Any] = {
        "workspace": state,
        "switch": switch,
        "members": len(members),
        "admins": [{**_key(m.pubkey), "role": m.role} for m in members if m.role in RELAY_ADMIN_ROLES],
    }
    if state == "open":
        shown["note"] = (
            "BUZZ_REQUIRE_RELAY_MEMBERSHIP=true in the relay's environment closes it whatever the switch says"
        )
    emit(out, shown)


# -- bans ------------------------------------------------------------------------------------------
@admin.command()
@click.argument("pubkey")
@click.option("--reason", default="", help="A note for the operator (never sent to the banned key).")
@click.pass_context
def ban(ctx: click.Context, pubkey: str, reason: str) -> None:
    """Ban PUBKEY (npub or hex): its AUTH, and that of agents it attested, is refused with
    `blocked: you are banned from this community` and the socket closed.

    \b
    Example:
      buzz admin --data-dir ./buzz-data ban npub1... --reason 'spam in #general'
    """
    out, target = _objs(ctx)
    key = _pubkey(pubkey)
    added = _with_store(target, lambda s: s.ban(key, reason))
    emit(out, {**_key(key), "banned": True, "already_banned": not added})


@admin.command()
@click.argument("pubkey")
@click.pass_context
def unban(ctx: click.Context, pubkey: str) -> None:
    """Lift the ban of PUBKEY; `unbanned` is false if it was not banned.

    \b
    Example:
      buzz admin --data-dir ./buzz-data unban npub1...
    """
    out, target = _objs(ctx)
    key = _pubkey(pubkey, on_curve=False)
    emit(out, {**_key(key), "unbanned": _with_store(target, lambda s: s.unban(key))})


@admin.command()
@click.pass_context
def bans(ctx: click.Context) -> None:
    """Print the ban list: pubkey, npub, reason, banned_at (UTC).

    \b
    Example:
      buzz admin --data-dir ./buzz-data bans
    """
    out, target = _objs(ctx)
    rows = _with_store(target, lambda s: s.list_bans())
    emit(out, [{**_key(b.pubkey), "reason": b.reason, "banned_at": _when(b.banned_at)} for b in rows])


# -- backup, restore and stats ----------------------------------------------------------------------
@admin.command()
@click.argument("file", type=click.Path(path_type=Path))
@click.pass_context
def backup(ctx: click.Context, file: Path) -> None:
    """Write the relay's data directory to FILE (a new .tar.gz, mode 0600) while the relay runs.

    The archive holds a consistent snapshot of the SQLite database, the relay's secret key
    (relay.key: keep the archive as secret as the key) and a manifest with every file's
    SHA-256 and the database's row counts; `buzz admin restore` checks all of it. With
    PostgreSQL the archive holds the key and the output prints the pg_dump command for the
    database (the password is left out: set PGPASSWORD or use ~/.pgpass).

    \b
    Example:
      buzz admin --data-dir ./buzz-data backup ./buzz-backup-$(date +%F).tar.gz
      buzz admin --db postgresql://buzz@localhost/buzz backup ./buzz-backup.tar.gz
    """
    from buzz.cli import admin_backup  # tarfile, hashing: loaded by the commands that use them

    out, target = _objs(ctx)
    sqlite_file = target.sqlite_file
    try:
        shown = admin_backup.backup(target.data_dir, target.db, sqlite_file, file)
    except WorkspaceError as exc:
        report(exc)
    emit(out, shown)


@admin.command()
@click.argument("archive", type=click.Path(path_type=Path))
@click.pass_context
def restore(ctx: click.Context, archive: Path) -> None:
    """Restore ARCHIVE (from `buzz admin backup`) into --data-dir, which must be new or empty.

    Every file is checked against the archive's manifest, the relay key against the relay
    pubkey it names, and the database (SQLite's quick_check, row counts) before anything is
    moved into place; prints the counts. A PostgreSQL archive restores the key and prints the
    pg_restore command for the database (give --db: the new, empty database).

    \b
    Example:
      buzz admin --data-dir ./restored-data restore ./buzz-backup-2026-12-04.tar.gz
      buzz relay serve --data-dir ./restored-data
    """
    from buzz.cli import admin_backup

    out, target = _objs(ctx)
    sqlite_file = target.sqlite_file
    try:
        shown = admin_backup.restore(archive, target.data_dir, target.db, sqlite_file)
    except WorkspaceError as exc:
        report(exc)
    emit(out, shown)


@admin.command()
@click.pass_context
def stats(ctx: click.Context) -> None:
    """Events by kind, channels, members, bans and the database size in bytes.

    \b
    Example:
      buzz admin --data-dir ./buzz-data stats
    """
    out, target = _objs(ctx)
    s = _with_store(target, lambda store: store.stats())
    emit(
        out,
        {
            "events": s.events_total,
            "events_by_kind": {str(k): n for k, n in s.events_by_kind.items()},
            "deleted_events": s.deleted_events,
            "channels": s.channels,
            "archived_channels": s.archived_channels,
            "channel_members": s.channel_members,
            "relay_members": s.relay_members,
            "bans": s.bans,
            "store_bytes": s.size_bytes,
        },
    )
