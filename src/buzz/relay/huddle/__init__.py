"""Relay side of huddles (huddle.md §2–§8): the audio socket route, rooms, fan-out, lifecycle.

Single process (mesh off, §9.1). Modules: `service` (the `Huddles` object and the HTTP entry
point), `socket` (one participant's socket), `rooms` (registry and admission locks), `fanout`
(per-seat queues, writer, forwarding), `membership` (§3.5–§3.6), `lifecycle` (48101–48103),
`settings` (switches as data).
"""

from buzz.relay.huddle.service import Huddles
from buzz.relay.huddle.settings import HuddleSettings

__all__ = ["HuddleSettings", "Huddles"]
