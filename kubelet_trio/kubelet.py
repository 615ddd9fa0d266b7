"""The ``Kubelet``: the nursery tree that turns desired pods into running containers and watches them.

Go: ``pkg/kubelet/kubelet.go``. ``Kubelet.run`` owns every task: the PLEG relister, the pod config sources,
the pod workers, the probe manager, the container log manager, the tickers and the sync loop. The sync
loop is the one consumer of a merged event channel (config updates, PLEG events, probe result changes, the
1 s sync tick, the 2 s housekeeping tick) and dispatches to the pod workers; it never blocks on a pod.
Cancelling ``run`` stops the node and leaves pods running, as the Go kubelet does.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import math
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio
import trio_util

from kubelet_trio import allocation
from kubelet_trio.api import Pod
from kubelet_trio.api.status import PodStatus as ApiPodStatus
from kubelet_trio.clock import WallClock
from kubelet_trio.cm.allocatable import NodeAllocatable
from kubelet_trio.config.podconfig import PodConfig
from kubelet_trio.config.types import PodOperation, PodUpdate
from kubelet_trio.container.cache import PodCache
from kubelet_trio.container_log_manager import ContainerLogManager
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.eviction import EvictionManager
from kubelet_trio.fsio import RunSync
from kubelet_trio.images import ImageGCManager
from kubelet_trio.images.gc import NodeEventSink
from kubelet_trio.kubelet_config import KubeletConfig as KubeletConfig  # re-exported: imported from here
from kubelet_trio.kubelet_host import HostInterfaceMixin
from kubelet_trio.kubelet_node_status import record_node_event
from kubelet_trio.kubelet_pods import PodsMixin
from kubelet_trio.kuberuntime.gc import GCPolicy
from kubelet_trio.kuberuntime.manager import KubeRuntimeManager
from kubelet_trio.lifecycle.predicate import admit_pod_count, admit_standalone
from kubelet_trio.logs import error_text, kobj, kv, vlevel
from kubelet_trio.metrics import KubeletMetrics
from kubelet_trio.nodeshutdown import NodeShutdownManager, ShutdownSocket, socket_path
from kubelet_trio.objects import NO_OBJECTS, ObjectStore
from kubelet_trio.pleg.events import PodLifecycleEvent, PodLifecycleEventType
from kubelet_trio.pleg.generic import GenericPLEG
from kubelet_trio.pod.manager import PodManager
from kubelet_trio.pod_workers import PodWorkers, UpdatePodOptions, UpdateType
from kubelet_trio.prober import ProbeManager, ProbeUpdate
from kubelet_trio.prober.results import ProbeKind, ProbeResult
from kubelet_trio.stats import CriStatsProvider
from kubelet_trio.status.conditions import need_to_reconcile_pod_readiness
from kubelet_trio.status.generate import active_deadline_exceeded
from kubelet_trio.status.manager import StatusManager
from kubelet_trio.status.qos import pod_qos
from kubelet_trio.sysctl import SysctlAllowlist
from kubelet_trio.volumemanager import VolumeManager, setup_data_dirs

if TYPE_CHECKING:
    from kubelet_trio.cm.container_manager import ContainerManager
    from kubelet_trio.cm.devicemanager import DeviceManager
    from kubelet_trio.cm.oom_watcher import OOMWatcher

logger = logging.getLogger(__name__)

RUNTIME_STATUS_PERIOD = 5.0
MERGED_CHANNEL_SIZE = 100


class PodSource(Protocol):
    """A pod config source component (file, http, api): it sends SETs into the PodConfig."""

    async def run(self, *, task_status: trio.TaskStatus[None] = ...) -> None: ...


class EventKind(enum.Enum):
    CONFIG = "config"
    PLEG = "pleg"
    SYNC_TICK = "sync-tick"
    HOUSEKEEPING = "housekeeping"
    PROBE = "probe"


@attrs.frozen
class LoopEvent:
    kind: EventKind
    payload: Any = None


EventSink = Callable[[Pod, str, str, str], None]  # (pod, type, reason, message)
AdmitFunc = Callable[[Pod, list[Pod]], Any]
# (kubelet, task_status=) -> serves until cancelled; started() with {"healthz"|"readonly"|"api": URL}
ServeHttp = Callable[..., Awaitable[None]]


class Component(Protocol):
    """A long-lived part of the node's tree that :meth:`Kubelet.run` starts (API mode's components)."""

    async def run(self, *, task_status: trio.TaskStatus[None] = ...) -> None: ...


def record_pod_event(sink: EventSink | None, pod: Pod, type_: str, reason: str, message: str) -> None:
    """Pod events (Pulled, Started, Killing, ...): to ``sink`` when there is one; never blocks."""
    if sink is not None:
        sink(pod, type_, reason, message)


def _creation_time(pod: Pod) -> str:
    return (pod.metadata.creation_timestamp or "") if pod.metadata else ""


@attrs.define(eq=False, kw_only=True)
class Kubelet(PodsMixin, HostInterfaceMixin):
    """One node: the sync loop over the parts it is given (Go: ``pkg/kubelet.Kubelet``).

    :func:`kubelet_trio.kubelet_builder.build_kubelet` builds every part and then the Kubelet; the Kubelet
    constructs nothing and nothing rewires it afterwards. Its methods are spread as Go spreads them over
    files: the per-pod ones (status, sync, kill, cleanup) in :mod:`kubelet_trio.kubelet_pods`, the verbs
    its servers call in :mod:`kubelet_trio.kubelet_host`; the tree, the sync loop and its dispatch here.
    """

    config: KubeletConfig
    runtime: Runtime
    clock: WallClock
    run_sync: RunSync  # small file operations (see kubelet_trio.fsio)
    metrics: KubeletMetrics
    _pod_config: PodConfig
    _pod_sources: Sequence[PodSource] = ()  # components feeding pod_config (file, http, api)
    # the node's state: the runtime's view of pods, the desired pods, the API statuses
    _cache: PodCache
    _pod_manager: PodManager
    _status_manager: StatusManager
    # the managers
    _probe_manager: ProbeManager
    _volume_manager: VolumeManager
    _kube_runtime: KubeRuntimeManager
    _pleg: GenericPLEG
    _pod_workers: PodWorkers
    # resource usage from the runtime: /stats/summary, /metrics/resource and eviction ranking
    _stats_provider: CriStatsProvider
    _image_gc_manager: ImageGCManager
    _shutdown_manager: NodeShutdownManager
    _eviction_manager: EvictionManager
    _container_log_manager: ContainerLogManager
    _device_manager: DeviceManager | None = None
    # in-place resize: allocated resources, resize admission and its conditions (None: no resizes)
    _allocation_manager: allocation.AllocationManager | None = None
    # the pod cgroup tree and the system OOM watcher (None: pods stay in the runtime's default cgroup)
    _container_manager: ContainerManager | None = None
    _oom_watcher: OOMWatcher | None = None
    _sysctls: SysctlAllowlist
    # where pod events go (API mode: the event recorder) and events about the Node (API mode: the API server)
    _event_sink: EventSink | None = None
    _node_event_sink: NodeEventSink | None = None
    # housekeeping's pods to keep -> the event sink forgets the others (API mode: the recorder's caches)
    _forget_pod_events: Callable[[Collection[str]], None] | None = None
    # Admission (kubelet_trio.lifecycle.predicate): None admits everything; else (pod, other active pods) -> a
    # rejection with .reason and .message, or None. Rejected pods are Failed for good, never started.
    # Standalone: refuse runtimeClassName (no API to resolve it); API mode: the predicates.
    _admit: AdmitFunc | None = admit_standalone
    # No Node to fit against (standalone): admission counts the pods against config.max_pods itself
    _count_pods: bool = True
    _api_client: Any = None  # API mode's client: the Kubelet API's webhooks (tests may pass one alone)
    # ConfigMaps and Secrets for env and volumes (none standalone)
    _object_store: ObjectStore = NO_OBJECTS
    # Go "register secrets and configmaps": awaited at the start of every pod sync so the store holds the
    # objects the pod references (API mode: ApiObjectStore.ensure_pod).
    _object_prefetch: Callable[[Pod], Awaitable[None]] | None = None
    _allocatable: NodeAllocatable | None = None  # the downward API's defaults for unset limits
    # The HTTP servers (kubelet_trio.server.serve.serve_kubelet_http), started once the node runs; given
    # by the composition root so that this package does not depend on the server package.
    _serve_http: ServeHttp | None = None
    # what the Kubelet keeps while it runs
    rejected: set[str] = attrs.field(init=False, factory=set)
    # Pods whose data directories this kubelet has made (Go makes them on every sync; here each is a
    # thread hop, so once per pod while it is desired or known)
    _data_dirs_made: set[str] = attrs.field(init=False, factory=set)
    # Pods whose dead containers are being removed -> asked again meanwhile (one removal per pod at a time)
    _dead_container_removals: dict[str, bool] = attrs.field(init=False, factory=dict)
    http_urls: dict[str, str] = attrs.field(
        init=False, factory=dict
    )  # "healthz"/"readonly"/"api" -> URL, once serving
    ready: trio_util.AsyncBool = attrs.field(init=False, factory=lambda: trio_util.AsyncBool(False))
    runtime_error: str | None = attrs.field(init=False, default=None)
    sync_loop_last_iteration: float = attrs.field(init=False, default=-math.inf)
    _sources_seen: set[str] = attrs.field(init=False, factory=set)
    _nursery: trio.Nursery | None = attrs.field(init=False, default=None)

    @property
    def api_client(self) -> Any:
        """API mode's client (None standalone): the Kubelet API's TokenReview and SubjectAccessReview."""
        return self._api_client

    @property
    def allocatable(self) -> NodeAllocatable | None:
        """The node's allocatable resources: the downward API's defaults for unset limits."""
        return self._allocatable

    @property
    def event_sink(self) -> EventSink | None:
        """Where pod events go (API mode: the event recorder)."""
        return self._event_sink

    # -- the tree ----------------------------------------------------------------------------------

    async def run(
        self,
        *,
        components: Sequence[Component] = (),
        task_status: trio.TaskStatus[Kubelet] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run the node until cancelled; reports started once every component is up. ``components`` (API
        mode's) start after the node's own managers and before the pod sources."""
        await self.run_sync(setup_data_dirs, self.config.root_dir)  # Go: setupDataDirs, 0750
        send, receive = trio.open_memory_channel[LoopEvent](MERGED_CHANNEL_SIZE)
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self._runtime_status_loop)
            if self._container_manager is not None:  # kubepods and the QoS tiers before any pod syncs
                await nursery.start(self._container_manager.run)
            if self._oom_watcher is not None:
                await nursery.start(self._oom_watcher.run)
            nursery.start_soon(self._container_gc_loop)
            await nursery.start(self._container_log_manager.run)
            await nursery.start(self._pleg.run)
            await nursery.start(self._pod_workers.run)
            await nursery.start(self._probe_manager.run)
            await nursery.start(self._eviction_manager.run)
            await nursery.start(self._image_gc_manager.run)
            if self._device_manager is not None:
                await nursery.start(self._device_manager.run)
            if self._allocation_manager is not None:
                await nursery.start(self._allocation_manager.run)
            if self._shutdown_manager.enabled:
                await nursery.start(self._shutdown_manager.run)
                trigger = ShutdownSocket(socket_path(self.config.root_dir), self._shutdown_manager)
                await nursery.start(trigger.run)
            for component in components:
                await nursery.start(component.run)
            await nursery.start(self._pod_config.run)
            for source in self._pod_sources:
                await nursery.start(source.run)
            async with send:
                nursery.start_soon(self._forward, self._pod_config.updates, EventKind.CONFIG, send.clone())
                nursery.start_soon(self._forward, self._pleg.events, EventKind.PLEG, send.clone())
                nursery.start_soon(self._forward, self._probe_manager.updates, EventKind.PROBE, send.clone())
                nursery.start_soon(self._ticker, self.config.sync_tick, EventKind.SYNC_TICK, send.clone())
                if math.isfinite(self.config.housekeeping_period):  # inf: no housekeeping (run-once)
                    nursery.start_soon(
                        self._ticker, self.config.housekeeping_period, EventKind.HOUSEKEEPING, send.clone()
                    )
            nursery.start_soon(self._sync_loop, receive)
            await nursery.start(self.metrics.watch_pod_starts, self._status_manager, self.clock.now)
            if self._serve_http is not None:
                self.http_urls = await nursery.start(self._serve_http, self)
            self.ready.value = True
            logger.info("kubelet started", extra=kv(node=self.config.node_name))
            task_status.started(self)

    @staticmethod
    async def _forward(
        source: trio.MemoryReceiveChannel[Any], kind: EventKind, sink: trio.MemorySendChannel[LoopEvent]
    ) -> None:
        """Tag events of one producer into the merged channel (blocks when the sync loop is behind)."""
        async with sink:
            async for item in source:
                await sink.send(LoopEvent(kind, item))

    @staticmethod
    async def _ticker(period: float, kind: EventKind, sink: trio.MemorySendChannel[LoopEvent]) -> None:
        """Periodic ticks; a tick that finds the channel full is dropped (ticks coalesce)."""
        async with sink, contextlib.aclosing(trio_util.periodic(period)) as ticks:
            async for _ in ticks:
                with contextlib.suppress(trio.WouldBlock):
                    sink.send_nowait(LoopEvent(kind))

    async def _runtime_status_loop(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """updateRuntimeUp: ask the runtime for its status every 5 s; errors make the sync loop wait."""
        started = False
        async with contextlib.aclosing(trio_util.periodic(RUNTIME_STATUS_PERIOD)) as ticks:
            async for _ in ticks:
                try:
                    with trio.fail_after(RUNTIME_STATUS_PERIOD):
                        status = await self.runtime.status()
                    conditions = {c.type: c for c in (status.status.conditions if status.status else [])}
                    runtime_ready = conditions.get("RuntimeReady")
                    if runtime_ready is None or not runtime_ready.status:
                        reason = runtime_ready.reason if runtime_ready else "no RuntimeReady condition"
                        self._set_runtime_error(f"container runtime is not ready: {reason}")
                    else:
                        self._set_runtime_error(None)
                except Exception as exc:
                    self._set_runtime_error(f"container runtime is down: {error_text(exc)}")
                if not started:
                    started = True
                    task_status.started()

    def _set_runtime_error(self, error: str | None) -> None:
        if error != self.runtime_error:
            if error:
                logger.error("runtime health", extra=kv(error=error))
            else:
                logger.info("container runtime is healthy")
        self.runtime_error = error

    def record_node_event(self, type_: str, reason: str, message: str) -> None:
        record_node_event(self._node_event_sink, type_, reason, message)

    def record_event(self, pod: Pod, type_: str, reason: str, message: str) -> None:
        record_pod_event(self._event_sink, pod, type_, reason, message)

    def extended_resources(self) -> tuple[dict[str, str], dict[str, str]]:
        """The device plugins' (capacity, allocatable) for the Node's status."""
        return self._device_manager.capacity() if self._device_manager is not None else ({}, {})

    async def extended_resources_changed(self) -> None:
        if self._device_manager is None:
            await trio.sleep_forever()
            return
        generation = self._device_manager.generation
        seen = generation.value
        await generation.wait_value(lambda value: value != seen)

    def node_pressure(self) -> frozenset[str]:
        """The pressure conditions the eviction manager reports (MemoryPressure, DiskPressure, ...)."""
        conditions: frozenset[str] = self._eviction_manager.conditions.value
        return conditions

    async def delete_all_unused_containers(self) -> None:
        """Go ``DeleteAllUnusedContainers`` (eviction's node-level reclaim): the container GC under the
        node's policy, also evicting the dead containers of pods that are not deleted."""
        await self._kube_runtime.garbage_collect(
            self._gc_policy(),
            self._pod_workers,
            all_sources_ready=self.sources_ready,
            evict_non_deleted_pods=True,
        )

    def health_errors(self) -> list[str]:
        """What makes this node unhealthy: the runtime and the PLEG."""
        errors = [self.runtime_error] if self.runtime_error else []
        healthy, message = self._pleg.healthy()
        if not healthy:
            errors.append(f"PLEG is not healthy: {message}")
        if (shutting_down := self._shutdown_manager.shutdown_status()) is not None:
            errors.append(shutting_down)
        return errors

    # -- the sync loop -------------------------------------------------------------------------------

    @property
    def sources_ready(self) -> bool:
        """Every configured source delivered a SET and the sync loop handled an update from it."""
        return self._pod_config.sources_ready.value and all(
            source in self._sources_seen for source in self._pod_config.sources
        )

    async def _sync_loop(self, events: trio.MemoryReceiveChannel[LoopEvent]) -> None:
        backoff = 0.1
        async with events:
            async for event in events:
                if self.runtime_error:
                    # Go: skip iterations with backoff while the runtime reports errors.
                    await trio.sleep(backoff)
                    backoff = min(backoff * 2, 5.0)
                    if event.kind in (EventKind.SYNC_TICK, EventKind.HOUSEKEEPING):
                        continue
                else:
                    backoff = 0.1
                self.sync_loop_last_iteration = trio.current_time()
                try:
                    await self._iteration(event)
                except Exception:
                    logger.exception("sync loop iteration failed", extra=kv(kind=event.kind.value))
                self.sync_loop_last_iteration = trio.current_time()

    async def _iteration(self, event: LoopEvent) -> None:
        if event.kind is EventKind.CONFIG:
            self._handle_config(event.payload)
        elif event.kind is EventKind.PLEG:
            self._handle_pleg(event.payload)
        elif event.kind is EventKind.PROBE:
            self._handle_probe(event.payload)
        elif event.kind is EventKind.SYNC_TICK:
            self._handle_sync_tick()
        elif event.kind is EventKind.HOUSEKEEPING and self.sources_ready:
            await self.handle_pod_cleanups()

    def _handle_config(self, update: PodUpdate) -> None:
        if update.op is PodOperation.ADD:
            self.handle_pod_additions(update.pods)
        elif update.op in (PodOperation.UPDATE, PodOperation.DELETE):
            self.handle_pod_updates(update.pods)
        elif update.op is PodOperation.REMOVE:
            self.handle_pod_removes(update.pods)
        elif update.op is PodOperation.RECONCILE:
            self.handle_pod_reconcile(update.pods)
        else:
            logger.error("kubelet does not support snapshot update", extra=kv(op=update.op))
        self._sources_seen.add(update.source)

    def handle_pod_additions(self, pods: Iterable[Pod]) -> None:
        # the active pods are listed once per batch and then follow its admissions: listing them again
        # for each pod made adding n pods cost n^2 (a second for 1000)
        active: list[Pod] | None = None

        def active_pods() -> list[Pod]:
            nonlocal active
            if active is None:
                active = self.active_pods()
            return active

        am = self._allocation_manager
        # the admissions' allocations are checkpointed once, before any of these pods' workers runs
        with am.state.batch() if am is not None else contextlib.nullcontext():
            for pod in sorted(pods, key=_creation_time):
                self._pod_manager.add_or_update(pod)
                logger.info("pod added", extra=kv(pod=kobj(pod), uid=pod.uid))
                known = self._pod_workers.is_known(pod.uid)  # then already among the active pods, if active
                if self._reject_if_not_admitted(pod, active_pods):
                    continue
                self._pod_workers.update_pod(UpdatePodOptions(UpdateType.CREATE, pod=pod))
                if active is not None and not known and self._is_admitted_active(pod):
                    active.append(pod)

    def _reject_if_not_admitted(self, pod: Pod, active_pods: Callable[[], list[Pod]]) -> bool:
        """Go ``canAdmitPod`` + ``rejectPod``: against the active pods, in creation order."""
        if pod.uid in self.rejected:
            return True
        if pod.is_terminal or self._pod_workers.is_known(pod.uid):
            return False
        am = self._allocation_manager
        if am is not None:  # Go AddPod: admitted with its allocated resources, against the others'
            pod = am.update_pod_from_allocation(pod)[0]
            active_pods = allocation.allocated_pods_view(am, active_pods)
        # Go's admit handlers in order: eviction, sysctls, then the predicates (the pod count first)
        rejection = (
            self._eviction_manager.admit(pod) or self._sysctls.admit(pod) or self._shutdown_manager.admit(pod)
        )
        if rejection is None and self._device_manager is not None:  # Go: the resource allocator's handler
            rejection = self._device_manager.admit(pod, active_pods(), sources_ready=self.sources_ready)
        if rejection is None and self._count_pods and self.config.max_pods is not None:
            rejection = admit_pod_count(self.config.max_pods, active_pods())
        if rejection is None and self._admit is not None:
            rejection = self._admit(pod, active_pods())  # not known yet, so not among them
        if rejection is None:
            if am is not None:
                allocation.on_pod_admitted(am, pod)
            return False
        self.rejected.add(pod.uid)
        message = f"Pod was rejected: {rejection.message}"
        logger.warning(
            "pod rejected",
            extra=kv(pod=kobj(pod), uid=pod.uid, reason=rejection.reason, message=rejection.message),
        )
        status = ApiPodStatus(
            phase="Failed", reason=rejection.reason, message=message, qos_class=pod_qos(pod)
        )
        self._status_manager.set_pod_status(pod, status)
        self.record_event(pod, "Warning", rejection.reason, rejection.message)  # Go: the bare message
        return True

    def handle_pod_updates(self, pods: Iterable[Pod]) -> None:
        for pod in pods:
            old = self._pod_manager.get(pod.uid)
            self._pod_manager.add_or_update(pod)
            if self._allocation_manager is not None:
                allocation.on_pod_updated(self._allocation_manager, old, pod)
            if pod.uid in self.rejected and not (pod.metadata and pod.metadata.deletion_timestamp):
                continue  # never started; a deletion still goes to the workers, which finish it at once
            self._pod_workers.update_pod(UpdatePodOptions(UpdateType.UPDATE, pod=pod))

    def handle_pod_reconcile(self, pods: Iterable[Pod]) -> None:
        """Go ``HandlePodReconcile``: a status written by someone else (a readiness gate's condition) syncs
        the pod when it changes what the kubelet would report as Ready."""
        for pod in pods:
            old = self._pod_manager.get(pod.uid)
            self._pod_manager.add_or_update(pod)
            if self._allocation_manager is not None:
                allocation.on_pod_reconciled(self._allocation_manager, old, pod)
            if pod.uid not in self.rejected and need_to_reconcile_pod_readiness(pod):
                self._pod_workers.update_pod(UpdatePodOptions(UpdateType.SYNC, pod=pod))

    def handle_pod_removes(self, pods: Iterable[Pod]) -> None:
        for pod in pods:
            self._pod_manager.remove(pod)
            logger.info("pod removed", extra=kv(pod=kobj(pod), uid=pod.uid))
            self.rejected.discard(pod.uid)
            if not self.sources_ready:
                continue  # housekeeping deletes it once every source has spoken
            self._pod_workers.update_pod(UpdatePodOptions(UpdateType.KILL, pod=pod))
        if self._allocation_manager is not None:
            allocation.on_pods_removed(self._allocation_manager, pods)

    def _handle_pleg(self, event: PodLifecycleEvent) -> None:
        if event.type is PodLifecycleEventType.CONTAINER_REMOVED:
            return
        pod = self._pod_manager.get(event.uid)
        if pod is not None:
            self._pod_workers.update_pod(UpdatePodOptions(UpdateType.SYNC, pod=pod))
        if event.type is PodLifecycleEventType.CONTAINER_DIED:
            self._start_dead_container_removal(event.uid)

    def _handle_probe(self, update: ProbeUpdate) -> None:
        """Go: a liveness failure syncs the pod (which restarts the container); a readiness or startup
        change updates the pod's status at once and syncs it."""
        if update.kind is ProbeKind.LIVENESS and update.result is not ProbeResult.FAILURE:
            return
        pod = self._pod_manager.get(update.pod_uid)
        if pod is None:
            return
        logger.log(
            vlevel(1),  # Go's "SyncLoop (probe)" is V(1)
            "probe result changed",
            extra=kv(
                pod=kobj(pod),
                uid=pod.uid,
                container_id=update.container_id,
                probe=update.kind.value,
                result=update.result.value,
            ),
        )
        runtime_status = self._cache.get(pod.uid)
        if (
            update.kind is not ProbeKind.LIVENESS
            and self._status_manager.get(pod.uid) is not None
            and not self._pod_workers.is_terminated(pod.uid)
            # Go's SetContainerReadiness ignores a container its cached status does not show yet (one the
            # prober was told of as it started): the inspection after the start reports it.
            and any(c.id == update.container_id for c in runtime_status.container_statuses)
        ):
            self._status_manager.set_pod_status(pod, self.generate_status(pod, runtime_status))
        self._pod_workers.update_pod(UpdatePodOptions(UpdateType.SYNC, pod=pod))

    def _handle_sync_tick(self) -> None:
        due = set(self._pod_workers.due())
        now = self.clock.now()
        for pod in self._pod_manager.pods():
            if pod.spec is None or pod.spec.active_deadline_seconds is None:
                continue  # Go's activeDeadlineHandler.ShouldSync: no deadline, nothing to look up
            status = self._status_manager.get(pod.uid)
            if status is not None and active_deadline_exceeded(pod, status, now):
                due.add(pod.uid)
        for uid in due:
            desired = self._pod_manager.get(uid)
            if desired is not None:
                self._pod_workers.update_pod(UpdatePodOptions(UpdateType.SYNC, pod=desired))
            else:
                self._pod_workers.wake_due(uid)

    async def _container_gc_loop(self) -> None:
        """Container GC (Go: every minute) under the policy (kubelet_trio.kuberuntime.gc); pods no longer
        desired lose their containers, sandboxes and log directories only once every source has spoken,
        so a slow source never gets its pods collected."""
        policy = self._gc_policy()
        async with contextlib.aclosing(trio_util.periodic(self.config.container_gc_period)) as ticks:
            async for _ in ticks:
                try:
                    await self._kube_runtime.garbage_collect(
                        policy, self._pod_workers, all_sources_ready=self.sources_ready
                    )
                except Exception as exc:
                    logger.warning("container garbage collection failed", extra=kv(error=exc))

    def _gc_policy(self) -> GCPolicy:
        return GCPolicy(
            self.config.minimum_container_ttl_duration,
            self.config.maximum_dead_containers_per_container,
            self.config.maximum_dead_containers,
        )
