"""Where a running `buzz huddle join` says which seat it holds, for `buzz huddle status`.

The relay tells a peer its `peer_index` only on its own audio socket (huddle.md §5.4), so a
second process (`status`) cannot ask the relay for it. The joined client therefore keeps a small
JSON file per (relay, channel, key) while it is in the room:

    $XDG_STATE_HOME/buzz/huddles/<sha256(relay url, channel, pubkey)[:24]>.json
    {"pid", "relay_url", "channel_id", "pubkey", "peer_index", "protocol_version", "codec",
     "joined_at", "roster": [{"peer_index", "pubkey"}]}

It is rewritten (atomically: temp file + rename) when the roster changes and removed on leave.
A file whose process is gone (killed) is treated as absent: `read_seat` returns None.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import orjson

CODEC = "opus/48000/1"


def state_dir() -> Path:
    """`$XDG_STATE_HOME/buzz/huddles`, default `~/.local/state/buzz/huddles`."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "buzz" / "huddles"


def seat_path(relay_url: str, channel_id: str, pubkey: str) -> Path:
    key = "\n".join((relay_url.rstrip("/"), channel_id, pubkey)).encode()
    return state_dir() / f"{hashlib.sha256(key).hexdigest()[:24]}.json"


def write_seat(
    relay_url: str,
    channel_id: str,
    pubkey: str,
    *,
    peer_index: int,
    protocol_version: int,
    joined_at: int,
    roster: Mapping[int, str],
) -> Path:
    """Write (replace) this process's seat file; returns its path. OSError is the caller's."""
    path = seat_path(relay_url, channel_id, pubkey)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "pid": os.getpid(),
        "relay_url": relay_url.rstrip("/"),
        "channel_id": channel_id,
        "pubkey": pubkey,
        "peer_index": peer_index,
        "protocol_version": protocol_version,
        "codec": CODEC,
        "joined_at": joined_at,
        "roster": [{"peer_index": i, "pubkey": p} for i, p in sorted(roster.items())],
    }
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".seat-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(orjson.dumps(body))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def remove_seat(relay_url: str, channel_id: str, pubkey: str) -> None:
    """Remove the seat file if it is this process's (never another live join's)."""
    path = seat_path(relay_url, channel_id, pubkey)
    seat = _load(path)
    if seat is not None and seat.get("pid") == os.getpid():
        with contextlib.suppress(OSError):
            path.unlink()


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def _load(path: Path) -> dict[str, object] | None:
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def read_seat(relay_url: str, channel_id: str, pubkey: str) -> dict[str, object] | None:
    """The seat of a live `huddle join` of this key in this channel on this relay, or None."""
    seat = _load(seat_path(relay_url, channel_id, pubkey))
    if seat is None or not _alive(seat.get("pid")):
        return None
    return seat
