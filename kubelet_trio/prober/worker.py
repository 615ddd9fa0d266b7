"""One probe worker: one task per (pod, container, probe kind) (Go: ``pkg/kubelet/prober/worker.go``).

It probes on a fixed ``periodSeconds`` ticker (plus immediate manual triggers; a trigger for the
container being probed right then is answered by that probe; a readiness ticker restarts at the check
of a container the kubelet has just started), reading the container from the pod's latest API status,
and stores a result only after ``failureThreshold`` consecutive failures or ``successThreshold``
consecutive successes. The order of checks in :meth:`ProbeWorker.step` is Go's ``doProbe``:

1. no status yet → wait; pod Failed/Succeeded → exit;
2. no container ID yet → wait; a new container ID → reset to the initial result and resume (a container
   the kubelet has just started counts before the status shows it, when there is no initial delay);
3. on hold (after a stored liveness/startup failure) → wait for the next container;
4. container not running → Failure, exit if it terminated under ``restartPolicy: Never``;
5. pod being deleted → liveness/startup report Success and exit (a quiet shutdown);
6. within ``initialDelaySeconds`` of the container's start → wait;
7. startup gating: a started container's startup probe idles, an unstarted one's liveness/readiness do;
8. the kubelet has stopped the container (the status does not show it yet) → wait, no exec;
9. probe (an error is thrown away), count the run, store at the threshold. An exec probe waits for a
   slot (``slots.py``); a readiness or startup probe whose stored result is not yet Success is urgent.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Protocol

import attrs
import trio

from kubelet_trio.api import Container, Pod, Probe
from kubelet_trio.api.pod import TERMINAL_PHASES
from kubelet_trio.api.status import ContainerState, ContainerStateRunning, ContainerStatus, PodStatus
from kubelet_trio.logs import kobj, kv
from kubelet_trio.prober.probe import ProbeError
from kubelet_trio.prober.results import ProbeKind, ProbeResult

if TYPE_CHECKING:
    import random

    from kubelet_trio.prober.metrics import ProbeMetrics
    from kubelet_trio.prober.prober import Prober
    from kubelet_trio.prober.results import ResultsManager

__all__ = ["INITIAL_RESULTS", "ProbeWorker", "WorkerHost"]

logger = logging.getLogger(__name__)

INITIAL_RESULTS = {
    ProbeKind.READINESS: ProbeResult.FAILURE,
    ProbeKind.LIVENESS: ProbeResult.SUCCESS,
    ProbeKind.STARTUP: ProbeResult.UNKNOWN,
}


def bare_container_id(container_id: str) -> str:
    """``containerd://abc`` → ``abc``."""
    return container_id.partition("://")[2] or container_id


class WorkerHost(Protocol):
    """What a worker uses of the :class:`~kubelet_trio.prober.manager.ProbeManager` that runs it, named
    here so that the worker does not import the manager, which imports the worker."""

    initial_jitter: bool
    rng: random.Random
    metrics: ProbeMetrics | None
    results: ResultsManager
    prober: Prober
    started_at: float

    def pod_status(self, uid: str) -> PodStatus | None: ...

    def container_started_at(
        self, uid: str, container_id: str, api_started_at: str | None
    ) -> float | None: ...

    async def set_result(self, kind: ProbeKind, container_id: str, result: ProbeResult, uid: str) -> None: ...

    def worker_finished(self, worker: ProbeWorker) -> None: ...


