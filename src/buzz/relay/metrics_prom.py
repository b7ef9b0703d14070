"""Prometheus metrics of one relay process (`GET /metrics` on `--metrics-bind`, off by default).

Not to be confused with `buzz.relay.rules.metrics` (agent metrics events, kind 44200).

Every metric lives in a registry of its own per `Relay`, so several relays in one process (the
tests) never share counters. Two kinds of source, chosen for the cost on the hot path:

- counters and histograms the relay updates as it works (`RelayMetrics.events`, `.reqs`,
  `.deliveries`, `.fanout_seconds`, `.store_seconds`, `.auths`): a labelled child is looked up
  once per label tuple and cached; the two made for every stored event (a plain accepted answer,
  the insert's latency) are held in a dict and a list and added in bulk at the next scrape;
- values read only when scraped (`_Snapshot`): open connections, authenticated ones, huddle rooms
  and peers, huddle frame counters, slow-consumer drops and the Redis bus counters and state,
  which the relay already keeps as plain numbers.

Names (all prefixed `buzz_`):

| metric | type | labels |
|---|---|---|
| `connections` / `connections_authenticated` | gauge | |
| `events_total` | counter | `kind_range` (regular, replaceable, ephemeral, addressable), `result` (accepted, refused), `reason` (wire prefix: duplicate, invalid, restricted, …; `ok`) |
| `reqs_total` | counter | `verb` (REQ, COUNT, query, count), `result` |
| `auth_total` | counter | `result` (ok, or the wire prefix of the refusal) |
| `live_deliveries_total` | counter | |
| `fanout_seconds` | histogram | |
| `store_seconds` | histogram | `op` (insert, query) |
| `messages_dropped_total` | counter | (full send queue, relay.md §7.9) |
| `huddle_rooms` / `huddle_peers` | gauge | |
| `huddle_frames_total` | counter | `what` (in, forwarded, dropped, flushed, oversized, too_short, over_budget) |
| `huddle_mesh_total` | counter | `what` (fanout_envelopes, stale, unregistered, ambiguous, malformed, outbox_dropped, send_failed, leases_lost, fence_rejections, registrations_abandoned, seats_dropped, control_malformed, batch_malformed, control_undelivered): BUZZ_MESH only |
| `http_connections` / `http_requests` | gauge | (plain HTTP connections that are not WebSockets; requests in progress, docs/limits.md) |
| `http_refused_total` | counter | `what` (busy: 503 at the request cap, evicted: an idle connection closed for a new one, full: a new connection closed, body_timeout: 408) |
| `redis_bus_enabled` / `redis_bus_connected` | gauge | |
| `redis_bus_messages_total` | counter | `what` (published, publish_failed, received, echo_dropped, bad_payload) |
| `redis_bus_reconnects_total` | counter | |
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from buzz.core.kinds import storage_class

# Hot-path observations (one per stored event) are held and added in bulk: at a scrape, or
# when this many are held (decision 357). A scrape always reads every observation made.
PENDING_OBSERVATIONS = 1024
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Latency buckets in seconds: sub-millisecond fan-out up to multi-second stalled commits.
LATENCY_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
)
REASON_PREFIXES = frozenset(
    {
        "duplicate",
        "invalid",
        "restricted",
        "blocked",
        "rate-limited",
        "auth-required",
        "error",
        "pow",
        "response",
        "NIP-98",
    }
)

HUDDLE_FRAME_COUNTERS = (  # exported label → key in HuddleStats.counters
    ("in", "huddle_audio_frames_in_total"),
    ("forwarded", "huddle_audio_frames_forwarded_total"),
    ("dropped", "huddle_audio_frames_dropped_total"),
    ("flushed", "huddle_audio_frames_flushed_total"),  # a leaver's queued frames (issue 13)
    ("oversized", "huddle_audio_frames_oversized_total"),
    ("too_short", "huddle_audio_frames_too_short_total"),
    ("over_budget", "huddle_audio_frames_over_budget_total"),  # beyond a seat's frame budget
)
MESH_COUNTERS = (  # exported label → key in Snapshot.mesh_counters (buzz.relay.huddle mesh parts)
    ("fanout_envelopes", "mesh_fanout_envelopes_total"),
    ("stale", "mesh_envelopes_stale_total"),
    ("unregistered", "mesh_envelopes_unregistered_total"),
    ("ambiguous", "mesh_envelopes_ambiguous_total"),
    ("malformed", "mesh_envelopes_malformed_total"),
    ("outbox_dropped", "mesh_outbox_dropped_total"),
    ("send_failed", "mesh_send_failed_total"),
    ("leases_lost", "mesh_leases_lost_total"),
    ("fence_rejections", "mesh_fence_rejections_total"),
    ("registrations_abandoned", "mesh_registrations_abandoned_total"),
    ("seats_dropped", "mesh_seats_dropped_total"),  # remote seats the owner ended (lost access, ban)
    ("control_malformed", "mesh_control_malformed_total"),
    ("batch_malformed", "mesh_batch_malformed_total"),
    ("control_undelivered", "mesh_control_undelivered_total"),  # reached no replica: stream lost
)
HTTP_COUNTERS = (  # exported label → key in Relay.stats (buzz.relay.http_guard)
    ("busy", "http_refused_busy"),
    ("evicted", "http_evicted_idle"),
    ("full", "http_refused_full"),
    ("body_timeout", "http_body_timeouts"),
)
BUS_COUNTERS = (  # exported label → key in Relay.stats (buzz.relay.bus)
    ("published", "bus_published"),
    ("publish_failed", "bus_publish_failed"),
    ("received", "bus_received"),
    ("echo_dropped", "bus_echo_dropped"),
    ("bad_payload", "bus_bad_payload"),
)


def reason_label(message: str) -> str:
    """The wire prefix of an answer (`"restricted: …"` → `restricted`); `ok` for none, `other`
    for anything unexpected, so label values stay a small fixed set."""
    if not message:
        return "ok"
    prefix = message.split(":", 1)[0]
    return prefix if prefix in REASON_PREFIXES else "other"


@dataclass(frozen=True)
class Snapshot:
    """What the scrape reads from the running relay (see `buzz.relay.telemetry`)."""

    connections: int
    authenticated: int
    huddle_rooms: int
    huddle_peers: int
    huddle_counters: dict[str, int]
    relay_stats: dict[str, int]
    bus_enabled: bool
    bus_connected: bool
    mesh_counters: dict[str, int] | None = None  # None when BUZZ_MESH is off
    http_connections: int = 0
    http_requests: int = 0


class _Snapshot(Collector):
    def __init__(self, read: Callable[[], Snapshot]) -> None:
        self._read = read

    def collect(self) -> Iterator[Metric]:
        s = self._read()
        yield GaugeMetricFamily("buzz_connections", "Open Nostr WebSocket connections", s.connections)
        yield GaugeMetricFamily(
            "buzz_connections_authenticated", "Open connections with a NIP-42 pubkey", s.authenticated
        )
        yield CounterMetricFamily(
            "buzz_messages_dropped",
            "Messages dropped on a full send queue (a slow consumer: BUZZ_SEND_BUFFER)",
            s.relay_stats.get("dropped_messages", 0),
        )
        yield GaugeMetricFamily("buzz_huddle_rooms", "Huddle rooms with a registry entry", s.huddle_rooms)
        yield GaugeMetricFamily("buzz_huddle_peers", "Peers admitted to huddle rooms", s.huddle_peers)
        frames = CounterMetricFamily("buzz_huddle_frames", "Huddle audio frames", labels=["what"])
        for label, key in HUDDLE_FRAME_COUNTERS:
            frames.add_metric([label], s.huddle_counters.get(key, 0))
        yield frames
        if s.mesh_counters is not None:
            mesh = CounterMetricFamily(
                "buzz_huddle_mesh", "Huddle mesh envelopes and leases", labels=["what"]
            )
            for label, key in MESH_COUNTERS:
                mesh.add_metric([label], s.mesh_counters.get(key, 0))
            yield mesh
        yield GaugeMetricFamily(
            "buzz_http_connections", "Open HTTP connections that are not WebSockets", s.http_connections
        )
        yield GaugeMetricFamily("buzz_http_requests", "HTTP requests in progress (counted)", s.http_requests)
        http = CounterMetricFamily(
            "buzz_http_refused", "HTTP connections and requests refused", labels=["what"]
        )
        for label, key in HTTP_COUNTERS:
            http.add_metric([label], s.relay_stats.get(key, 0))
        yield http
        yield GaugeMetricFamily("buzz_redis_bus_enabled", "1 when BUZZ_REDIS_URL is set", int(s.bus_enabled))
        yield GaugeMetricFamily(
            "buzz_redis_bus_connected", "1 while the Redis listener is subscribed", int(s.bus_connected)
        )
        bus = CounterMetricFamily("buzz_redis_bus_messages", "Redis bus messages", labels=["what"])
        for label, key in BUS_COUNTERS:
            bus.add_metric([label], s.relay_stats.get(key, 0))
        yield bus
        yield CounterMetricFamily(
            "buzz_redis_bus_reconnects", "Redis listener reconnects", s.relay_stats.get("bus_reconnects", 0)
        )


class RelayMetrics:
    """The metric objects of one relay; `render()` is the `/metrics` body."""

    def __init__(self, snapshot: Callable[[], Snapshot]) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self._events = Counter(
            "buzz_events",
            "EVENT answers by kind range and result",
            ["kind_range", "result", "reason"],
            registry=r,
        )
        self._reqs = Counter("buzz_reqs", "Read requests by verb and result", ["verb", "result"], registry=r)
        self._auths = Counter("buzz_auth", "NIP-42 and NIP-98 authentications", ["result"], registry=r)
        self.deliveries = Counter(
            "buzz_live_deliveries", "Live EVENT messages queued to subscribers", registry=r
        )
        self.fanout_seconds = Histogram(
            "buzz_fanout_seconds", "Local fan-out of one event", buckets=LATENCY_BUCKETS, registry=r
        )
        store = Histogram(
            "buzz_store_seconds", "Store calls by operation", ["op"], buckets=LATENCY_BUCKETS, registry=r
        )
        self.store_insert_seconds = store.labels("insert")
        self._insert_pending: list[float] = []  # `store_inserted`, not yet in the histogram
        self._accepted_pending: dict[int, int] = {}  # kind → plain accepted answers not yet counted
        self.store_query_seconds = store.labels("query")
        r.register(_Snapshot(snapshot))
        self._event_children: dict[tuple[str, str, str], object] = {}
        self._accepted_children: dict[int, object] = {}  # kind → child of (class, accepted, ok)
        self._req_children: dict[tuple[str, str], object] = {}

    def event_answered(self, kind: int, accepted: bool, message: str) -> None:
        """Count one EVENT / `POST /events` answer."""
        if accepted and not message:  # the common answer: counted by kind, added at a scrape
            pending = self._accepted_pending
            pending[kind] = pending.get(kind, 0) + 1
            return
        self._event_child(kind, accepted, message).inc()  # type: ignore[attr-defined]

    def _event_child(self, kind: int, accepted: bool, message: str) -> object:
        labels = (
            storage_class(kind).value if 0 <= kind < 65536 else "invalid",
            "accepted" if accepted else "refused",
            reason_label(message),
        )
        child = self._event_children.get(labels)
        if child is None:
            child = self._event_children[labels] = self._events.labels(*labels)
        return child

    def req_answered(self, verb: str, refusal: str | None) -> None:
        """Count one REQ / COUNT (WebSocket) or query / count (HTTP bridge); `refusal` is the
        CLOSED reason of a refused one."""
        result = "ok" if refusal is None else reason_label(refusal)
        key = (verb, result)
        child = self._req_children.get(key)
        if child is None:
            child = self._req_children[key] = self._reqs.labels(verb, result)
        child.inc()  # type: ignore[attr-defined]

    def auth_answered(self, refusal: str | None) -> None:
        self._auths.labels("ok" if refusal is None else reason_label(refusal)).inc()

    def store_inserted(self, seconds: float) -> None:
        """One insert's store latency (`store_seconds{op="insert"}`)."""
        pending = self._insert_pending
        pending.append(seconds)
        if len(pending) >= PENDING_OBSERVATIONS:
            self._flush()

    def _flush(self) -> None:
        """Add the held observations and counts to their metrics."""
        held, self._insert_pending = self._insert_pending, []
        observe_many(self.store_insert_seconds, held)
        counts, self._accepted_pending = self._accepted_pending, {}
        for kind, n in counts.items():
            child = self._accepted_children.get(kind)
            if child is None:
                child = self._accepted_children[kind] = self._event_child(kind, True, "")
            child.inc(n)  # type: ignore[attr-defined]

    def render(self) -> bytes:
        self._flush()
        return generate_latest(self.registry)


def observe_many(child: Any, values: list[float]) -> None:
    """`child.observe(v)` for each of `values` (a histogram without exemplars), with one
    locked add per bucket touched instead of two per value; per value when this
    prometheus_client keeps its buckets otherwise."""
    if not values:
        return
    bounds, buckets, total = (getattr(child, a, None) for a in ("_upper_bounds", "_buckets", "_sum"))
    if bounds is None or buckets is None or total is None or len(bounds) != len(buckets):
        for v in values:
            child.observe(v)
        return
    counts: dict[int, int] = {}
    for v in values:
        i = bisect_left(bounds, v)  # the first bound ≥ v: `observe`'s bucket (the last is +Inf)
        counts[i] = counts.get(i, 0) + 1
    total.inc(sum(values))
    for i, n in counts.items():
        buckets[i].inc(n)


def sample_values(text: str, name: str) -> Iterable[tuple[str, float]]:
    """(labels text, value) of every sample `name` in a Prometheus text body: for tests and the
    CLI, never the relay itself."""
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            head, _, value = line.rpartition(" ")
            rest = head[len(name) :]
            if rest == "" or rest.startswith("{"):
                yield rest, float(value)
