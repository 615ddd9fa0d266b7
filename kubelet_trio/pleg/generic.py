"""The generic pod lifecycle event generator: periodic relisting (Go: ``pkg/kubelet/pleg/generic.go``).

Every ``relist_period`` the relister lists all pods and containers (exited ones included), diffs each pod
against the previous listing, inspects the pods that changed (``get_pod_status``) into the
:class:`~kubelet_trio.container.cache.PodCache`, and sends :class:`PodLifecycleEvent` s to the sync loop.

The guarantees the rest of the kubelet relies on (KUBELET-REFERENCE.md section 13, item 8):

- A failed listing changes nothing: no events, no cache timestamp, no relist time (so health decays).
- A pod whose inspection fails keeps its old record and is re-inspected next time, so its events are
  recomputed and sent once the inspection succeeds; none of them is sent before.
- The cache's global timestamp moves only after every changed pod has been written, which is what
  releases pod workers blocked in :meth:`PodCache.get_newer_than`.

Like the Go relister, it assumes a container is not created, stopped and removed within one period.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterable
from typing import Protocol

import attrs
import trio

from kubelet_trio.clock import go_duration
from kubelet_trio.container.cache import PodCache
from kubelet_trio.container.types import ContainerState, PodStatus, RuntimeContainer, RuntimePod
from kubelet_trio.logs import kobj, kv
from kubelet_trio.pleg.events import PodLifecycleEvent, PodLifecycleEventType

__all__ = [
    "DEFAULT_CHANNEL_CAPACITY",
    "DEFAULT_RELIST_PERIOD",
    "DEFAULT_RELIST_THRESHOLD",
    "GenericPLEG",
    "PodLister",
    "compute_events",
]

logger = logging.getLogger(__name__)

DEFAULT_RELIST_PERIOD = 1.0  # genericPlegRelistPeriod
DEFAULT_RELIST_THRESHOLD = 180.0  # genericPlegRelistThreshold (3 min)
DEFAULT_CHANNEL_CAPACITY = 1000  # plegChannelCapacity


class PodLister(Protocol):
    """The part of :class:`~kubelet_trio.kuberuntime.manager.KubeRuntimeManager` the relister uses."""

    async def get_pods(self, all: bool = True) -> list[RuntimePod]: ...

    async def get_pod_status(self, uid: str, name: str, namespace: str) -> PodStatus: ...


# The relister's view of a container or sandbox; "non-existent" completes the transitions.
_RUNNING = "running"
_EXITED = "exited"
_UNKNOWN = "unknown"
_NON_EXISTENT = "non-existent"

_CONTAINER_STATE = {
    ContainerState.CREATED: _UNKNOWN,  # the kubelet does not use "created" yet
    ContainerState.RUNNING: _RUNNING,
    ContainerState.EXITED: _EXITED,
    ContainerState.UNKNOWN: _UNKNOWN,
}


def _state_of(pod: RuntimePod | None, cid: str) -> str:
    if pod is None:
        return _NON_EXISTENT
    # Sandboxes are listed as containers: READY -> RUNNING, NOTREADY -> EXITED (SandboxToContainerState).
    for c in (*pod.containers, *pod.sandboxes):
        if c.id == cid:
            return _CONTAINER_STATE[c.state]
    return _NON_EXISTENT


def _events_for(uid: str, cid: str, old: str, new: str) -> list[PodLifecycleEvent]:
    """The Go event table (``generateEvents``)."""
    if old == new:
        return []
    if new == _RUNNING:
        return [PodLifecycleEvent(uid, PodLifecycleEventType.CONTAINER_STARTED, cid)]
    if new == _EXITED:
        return [PodLifecycleEvent(uid, PodLifecycleEventType.CONTAINER_DIED, cid)]
    if new == _UNKNOWN:
        return [PodLifecycleEvent(uid, PodLifecycleEventType.CONTAINER_CHANGED, cid)]
    if old == _EXITED:  # new is non-existent; the death was already reported
        return [PodLifecycleEvent(uid, PodLifecycleEventType.CONTAINER_REMOVED, cid)]
    return [
        PodLifecycleEvent(uid, PodLifecycleEventType.CONTAINER_DIED, cid),
        PodLifecycleEvent(uid, PodLifecycleEventType.CONTAINER_REMOVED, cid),
    ]


def _container_ids(*pods: RuntimePod | None) -> list[str]:
    """IDs of the containers and sandboxes of ``pods``, first occurrence order, without duplicates."""
    seen: dict[str, None] = {}
    for pod in pods:
        if pod is None:
            continue
        items: Iterable[RuntimeContainer] = (*pod.containers, *pod.sandboxes)
        for c in items:
            seen.setdefault(c.id, None)
    return list(seen)


def compute_events(uid: str, old: RuntimePod | None, new: RuntimePod | None) -> list[PodLifecycleEvent]:
    """All events between two listings of one pod, ContainerChanged included."""
    events: list[PodLifecycleEvent] = []
    for cid in _container_ids(old, new):
        events.extend(_events_for(uid, cid, _state_of(old, cid), _state_of(new, cid)))
    return events


def _agrees(status: PodStatus, pod: RuntimePod) -> bool:
    """An inspection shows the same container and sandbox instances as a listing, in the same states
    (what is fixed once a state is reached, such as an exit code, cannot have changed in between)."""
    containers = {c.id: c.state for c in status.container_statuses}
    sandboxes = {
        s.id: ContainerState.RUNNING if s.ready else ContainerState.EXITED for s in status.sandbox_statuses
    }
    return containers == {c.id: c.state for c in pod.containers} and sandboxes == {
        s.id: s.state for s in pod.sandboxes
    }


@attrs.define
class _PodRecord:
    old: RuntimePod | None = None
    current: RuntimePod | None = None


@attrs.define(eq=False)
class GenericPLEG:
    """Relists the runtime every ``relist_period`` seconds; owns the pod cache's contents.

    Run it with ``await nursery.start(pleg.run)``; the sync loop (the only consumer) reads
    :attr:`events`. ``on_relist(duration, interval)`` is called after every relist attempt (for metrics);
    ``interval`` is the time since the start of the previous *successful* relist, ``None`` before one.
    """

    runtime: PodLister
    cache: PodCache
    relist_period: float = attrs.field(default=DEFAULT_RELIST_PERIOD, kw_only=True)
    relist_threshold: float = attrs.field(default=DEFAULT_RELIST_THRESHOLD, kw_only=True)
    channel_capacity: int = attrs.field(default=DEFAULT_CHANNEL_CAPACITY, kw_only=True)
    on_relist: Callable[[float, float | None], None] | None = attrs.field(default=None, kw_only=True)
    #: A runtime's cheap "what changed" token (``None``: none): while it equals the token of the last
    #: successful relist, the listing would be the same, so the relist only stamps the cache.
    change_token: Callable[[], Hashable] | None = attrs.field(default=None, kw_only=True)

    #: Trio time at the start of the last successful relist (``None``: never succeeded).
    last_relist_time: float | None = attrs.field(default=None, init=False)
    #: Duration of the latest relist attempt, and the interval observed when it began.
    relist_duration: float | None = attrs.field(default=None, init=False)
    relist_interval: float | None = attrs.field(default=None, init=False)
    #: Events dropped because the channel was full (Go metric ``pleg_discard_events``).
    discarded_events: int = attrs.field(default=0, init=False)

    _send: trio.MemorySendChannel[PodLifecycleEvent] = attrs.field(init=False)
    _receive: trio.MemoryReceiveChannel[PodLifecycleEvent] = attrs.field(init=False)
    _records: dict[str, _PodRecord] = attrs.field(init=False, factory=dict)
    _reinspect: set[str] = attrs.field(init=False, factory=set)
    _lock: trio.Lock = attrs.field(init=False, factory=trio.Lock)
    _listed_token: Hashable = attrs.field(init=False, default=None)
    #: Relists answered from an unchanged ``change_token`` without listing the runtime.
    skipped_relists: int = attrs.field(init=False, default=0)
    reused_inspections: int = attrs.field(init=False, default=0)  # changed pods a worker had just inspected

    def __attrs_post_init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[PodLifecycleEvent](self.channel_capacity)

    @property
    def events(self) -> trio.MemoryReceiveChannel[PodLifecycleEvent]:
        """The event stream. One consumer only (the sync loop)."""
        return self._receive

    def watch(self) -> trio.MemoryReceiveChannel[PodLifecycleEvent]:
        """Go's ``Watch()``: the same channel as :attr:`events`."""
        return self._receive

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Relist forever; reports started after the first relist attempt (successful or not).

        The period is measured from the *end* of each relist (Go's ``wait.Until``), so a slow relist
        stretches the interval instead of relists piling up; hence a plain sleep, not
        ``trio_util.periodic`` (which measures from the start).
        """
        await self.relist()
        task_status.started()
        while True:
            await trio.sleep(self.relist_period)
            await self.relist()

    def pods(self) -> list[RuntimePod]:
        """The runtime's pods as of the last relist: housekeeping reads these instead of listing again."""
        return [record.old for record in self._records.values() if record.old is not None]

    def healthy(self) -> tuple[bool, str]:
        """``(ok, message)``: unhealthy before the first successful relist, or when the last successful
        one started more than ``relist_threshold`` seconds ago."""
        if self.last_relist_time is None:
            return False, "pleg has yet to be successful"
        elapsed = trio.current_time() - self.last_relist_time
        if elapsed > self.relist_threshold:
            return False, (
                f"pleg was last seen active {go_duration(elapsed)} ago; "
                f"threshold is {go_duration(self.relist_threshold)}"
            )
        return True, ""

    async def relist(self) -> None:
        """List, diff, inspect changed pods into the cache, send events, then stamp the cache."""
        async with self._lock:
            timestamp = trio.current_time()
            interval = None if self.last_relist_time is None else timestamp - self.last_relist_time
            await self._relist(timestamp)
            duration = trio.current_time() - timestamp
            self.relist_duration, self.relist_interval = duration, interval
            if self.on_relist is not None:
                self.on_relist(duration, interval)

    async def _relist(self, timestamp: float) -> None:
        token = self.change_token() if self.change_token is not None else None
        if token is not None and token == self._listed_token and not self._reinspect:
            self.skipped_relists += 1
            self.last_relist_time = timestamp
            self.cache.update_time(timestamp)
            await trio.lowlevel.checkpoint()
            return
        try:
            pods = await self.runtime.get_pods(all=True)
        except Exception as err:
            logger.error("GenericPLEG: unable to retrieve pods", extra=kv(err=err))
            return
        self.last_relist_time = timestamp
        self._listed_token = token

        # setCurrent: every record's current listing is replaced (None: the pod vanished).
        for record in self._records.values():
            record.current = None
        for pod in pods:
            self._records.setdefault(pod.uid, _PodRecord()).current = pod

        reinspect = self._reinspect
        still_failing: set[str] = set()
        for uid, record in list(self._records.items()):
            events = compute_events(uid, record.old, record.current)
            if not events and uid not in reinspect:
                if record.current is None:
                    del self._records[uid]  # an empty pod disappeared: nothing to report
                continue
            status = await self._update_cache(uid, record.current, timestamp)
            if status is None and record.current is not None:
                # Inspection failed: keep the old record so the same events come back next relist.
                still_failing.add(uid)
                continue
            # update(): old <- current, forgetting pods that are gone.
            if record.current is None:
                del self._records[uid]
            else:
                record.old, record.current = record.current, None
            self._send_events(uid, events, status)
            # Let the sync loop drain the channel between pods: sends never block, so without a
            # checkpoint a relist of a thousand changed pods would overflow it before anyone reads.
            await trio.lowlevel.checkpoint()
        self._reinspect = still_failing

        # Only now is every changed pod in the cache: release readers waiting for this relist.
        self.cache.update_time(timestamp)

    async def _update_cache(self, uid: str, pod: RuntimePod | None, listed_at: float) -> PodStatus | None:
        """Write the pod's fresh status to the cache; ``None`` when it vanished or inspection failed.

        A pod a worker inspected after this listing began (right after its own actions), or whose entry
        shows exactly the containers and sandboxes of the listing in the same states, is not inspected
        again: that entry already shows all the listing saw, and the runtime is spared the calls."""
        if pod is None:
            logger.debug("PLEG: delete status for pod", extra=kv(pod_uid=uid))
            self.cache.delete(uid)
            return None
        entry = self.cache.get_entry(uid)
        if (
            entry is not None
            and entry.error is None
            and (entry.modified > listed_at or _agrees(entry.status, pod))
        ):
            self.reused_inspections += 1
            return entry.status
        timestamp = trio.current_time()  # the status is at least this fresh (Go takes now() here too)
        try:
            status = await self.runtime.get_pod_status(pod.uid, pod.name, pod.namespace)
        except Exception as err:
            logger.error(
                "PLEG: inspecting pod failed, will retry", extra=kv(pod=kobj(pod), pod_uid=uid, err=err)
            )
            # Like Go, record the error so that a pod worker waiting for fresh status sees it rather than
            # acting on stale data once the cache timestamp moves.
            self.cache.set(uid, PodStatus(uid=uid, name=pod.name, namespace=pod.namespace), err, timestamp)
            return None
        status = attrs.evolve(status, ips=self._pod_ips(uid, status))
        if not status.timestamp:
            status = attrs.evolve(status, timestamp=timestamp)
        self.cache.set(uid, status, None, timestamp)
        return status

    def _pod_ips(self, uid: str, status: PodStatus) -> tuple[str, ...]:
        """Keep the previous IPs when the new status has none and no sandbox is ready (a pod torn down:
        the API keeps showing the IP of a completed pod)."""
        if status.ips:
            return status.ips
        entry = self.cache.get_entry(uid)
        if entry is None or entry.error is not None or not entry.status.ips:
            return status.ips
        if any(s.ready for s in status.sandbox_statuses):
            return status.ips
        return entry.status.ips

    def _send_events(self, uid: str, events: list[PodLifecycleEvent], status: PodStatus | None) -> None:
        for event in events:
            if event.type is PodLifecycleEventType.CONTAINER_CHANGED:
                continue  # not reliable and unused: never sent
            # Overflow policy: drop. The relister must never block on a slow sync loop (its health and
            # the cache freshness depend on it); the 1-minute resync and later relists catch up.
            try:
                self._send.send_nowait(event)
            except trio.WouldBlock:
                self.discarded_events += 1
                logger.error(
                    "event channel is full, discarding this relist() cycle event",
                    extra=kv(pod_uid=uid, event=event.type, container_id=event.data),
                )
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                logger.debug("event channel closed, dropping event", extra=kv(pod_uid=uid, event=event.type))
            if event.type is PodLifecycleEventType.CONTAINER_DIED and status is not None:
                for c in status.container_statuses:
                    if c.id == event.data:
                        logger.debug(
                            "container finished",
                            extra=kv(pod_uid=uid, container_id=c.id, exit_code=c.exit_code),
                        )
                        break
