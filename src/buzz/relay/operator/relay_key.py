"""The relay's own key (relay.md §1 item 5): from BUZZ_RELAY_PRIVATE_KEY, else generated once
and persisted at `<data_dir>/relay.key` (mode 0600) so `self` is stable across restarts."""

from __future__ import annotations

import os
from pathlib import Path

from buzz.core.keys import generate_secret_key, is_hex

KEY_FILE = "relay.key"


def load_or_create(data_dir: Path, configured: str | None) -> str:
    """The relay secret key as 64 hex. Raises ValueError for a corrupt key file."""
    if configured:
        return configured.lower()
    path = data_dir / KEY_FILE
    if path.exists():
        value = path.read_text().strip().lower()
        if not is_hex(value, 64):
            raise ValueError(f"{path} does not hold a 64-hex secret key")
        return value
    data_dir.mkdir(parents=True, exist_ok=True)
    secret = generate_secret_key()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secret + "\n")
    return secret
