"""`buzz mem`: the agent's persistent, encrypted memory (engram.md §12).

Commands: `ls`, `get`, `hash`, `search`, `log`, `orphans` (reads; `--agent` lets an owner read its
agent's memory), `set`, `patch`, `rm` (writes, by the agent only) and `export` / `import` (moving
the agent's memory to another relay, by the agent only). The CLI identity is `--private-key` /
`BUZZ_PRIVATE_KEY`; the owner is `--owner` or element 1 of the verified `BUZZ_AUTH_TAG`.
The relay is reached over WebSocket with NIP-42 AUTH (carrying the NIP-OA tag when one is
configured); everything is `buzz.client.memory` underneath. Output: `get` prints the raw value
with no newline, `hash` its SHA-256, `ls` one compact JSON array, `set`, `search`, `log`,
`orphans`, `export` and `import` one JSON object line; progress lines go to stderr. Errors are one JSON line on stderr,
`{"error", "message", "retryable"[, "relay_message"]}`, with the exit codes of §12.2:

    0 ok · 1 user_error, not_found (argument-parser errors included) · 2 network_error ·
    3 auth_error, key_error · 4 error (OK false, build failure, stdin not UTF-8) ·
    5 conflict (base-hash mismatch, `duplicate:` answer, clock-poisoned head)
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, BinaryIO

import click
import orjson

from buzz.cli import interrupt
from buzz.cli.common import as_failure, open_workspace
from buzz.cli.groups import report, usage_failure
from buzz.cli.output import Context
from buzz.client.errors import UserError, WorkspaceError
from buzz.client.identity import Identity
from buzz.client.memory import (
    LOG_DEFAULT_LIMIT,
    LOG_MAX_LIMIT,
    Memory,
    base_hash_arg,
    check_perspective,
    check_removable,
    normalize_slug,
)
from buzz.core import engram
from buzz.core.engram_bundle import BUNDLE_MAX_BYTES

INPUT_MAX = engram.PLAINTEXT_MAX  # bytes of stdin / patch input; one more byte is refused


@contextlib.contextmanager
def _parser_errors_exit_1() -> Iterator[None]:
    """Argument-parser errors are `user_error`, exit 1, never click's 2 (§12.2)."""
    try:
        yield
    except click.exceptions.NoArgsIsHelpError:
        report(
            UserError(
                "missing command: one of ls, get, hash, search, log, orphans, export, import, set, patch, rm (see buzz mem --help)"
            )
        )
    except click.UsageError as exc:
        report(usage_failure(exc))


class _MemGroup(click.Group):
    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        with _parser_errors_exit_1():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> Any:
        with _parser_errors_exit_1():
            return super().invoke(ctx)


