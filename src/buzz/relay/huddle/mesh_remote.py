"""Remote peers (huddle.md §9.6–§9.8): the owner's side (remote seats in its room, fan-out
envelopes back) and the ingress side (registration at the owner, the mirror room, delivery).

Control streams are one per remote client socket; messages follow §9.6 with `fenced` on each.
Every envelope is checked against the generation floor and the registration it claims; the
owner's fan-out skips the author (`Room.receivers`), and the ingress never delivers a frame to
the index that wrote it nor forwards it back onto the mesh.

`RemoteHub` holds both sides' state for one replica and dispatches what arrives; the owner's
side is `mesh_owner.OwnerSide`, the ingress side `mesh_ingress.IngressSide`, the streams and
their fencing `mesh_streams`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from buzz.core.mesh_envelope import INGRESS, unpack
from buzz.core.mesh_lease import GenerationFloor, Lease
from buzz.relay.huddle.mesh_ingress import IngressSide
from buzz.relay.huddle.mesh_link import MeshLink
from buzz.relay.huddle.mesh_owner import OwnerSide
from buzz.relay.huddle.mesh_streams import IngressStream, OwnerStream, fenced_field

if TYPE_CHECKING:
    from buzz.relay.huddle.parts import HuddleParts

log = logging.getLogger(__name__)

PING_S = 5.0  # §9.9 Redis transport: `ping` on every ingress stream this often
SILENCE_TICKS = 3  # an owner stream silent this many pings (15 s) is closed


class RemoteHub(OwnerSide, IngressSide):
    """Both sides for one replica, on one `MeshLink`."""

    def __init__(
        self, huddles: HuddleParts, runtime_id: str, link_factory: Callable[[RemoteHub], MeshLink]
    ) -> None:
        self.huddles = huddles
        self.runtime_id = runtime_id
        self.floor = GenerationFloor()
        self.owner_streams: dict[str, OwnerStream] = {}
        self.registered: dict[tuple[str, int, str, int], OwnerStream] = {}  # (session, gen, sender, author)
        self.ingress_streams: dict[str, IngressStream] = {}
        self.by_target: dict[tuple[str, int], IngressStream] = {}  # (session, local index)
        self.link = link_factory(self)
        self.tasks: set[asyncio.Task[Any]] = set()
        self.ping_s = PING_S
        self._watch: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.link.start()
        self._watch = asyncio.get_running_loop().create_task(self._watch_loop(), name="mesh-watch")

    async def _watch_loop(self) -> None:
        """Liveness both ways (§9.5, §9.6, §9.9). Ingress: ping each stream, and close the clients
        of a stream whose lease is no longer in Redis as registered (the owner died or lost it;
        a Redis error counts the same: fail closed), so they rejoin under the next owner. Owner:
        drop the peers of a stream silent for SILENCE_TICKS pings (its replica died)."""
        while True:
            await asyncio.sleep(self.ping_s)
            with contextlib.suppress(Exception):
                await self._watch_once()

    async def _watch_once(self) -> None:
        mesh = self.huddles.mesh
        assert mesh is not None
        checked: dict[tuple[str, str], Lease | None] = {}
        for stream in list(self.ingress_streams.values()):
            if stream.sink is None or stream.closed:
                continue
            self.send(stream, {"t": "ping"})
            key = (stream.session, stream.community)
            if key not in checked:
                try:
                    checked[key] = (await mesh.store.read(stream.session, stream.community))[0]
                except Exception:
                    checked[key] = None
            if checked[key] != stream.lease:
                log.warning(
                    "huddle owner of %s is gone (lease %s): closing its remote clients",
                    stream.session,
                    checked[key],
                )
                self._teardown_ingress(stream)
        deadline = time.monotonic() - self.ping_s * SILENCE_TICKS
        for owned in list(self.owner_streams.values()):
            if owned.last_seen < deadline:  # a seat, or a hello whose registration never came
                log.warning("huddle remote stream %s silent: removing its peer", owned.stream)
                await self.owner_remove(owned)

    def on_undelivered(self, stream_id: str) -> None:
        """A control message of `stream_id` reached no subscriber: the replica at the other end
        is not listening (killed, or its listener lost Redis), so no answer can come. Ingress: a
        registration still waiting is answered as by a `goodbye`, `huddle_owner_unreachable`
        now rather than after the wait (a rejoin after the owner died); a joined client stays
        until the lease check closes it, since until the dead owner's lease expires a rejoin
        could not succeed anyway (decision 78). Owner: the stream's seat is removed, as after
        its silence check."""
        stream = self.ingress_streams.get(stream_id)
        if stream is not None:
            if not stream.answer.done():
                log.warning(
                    "huddle owner of %s is not listening (lease %s): join refused as unreachable",
                    stream.session,
                    stream.lease,
                )
                stream.answer.set_result({"t": "goodbye"})
            return
        owned = self.owner_streams.get(stream_id)
        if owned is not None:
            log.warning("huddle remote stream %s is not listening: removing its peer", stream_id)
            self.spawn(self.owner_remove(owned))

    def spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def send(self, stream: OwnerStream | IngressStream, message: dict[str, Any]) -> None:
        if isinstance(stream, OwnerStream):
            peer, lease = stream.sender, stream.lease
        else:
            peer, lease = stream.lease.owner, stream.lease
        self.link.send_control(
            peer, stream.stream, {**message, "fenced": fenced_field(stream.session, lease)}
        )

    # -- arrivals ---------------------------------------------------------------------------
    async def on_control(self, stream_id: str, message: dict[str, Any]) -> None:
        kind = message.get("t")
        ingress = self.ingress_streams.get(stream_id)
        if ingress is not None:
            await self._ingress_control(ingress, kind, message)
        else:
            await self._owner_control(stream_id, kind, message)

    def on_media(self, envelopes: list[memoryview]) -> None:
        """The envelopes of one Redis message, in one pass. Owner → ingress fan-out envelopes
        (the bulk: one per remote receiver per frame) take `_fanout_fast`; the rest, and any
        fan-out envelope it does not vouch for, the full checks of `_ingress_media`."""
        checked: dict[bytes, tuple[str, int, str] | None] = {}  # fixed part → (session, gen, owner)
        for data in envelopes:
            if not self._fanout_fast(data, checked):
                self._on_envelope(data)

    def _on_envelope(self, data: memoryview | bytes) -> None:
        env = unpack(data)  # type: ignore[arg-type]  # slices and unpack_from take memoryviews
        stats = self.huddles.stats
        if env is None:
            return stats.count("mesh_envelopes_malformed_total")
        if env.direction == INGRESS:
            return self._owner_media(env)
        return self._ingress_media(env)

    async def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        for stream in list(self.ingress_streams.values()):
            self.unregister(stream)
        await self.link.flush(1.0)  # unregister_peer / goodbye reach the owners before we stop
        await self.link.stop()
        for task in list(self.tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