@attrs.define(eq=False)
class ProbeWorker:
    manager: WorkerHost
    pod: Pod
    container: Container
    kind: ProbeKind
    spec: Probe
    container_id: str = ""  # bare id of the instance being probed
    last_result: ProbeResult | None = None
    result_run: int = 0
    on_hold: bool = False
    stopped: bool = False  # the kubelet stopped this container (no exec until the next one)
    # A container the kubelet has just started, before the status shows it: (bare id, pod IP)
    hint: tuple[str, str] | None = None
    probes_run: int = 0  # for tests and metrics
    probing: str = ""  # the bare id of the container a probe is being run on right now
    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    _trigger: trio.Event = attrs.Factory(trio.Event)
    _next_tick: float = 0.0
    _rephase: bool = False  # the next probe checks a container just started: the period counts from it

    @property
    def key(self) -> tuple[str, str, ProbeKind]:
        return (self.pod.uid, self.container.name or "", self.kind)

    @property
    def period(self) -> float:
        return float(self.spec.period_seconds or 10)

    def _ctx(self) -> dict[str, object]:
        return {
            "pod": kobj(self.pod),
            "uid": self.pod.uid,
            "container": self.container.name,
            "probe": self.kind.value,
        }

    def trigger(self, container_id: str = "") -> None:
        """Probe now (Go's manual trigger; coalesces like a channel of one). A trigger for the container
        a probe is being run on is dropped: that probe's result is the answer it asks for (under load
        an exec takes long enough for the status generated meanwhile to ask again, and each runs a
        process in the container)."""
        if container_id and container_id == self.probing:
            return
        self._trigger.set()

    def container_started(self, container_id: str, pod_ip: str) -> None:
        """The kubelet started this container: a readiness probe without an initial delay checks it now
        (as Go's status update asks it to, once the status shows the container running) rather than after
        the status has been regenerated from a fresh inspection, and its period counts from that check
        (the ticker's next tick could come right after it: one more process in the container for
        nothing). Liveness and startup probes keep their ticker."""
        if self.kind is ProbeKind.READINESS and not self.spec.initial_delay_seconds:
            self.hint = (container_id, pod_ip)
            self._rephase = True
            self.trigger()

    def _current(self, status: PodStatus) -> tuple[ContainerStatus | None, str]:
        """The container to probe (from the pod's API status, or the hint while the status has not caught
        up with it) and the pod IP to probe it on."""
        pod_ip = status.pod_ip or ""
        current = self._find_status(status)
        if self.hint is None:
            return current, pod_ip
        hinted_id, hinted_ip = self.hint
        if current is not None and bare_container_id(current.container_id or "") == hinted_id:
            self.hint = None  # the status shows it now: from here on the status is the source
            return current, pod_ip
        running = ContainerState(running=ContainerStateRunning())
        started = self.container.startup_probe is None
        view = ContainerStatus(
            name=self.container.name, container_id=hinted_id, state=running, started=started
        )
        return view, pod_ip or hinted_ip

    def stop(self) -> None:
        self.scope.cancel()

    async def run(self) -> None:
        with self.scope:
            try:
                await self._loop()
            finally:
                if self.container_id:
                    self.manager.results.remove(self.kind, self.container_id)
                if self.manager.metrics is not None:
                    self.manager.metrics.forget_probe(self.kind, self.pod, self.container.name or "")
                self.manager.worker_finished(self)
                logger.debug("probe worker stopped", extra=kv(**self._ctx()))

    async def _loop(self) -> None:
        manager = self.manager
        if manager.initial_jitter and self.period > trio.current_time() - manager.started_at:
            await trio.sleep(manager.rng.random() * self.period)  # the kubelet just started: spread out
        self._next_tick = trio.current_time() + self.period
        while await self.step():
            await self._wait_tick()

    async def _wait_tick(self) -> None:
        now = trio.current_time()
        if self._next_tick <= now:  # a tick came while probing (a ticker channel holds one)
            missed = math.floor((now - self._next_tick) / self.period) + 1
            self._next_tick += missed * self.period
            return
        with trio.move_on_at(self._next_tick):
            await self._trigger.wait()
            self._trigger = trio.Event()
            return
        self._next_tick += self.period

    async def _set(self, result: ProbeResult) -> None:
        await self.manager.set_result(self.kind, self.container_id, result, self.pod.uid)

    def _find_status(self, status: PodStatus) -> ContainerStatus | None:
        name = self.container.name
        for group in (status.container_statuses, status.init_container_statuses):
            for container_status in group or ():
                if container_status.name == name and container_status.container_id:
                    return container_status
        return None

    async def step(self) -> bool:
        """One ``doProbe``; False when the worker should exit."""
        step_started = trio.current_time()
        status = self.manager.pod_status(self.pod.uid)
        if status is None:
            return True
        if status.phase in TERMINAL_PHASES:
            logger.debug("pod is terminated, probe worker exits", extra=kv(**self._ctx(), phase=status.phase))
            return False
        current, pod_ip = self._current(status)
        if current is None or not current.container_id:
            return True
        container_id = bare_container_id(current.container_id)
        if container_id != self.container_id:
            if self.container_id:
                self.manager.results.remove(self.kind, self.container_id)
            self.container_id = container_id
            self.on_hold = self.stopped = False  # a new container: probe again (the run count carries on)
            await self._set(INITIAL_RESULTS[self.kind])
        if self.on_hold:
            return True
        state = current.state
        running = state.running if state is not None else None
        if running is None:
            await self._set(ProbeResult.FAILURE)
            terminated = state is not None and state.terminated is not None
            policy = (self.pod.spec.restart_policy if self.pod.spec else None) or "Always"
            return not terminated or policy != "Never"
        deleting = self.pod.metadata is not None and self.pod.metadata.deletion_timestamp is not None
        if deleting and self.kind in (ProbeKind.LIVENESS, ProbeKind.STARTUP):
            await self._set(ProbeResult.SUCCESS)  # a quiet shutdown: no restarts while terminating
            return False
        started_at = self.manager.container_started_at(self.pod.uid, self.container_id, running.started_at)
        if started_at is not None and trio.current_time() - started_at < (
            self.spec.initial_delay_seconds or 0
        ):
            return True
        if current.started:
            if self.kind is ProbeKind.STARTUP:
                return True  # started: the startup probe idles (it stays for the next instance)
        elif self.kind is not ProbeKind.STARTUP:
            return True  # not started yet: liveness and readiness wait
        if self.stopped:
            return True
        self.probes_run += 1
        self.probing = self.container_id
        if self._trigger.is_set():  # asked for before this probe began: this probe answers it
            self._trigger = trio.Event()
        if self._rephase:  # the first probe of a started container: the next one a period after it
            self._rephase = False
            self._next_tick = step_started + self.period
        try:
            urgent = self.kind is not ProbeKind.LIVENESS and (
                self.manager.results.get((self.kind, self.container_id)) is not ProbeResult.SUCCESS
            )
            result = await self.manager.prober.probe(
                self.kind, self.pod, self.container, self.container_id, pod_ip, urgent
            )
        except ProbeError:
            return True  # an error is not a result
        finally:
            self.probing = ""
        if self.manager.metrics is not None:
            self.manager.metrics.observe_probe(
                self.kind, result, self.pod, self.container.name or "", trio.current_time() - step_started
            )
        if result is self.last_result:
            self.result_run += 1
        else:
            self.last_result, self.result_run = result, 1
        failure_threshold = self.spec.failure_threshold or 3
        success_threshold = self.spec.success_threshold or 1
        if (result is ProbeResult.FAILURE and self.result_run < failure_threshold) or (
            result is ProbeResult.SUCCESS and self.result_run < success_threshold
        ):
            return True
        await self._set(result)
        if self.kind in (ProbeKind.LIVENESS, ProbeKind.STARTUP) and result is ProbeResult.FAILURE:
            self.on_hold = True  # until a new container (the kubelet restarts this one)
            self.result_run = 0
        return True