def _command(fn: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """Run an async command body; turn every failure into its JSON error and exit code."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> None:
        try:
            interrupt.run(fn(*args, **kwargs))
        except Exception as exc:
            report(as_failure(exc))

    return run


@contextlib.asynccontextmanager
async def _memory(ctx: Context, owner: str | None, agent: str | None = None) -> AsyncIterator[Memory]:
    """The pair of §12.3 for the CLI identity: agent side by default, owner side with --agent.
    The flags are checked before the key, as the commands always did."""
    check_perspective(owner, agent)
    raw_tag = getattr(ctx, "auth_tag", None) or os.environ.get("BUZZ_AUTH_TAG")
    source = ctx.auth_tag_source if getattr(ctx, "auth_tag", None) else "BUZZ_AUTH_TAG"
    identity = Identity.from_text(ctx.private_key, raw_tag, source)
    async with open_workspace(ctx, identity) as ws:
        yield ws.memory(owner, agent)


def _write_stdout(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.flush()


def _note(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def _write_new(file: str, data: bytes, force: bool) -> None:
    """Write `data` to `file` (mode 0600) through a temporary file beside it, so `file` is whole
    or untouched: renamed over an existing one with `force`, else linked, which refuses a file
    that appeared meanwhile. Raises UserError."""
    folder = os.path.dirname(os.path.abspath(file))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".buzz-export-", dir=folder)  # mode 0600
    except OSError as exc:
        raise UserError(f"cannot write {file}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        if force:
            os.replace(tmp, file)
        else:
            os.link(tmp, file)
    except FileExistsError:
        raise UserError(
            f"{file} already exists; choose a new file, or pass --force to overwrite it"
        ) from None
    except OSError as exc:
        raise UserError(f"cannot write {file}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _read_input(stream: BinaryIO, what: str) -> bytes:
    data = stream.read(INPUT_MAX + 1)
    if len(data) > INPUT_MAX:
        raise UserError(f"{what} exceeds {INPUT_MAX} bytes")
    return data


# -- the group --------------------------------------------------------------------------------
@click.group(cls=_MemGroup)
def mem() -> None:
    """Agent memory: encrypted engrams shared by an agent and its owner.

    \b
    Example:
      buzz mem set core "I am Ada, the release bot for team X."
      buzz mem set notes/2026-05-12 - < notes.md
      buzz mem ls
      buzz mem get core
      buzz --private-key <owner> mem ls --agent <agent hex>
    """


_owner_option = click.option(
    "--owner", default=None, help="Owner pubkey (hex or npub); default: BUZZ_AUTH_TAG's owner."
)
_agent_option = click.option(
    "--agent", default=None, help="Read as the owner: the agent pubkey (hex or npub) whose memory to read."
)


@mem.command("ls")
@_owner_option
@_agent_option
@click.option("--json", "as_json", is_flag=True, help="Accepted for compatibility; output is always JSON.")
@click.option(
    "--status",
    is_flag=True,
    help='Print {"entries", "complete", "reason", "records", "pages"} instead of the array.',
)
@click.pass_obj
@_command
async def ls_cmd(ctx: Context, owner: str | None, agent: str | None, as_json: bool, status: bool) -> None:
    """List live memory entries as a JSON array of {slug, event_id, created_at}.

    The relay is paged by `until` past its page limit until every record is read; when that
    cannot be done a warning says why (and `--status` reports `complete: false`).

    \b
    Example:
      buzz mem ls
      buzz mem ls --status
    """
    async with _memory(ctx, owner, agent) as memory:
        listing = await memory.ls()
    entries = [e.to_dict() for e in listing.entries]
    if status:
        report_obj = {
            "entries": entries,
            "complete": listing.complete,
            "reason": listing.reason,
            "records": listing.answered,
            "pages": listing.pages,
        }
        _write_stdout(orjson.dumps(report_obj) + b"\n")
    else:
        _write_stdout(orjson.dumps(entries) + b"\n")
    if listing.skipped:
        _note(f"warning: skipped {listing.skipped} invalid or undecryptable records")
    if not listing.complete:
        _note(f"warning: listing incomplete after {listing.answered} records: {listing.reason}")


@mem.command("search")
@click.argument("text")
@click.option("--limit", type=int, default=10, show_default=True, help="How many results (1..100).")
@_owner_option
@_agent_option
@click.pass_obj
@_command
async def search_cmd(ctx: Context, text: str, limit: int, owner: str | None, agent: str | None) -> None:
    """Find memory entries by meaning: {"results": [{slug, score, snippet}]}, best first.

    Ranked on this machine after decryption (BM25 + sentence embeddings); the relay never sees
    the text. Vectors are cached encrypted under ~/.cache/buzz/recall (XDG_CACHE_HOME).

    \b
    Example:
      buzz mem search "how does Dana like to get feedback?"
      buzz --private-key <owner> mem search "the budget" --agent <agent hex> --limit 3
    """
    async with _memory(ctx, owner, agent) as memory:
        hits = await memory.search(text, limit)
    _write_stdout(orjson.dumps({"results": [h.as_json() for h in hits]}) + b"\n")


@mem.command("get")
@click.argument("slug")
@_owner_option
@_agent_option
@click.pass_obj
@_command
async def get_cmd(ctx: Context, slug: str, owner: str | None, agent: str | None) -> None:
    """Print the value of SLUG exactly (no newline added).

    \b
    Example:
      buzz mem get core
    """
    slug = normalize_slug(slug)
    async with _memory(ctx, owner, agent) as memory:
        value = await memory.get(slug)
    _write_stdout(value.encode("utf-8"))


@mem.command("hash")
@click.argument("slug")
@_owner_option
@_agent_option
@click.pass_obj
@_command
async def hash_cmd(ctx: Context, slug: str, owner: str | None, agent: str | None) -> None:
    """Print the SHA-256 (hex) of what `get SLUG` prints, for `patch --base-hash`.

    \b
    Example:
      buzz mem hash notes/todo
    """
    slug = normalize_slug(slug)
    async with _memory(ctx, owner, agent) as memory:
        digest = await memory.hash(slug)
    _write_stdout(digest.encode() + b"\n")


@mem.command("set")
@click.argument("slug")
@click.argument("value")
@_owner_option
@click.option("--allow-empty", is_flag=True, help="Allow an empty value read from stdin.")
@click.pass_obj
@_command
async def set_cmd(ctx: Context, slug: str, value: str, owner: str | None, allow_empty: bool) -> None:
    """Write VALUE to SLUG (`-` reads stdin, kept byte for byte).

    \b
    Example:
      buzz mem set core "I am Ada."
      buzz mem get notes/a | buzz mem set notes/b -
    """
    slug = normalize_slug(slug)
    if value == "-":
        data = _read_input(sys.stdin.buffer, "stdin")
        try:
            value = data.decode("utf-8")
        except UnicodeDecodeError:
            raise WorkspaceError("stdin is not valid UTF-8") from None
        if not value and not allow_empty:
            raise UserError(
                f"stdin is empty: pass --allow-empty to write an empty value, or run `buzz mem rm {slug}` to delete it"
            )
    async with _memory(ctx, owner) as memory:
        write = await memory.set(slug, value)
    _note(f"wrote {slug} (event {write.event_id}, created_at {write.created_at})")


@mem.command("patch")
@click.argument("slug")
@click.option("--patch-file", default=None, help="Read the unified diff from this file instead of stdin.")
@click.option(
    "--base-hash", default=None, help="SHA-256 of the value the diff was made against (buzz mem hash)."
)
@click.option("--no-base-hash", is_flag=True, help="Apply without checking the base hash.")
@click.option("--dry-run", is_flag=True, help="Check and apply locally; publish nothing.")
@click.option("--allow-empty", is_flag=True, help="Allow a patch that empties the value.")
@_owner_option
@click.pass_obj
@_command
async def patch_cmd(
    ctx: Context,
    slug: str,
    patch_file: str | None,
    base_hash: str | None,
    no_base_hash: bool,
    dry_run: bool,
    allow_empty: bool,
    owner: str | None,
) -> None:
    """Apply a one-file unified diff to SLUG at exactly its line numbers (no fuzz, no offset).

    \b
    Example:
      buzz mem get notes/todo > todo && cp todo todo.new && $EDITOR todo.new
      diff -u todo todo.new | buzz mem patch notes/todo --base-hash "$(buzz mem hash notes/todo)"
    """
    slug = normalize_slug(slug)
    expected = base_hash_arg(slug, base_hash, no_base_hash)
    diff = _read_diff(patch_file)
    async with _memory(ctx, owner) as memory:
        patched = await memory.patch(slug, diff, expected, allow_empty=allow_empty, dry_run=dry_run)
    _note(diff.rstrip("\n") + "\n")
    if patched.write is None:
        _note(f"dry run: {slug} unchanged; the write would produce sha256 {patched.sha256}")
        return
    w = patched.write
    _note(f"wrote {slug} (event {w.event_id}, created_at {w.created_at}, sha256 {patched.sha256})")


def _read_diff(patch_file: str | None) -> str:
    if patch_file is not None:
        try:
            with open(patch_file, "rb") as f:
                data = _read_input(f, "patch input")
        except OSError as exc:
            raise UserError(f"cannot read --patch-file: {exc.strerror or exc}") from None
    else:
        data = _read_input(sys.stdin.buffer, "patch input")
    try:
        diff = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError("patch input is not valid UTF-8") from None
    if not diff:
        raise UserError("patch input is empty")
    return diff


@mem.command("rm")
@click.argument("slug")
@_owner_option
@click.pass_obj
@_command
async def rm_cmd(ctx: Context, slug: str, owner: str | None) -> None:
    """Tombstone SLUG (core cannot be removed; empty it with `set core ''`).

    \b
    Example:
      buzz mem rm notes/old
    """
    slug = normalize_slug(slug)
    check_removable(slug)
    async with _memory(ctx, owner) as memory:
        write = await memory.rm(slug)
    _note(f"tombstoned {slug} (event {write.event_id}, created_at {write.created_at})")


@mem.command("log")
@click.argument("slug")
@click.option(
    "--limit",
    type=int,
    default=LOG_DEFAULT_LIMIT,
    show_default=True,
    help=f"Versions to show at most (1..{LOG_MAX_LIMIT}).",
)
@_owner_option
@_agent_option
@click.pass_obj
@_command
async def log_cmd(ctx: Context, slug: str, limit: int, owner: str | None, agent: str | None) -> None:
    """The versions of SLUG the relay still holds, newest first:
    {"slug", "versions": [{event_id, created_at, sha256, tombstone, head}], "complete"}.

    `sha256` is the hash of the decrypted value (what `hash` prints; null for a tombstone),
    `head` marks the version `get` reads, `complete` is false when --limit cut the list. The
    relay keeps superseded versions (deleted ones never) and serves them to the agent and its
    owner only, through the bridge's `POST /history`; anyone else gets not_found, as for a slug
    never written.

    \b
    Example:
      buzz mem log notes/todo
      buzz --private-key <owner> mem log core --agent <agent hex>
    """
    slug = normalize_slug(slug)
    async with _memory(ctx, owner, agent) as memory:
        found = await memory.log(slug, limit)
    _write_stdout(orjson.dumps(found.to_dict()) + b"\n")


@mem.command("orphans")
@_owner_option
@_agent_option
@click.pass_obj
@_command
async def orphans_cmd(ctx: Context, owner: str | None, agent: str | None) -> None:
    """Entries that core does not reach by [[slug]] references, for review:
    {"orphans": [slug…], "dangling": [slug…], "complete", "reason"}.

    `dangling` lists referenced slugs without a live entry. Nothing is deleted.

    \b
    Example:
      buzz mem orphans
    """
    async with _memory(ctx, owner, agent) as memory:
        found = await memory.orphans()
    report_obj = {
        "orphans": list(found.orphans),
        "dangling": list(found.dangling),
        "complete": found.complete,
        "reason": found.reason,
    }
    _write_stdout(orjson.dumps(report_obj) + b"\n")
    if not found.complete:
        _note(f"warning: listing incomplete: {found.reason}")


@mem.command("export")
@click.argument("file", type=click.Path(dir_okay=False, writable=True))
@click.option("--force", is_flag=True, help="Overwrite FILE if it exists.")
@_owner_option
@click.pass_obj
@_command
async def export_cmd(ctx: Context, file: str, force: bool, owner: str | None) -> None:
    """Write every head of the agent's memory to FILE as an encrypted bundle signed by the agent
    (mode 0600): {"file", "heads", "exported_at"}. Move memory to a new relay with `import`.

    An existing FILE is left alone (user_error, exit 1) unless --force is given; FILE appears
    whole or not at all.

    \b
    Example:
      buzz mem export memory.bundle
      BUZZ_RELAY_URL=wss://new.example buzz mem import memory.bundle
    """
    if not force and os.path.lexists(file):  # before asking the relay: nothing to undo
        raise UserError(f"{file} already exists; choose a new file, or pass --force to overwrite it")
    async with _memory(ctx, owner) as memory:
        data, count, exported_at = await memory.export()
    _write_new(file, data, force)
    _write_stdout(orjson.dumps({"file": file, "heads": count, "exported_at": exported_at}) + b"\n")


@mem.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@_owner_option
@click.pass_obj
@_command
async def import_cmd(ctx: Context, file: str, owner: str | None) -> None:
    """Carry a bundle from `export` to this relay: the agent re-signs every head with a fresh
    created_at and reads each back. {"written", "unchanged", "conflicts", "skipped",
    "tombstones_skipped", "exported_at"}.

    A slug whose entry here differs is a conflict and is left alone; run the import before
    writing on the new relay. A tombstone whose slug has no entry here is not written (there is
    nothing to delete) and is listed under tombstones_skipped; `skipped` counts invalid events.

    \b
    Example:
      BUZZ_RELAY_URL=wss://new.example buzz mem import memory.bundle
    """
    try:
        with open(file, "rb") as f:
            data = f.read(BUNDLE_MAX_BYTES + 1)
    except OSError as exc:
        raise UserError(f"cannot read {file}: {exc.strerror or exc}") from None
    async with _memory(ctx, owner) as memory:
        result = await memory.import_bundle(data)
    report_obj = {
        "written": list(result.written),
        "unchanged": list(result.unchanged),
        "conflicts": list(result.conflicts),
        "skipped": result.skipped,
        "tombstones_skipped": list(result.tombstones_skipped),
        "exported_at": result.exported_at,
    }
    _write_stdout(orjson.dumps(report_obj) + b"\n")
    if result.conflicts:
        _note(f"warning: {len(result.conflicts)} entries differ on this relay and were left alone")
    if result.tombstones_skipped:
        n = len(result.tombstones_skipped)
        _note(f"note: {n} tombstone{'s' if n != 1 else ''} not written (no entry here to delete)")
