"""Relay-side huddle settings (huddle.md §2.3–§2.4, §3.2, §9.1, §11.1), as data.

Read once from the environment when the relay starts; tests replace single fields with
`dataclasses.replace`. Times are seconds.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from buzz.core.huddle_wire import AUTH_TIMEOUT, HEARTBEAT_INTERVAL, MAX_MISSED_PONGS
from buzz.relay.config import ConfigError

_OFF = frozenset({"false", "0"})
_ON = frozenset({"on", "true", "1"})


@dataclass(frozen=True, slots=True)
class HuddleSettings:
    """`audio_available`: BUZZ_HUDDLE_AUDIO_AVAILABLE (§9.1: only `false`/`0` turn it off).

    `community_id` is the workspace (BUZZ_WORKSPACE_ID): the first key of every room (§5.1).
    """

    community_id: str = "default"
    audio_available: bool = True
    auth_timeout_s: float = AUTH_TIMEOUT
    heartbeat_interval_s: float = HEARTBEAT_INTERVAL
    max_missed_pongs: int = MAX_MISSED_PONGS

    @classmethod
    def from_env(cls, community_id: str, env: Mapping[str, str] | None = None) -> HuddleSettings:
        """Read §9.1 switches from `env` (default os.environ).

        Raises ConfigError when BUZZ_MESH asks for the multi-replica mesh (§9), which this relay
        does not implement yet: running replicas without it would split huddles silently.
        """
        env = os.environ if env is None else env
        if env.get("BUZZ_MESH", "").strip().lower() in _ON:
            raise ConfigError("BUZZ_MESH: the huddle mesh (huddle.md §9) is not implemented by this relay")
        available = env.get("BUZZ_HUDDLE_AUDIO_AVAILABLE", "").strip().lower() not in _OFF
        return cls(community_id=community_id, audio_available=available)
