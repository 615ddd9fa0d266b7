"""The probe manager: owns the probe workers and their results (Go: ``prober_manager.go``).

- :meth:`ProbeManager.add_pod` (every pod sync) starts a worker per container and probe kind present,
  including restartable init containers; existing workers are kept (probes are immutable).
- :meth:`ProbeManager.stop_liveness_and_startup` when a pod starts terminating, :meth:`remove_pod` after
  it is killed, :meth:`cleanup_pods` in housekeeping.
- Results live in :attr:`results`, the runtime manager's ``probe_results`` (liveness/startup failures
  kill containers); every change is sent on :attr:`updates` (capacity 20, senders block, like Go) for
  the kubelet's sync loop.
- :meth:`probe_status` is Go's ``UpdatePodStatus``: the ``ready``/``started`` inputs of status
  generation, triggering an immediate readiness probe for containers not (yet) ready.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping

import attrs
import trio

from kubelet_trio.aiobridge import open_lazy_asyncio_thread
from kubelet_trio.api import Container, Pod
from kubelet_trio.api.status import PodStatus as ApiPodStatus
from kubelet_trio.api.timefmt import parse_rfc3339
from kubelet_trio.clock import WallClock
from kubelet_trio.container.cache import PodCache
from kubelet_trio.container.types import ContainerState, PodStatus
from kubelet_trio.cri.runtime import RuntimeService
from kubelet_trio.logs import kobj, kv
from kubelet_trio.prober.metrics import ProbeMetrics
from kubelet_trio.prober.prober import Prober, probe_spec
from kubelet_trio.prober.results import ProbeKind, ProbeResult, ProbeUpdate, ResultsManager
from kubelet_trio.prober.slots import ExecSlots
from kubelet_trio.prober.worker import ProbeWorker

__all__ = ["UPDATES_CAPACITY", "ProbeManager"]

logger = logging.getLogger(__name__)

UPDATES_CAPACITY = 20
PodEvent = Callable[[Pod, str, str, str], None]
WorkerKey = tuple[str, str, ProbeKind]
_KINDS = (ProbeKind.STARTUP, ProbeKind.READINESS, ProbeKind.LIVENESS)


def _probed_containers(pod: Pod) -> list[Container]:
    spec = pod.spec
    if spec is None:
        return []
    sidecars = [c for c in spec.init_containers or () if c.is_sidecar]
    return [*sidecars, *(spec.containers or ())]


@attrs.define(eq=False, kw_only=True)
class ProbeManager:
    """Start with ``await nursery.start(manager.run)``; workers live in its nursery.

    Args:
        runtime: where exec probes run (CRI ExecSync).
        status_provider: the pod's latest API status by UID (the status manager's), which workers read.
        cache: the runtime pod cache, for exact container start times (``initialDelaySeconds``).
        clock: maps CRI timestamps to Trio time.
        events: pod events (Unhealthy, ProbeWarning).
        initial_jitter: workers started within a period of the manager's start wait a random part of
            their period first (Go: so that a restarted kubelet does not probe everything at once).
        exec_slots: how many exec probes are in the runtime at once (2 per CPU; Go has no bound).
    """

    runtime: RuntimeService
    status_provider: Callable[[str], ApiPodStatus | None]
    cache: PodCache | None = None
    clock: WallClock = attrs.Factory(WallClock)
    events: PodEvent | None = None
    initial_jitter: bool = True
    rng: random.Random = attrs.Factory(random.Random)
    metrics: ProbeMetrics | None = None  # prober_probe_total and durations (/metrics/probes)
    exec_slots: ExecSlots = attrs.Factory(ExecSlots)  # how many exec probes run at once
    results: ResultsManager = attrs.field(init=False, factory=ResultsManager)
    prober: Prober = attrs.field(init=False)
    started_at: float = attrs.field(init=False, default=0.0)
    _workers: dict[WorkerKey, ProbeWorker] = attrs.field(init=False, factory=dict)
    _nursery: trio.Nursery | None = attrs.field(init=False, default=None)
    _send: trio.MemorySendChannel[ProbeUpdate] = attrs.field(init=False)
    updates: trio.MemoryReceiveChannel[ProbeUpdate] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.prober = Prober(runtime=self.runtime, events=self.events, exec_slots=self.exec_slots)
        self._send, self.updates = trio.open_memory_channel[ProbeUpdate](UPDATES_CAPACITY)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the workers; one asyncio thread (gRPC probes, started at the first) serves all their
        probes and is joined once the workers have ended. httpGet probes need no shared client: each
        request has a connection of its own, as Go's prober."""
        self.started_at = trio.current_time()
        async with open_lazy_asyncio_thread() as asyncio_thread:
            self.prober.asyncio_thread = asyncio_thread
            try:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    task_status.started()
                    await trio.sleep_forever()
            finally:
                self._nursery = None
                self.prober.asyncio_thread = None

    # -- what workers use ---------------------------------------------------------------------------

    def pod_status(self, uid: str) -> ApiPodStatus | None:
        return self.status_provider(uid)

    def container_started_at(self, uid: str, container_id: str, api_started_at: str | None) -> float | None:
        """The Trio time the container started: exact from the runtime cache, else the API's seconds."""
        if self.cache is not None:
            for status in self.cache.get(uid).container_statuses:
                if status.id == container_id and status.started_at:
                    return self.clock.to_trio(status.started_at)
        if not api_started_at:
            return None
        moment = parse_rfc3339(api_started_at)
        return self.clock.to_trio(int(moment.timestamp()) * 10**9)

    async def set_result(self, kind: ProbeKind, container_id: str, result: ProbeResult, uid: str) -> None:
        update = self.results.set(kind, container_id, result, uid)
        if update is not None:
            logger.debug(
                "probe result changed",
                extra=kv(uid=uid, container_id=container_id, probe=kind.value, result=result.value),
            )
            await self._send.send(update)

    def worker_finished(self, worker: ProbeWorker) -> None:
        if self._workers.get(worker.key) is worker:
            del self._workers[worker.key]

    # -- the kubelet's API ---------------------------------------------------------------------------

    def add_pod(self, pod: Pod) -> None:
        """Start the workers this pod needs (``AddPod``); newer pod objects replace the workers' copy."""
        if self._nursery is None:
            raise RuntimeError("ProbeManager.run() has not been started")
        for container in _probed_containers(pod):
            for kind in _KINDS:
                spec = probe_spec(container, kind)
                if spec is None:
                    continue
                key = (pod.uid, container.name or "", kind)
                existing = self._workers.get(key)
                if existing is not None:
                    existing.pod = pod
                    continue
                worker = ProbeWorker(self, pod, container, kind, spec)
                self._workers[key] = worker
                self._nursery.start_soon(
                    worker.run, name=f"probe:{pod.namespace}/{pod.name}/{container.name}/{kind.value}"
                )
                logger.debug(
                    "probe worker started",
                    extra=kv(pod=kobj(pod), uid=pod.uid, container=container.name, probe=kind.value),
                )

    def _stop(self, uid: str, kinds: tuple[ProbeKind, ...]) -> None:
        for key, worker in list(self._workers.items()):
            if key[0] == uid and key[2] in kinds:
                worker.stop()
                del self._workers[key]

    def stop_liveness_and_startup(self, pod: Pod) -> None:
        """A terminating pod keeps its readiness probes only (``StopLivenessAndStartup``)."""
        self._stop(pod.uid, (ProbeKind.LIVENESS, ProbeKind.STARTUP))

    def remove_pod(self, pod: Pod) -> None:
        self._stop(pod.uid, _KINDS)

    def cleanup_pods(self, desired: Mapping[str, Pod]) -> None:
        """Stop the workers of pods no longer desired (``CleanupPods``)."""
        for uid in {key[0] for key in self._workers} - set(desired):
            self._stop(uid, _KINDS)

    def workers(self, uid: str | None = None) -> list[ProbeWorker]:
        return [w for key, w in self._workers.items() if uid is None or key[0] == uid]

    def container_started(self, uid: str, name: str, container_id: str, pod_ip: str) -> None:
        """The kubelet started this container: its readiness worker checks it at once (see
        :meth:`ProbeWorker.container_started`)."""
        worker = self._workers.get((uid, name, ProbeKind.READINESS))
        if worker is not None:
            worker.container_started(container_id, pod_ip)

    def container_stopped(self, uid: str, container_id: str) -> None:
        """The kubelet stopped this container: its workers stop exec'ing into it (every try would err,
        and an error is no result) until the status shows what became of it."""
        for key, worker in self._workers.items():
            if key[0] == uid and worker.container_id == container_id:
                worker.stopped = True

    def trigger(self, uid: str, container: str, kind: ProbeKind) -> None:
        worker = self._workers.get((uid, container, kind))
        if worker is not None:
            worker.trigger()

    def probe_status(self, pod: Pod, runtime_status: PodStatus) -> tuple[dict[str, bool], dict[str, bool]]:
        """``(readiness, started)`` by container ID for status generation (``UpdatePodStatus``).

        A readiness worker whose container runs but is not ready is asked to probe at once, as Go does;
        not one whose container has stopped (every status generation of a terminating pod would
        otherwise exec into it).
        """
        readiness = {
            cid: r is ProbeResult.SUCCESS
            for cid, r in self.results.for_pod(pod.uid, ProbeKind.READINESS).items()
        }
        started = {
            cid: r is ProbeResult.SUCCESS
            for cid, r in self.results.for_pod(pod.uid, ProbeKind.STARTUP).items()
        }
        for container in _probed_containers(pod):
            worker = self._workers.get((pod.uid, container.name or "", ProbeKind.READINESS))
            if worker is None:
                continue
            current = runtime_status.find(container.name or "")
            if (
                current is not None
                and current.state is ContainerState.RUNNING
                and not readiness.get(current.id, False)
            ):
                worker.trigger(current.id)
        return readiness, started
