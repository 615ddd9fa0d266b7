"""The ``Kubelet``: the nursery tree that turns desired pods into running containers and watches them.

Go: ``pkg/kubelet/kubelet.go``. ``Kubelet.run`` owns every task: the PLEG relister, the pod config sources,
the pod workers, the tickers and the sync loop. The sync loop is the one consumer of a merged event channel
(config updates, PLEG events, the 1 s sync tick, the 2 s housekeeping tick) and dispatches to the pod
workers; it never blocks on a pod. Cancelling ``run`` stops the node and leaves pods running, as the Go
kubelet does.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import math
import socket
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import attrs
import trio
import trio_util

from kubelet_trio.api import Pod
from kubelet_trio.api.status import PodStatus as ApiPodStatus
from kubelet_trio.clock import WallClock
from kubelet_trio.config.podconfig import PodConfig
from kubelet_trio.config.types import PodOperation, PodUpdate
from kubelet_trio.container.cache import PodCache
from kubelet_trio.container.types import ContainerState, PodStatus, RuntimeContainer, RuntimePod
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.kuberuntime.manager import KubeRuntimeManager
from kubelet_trio.pleg.events import PodLifecycleEvent, PodLifecycleEventType
from kubelet_trio.pleg.generic import GenericPLEG
from kubelet_trio.pod_workers import PodWorkers, SyncError, UpdatePodOptions, UpdateType, is_terminal_phase
from kubelet_trio.status.generate import active_deadline_exceeded, generate_api_pod_status
from kubelet_trio.status.manager import StatusManager

logger = logging.getLogger(__name__)

SYNC_TICK = 1.0
HOUSEKEEPING_PERIOD = 2.0
RUNTIME_STATUS_PERIOD = 5.0
MERGED_CHANNEL_SIZE = 100
ORPHAN_GRACE_PERIOD = 1
KILL_DEADLINE_MARGIN = 10.0  # beyond the grace period, for the runtime to deliver SIGKILL and answer


class PodSource(Protocol):
    """A pod config source component (file, http, api): it sends SETs into the PodConfig."""

    async def run(self, *, task_status: trio.TaskStatus[None] = ...) -> None: ...


@attrs.frozen
class KubeletConfig:
    node_name: str
    pod_logs_dir: str = "/var/log/pods"
    root_dir: str = "/var/lib/kubelet"
    node_ips: tuple[str, ...] = ()
    sync_frequency: float = 60.0
    sync_tick: float = SYNC_TICK
    housekeeping_period: float = HOUSEKEEPING_PERIOD
    pleg_relist_period: float = 1.0
    pleg_relist_threshold: float = 180.0
    jitter: float = 0.5


class EventKind(enum.Enum):
    CONFIG = "config"
    PLEG = "pleg"
    SYNC_TICK = "sync-tick"
    HOUSEKEEPING = "housekeeping"


@attrs.frozen
class LoopEvent:
    kind: EventKind
    payload: Any = None


def default_node_ips() -> tuple[str, ...]:
    try:
        ip = socket.gethostbyname(socket.gethostname())
    except OSError:
        ip = "127.0.0.1"
    return (ip,)


def runtime_pod_from_status(status: PodStatus) -> RuntimePod:
    return RuntimePod(
        uid=status.uid,
        name=status.name,
        namespace=status.namespace,
        containers=tuple(
            RuntimeContainer(id=c.id, name=c.name, state=c.state, created_at=c.created_at, hash=c.hash)
            for c in status.container_statuses
        ),
        sandboxes=tuple(
            RuntimeContainer(
                id=s.id,
                name="POD",
                state=ContainerState.RUNNING if s.ready else ContainerState.EXITED,
                created_at=s.created_at,
            )
            for s in status.sandbox_statuses
        ),
    )


@attrs.define(eq=False)
class PodManager:
    """The desired pods, by UID (Go: pkg/kubelet/pod.Manager)."""

    _pods: dict[str, Pod] = attrs.Factory(dict)

    def add_or_update(self, pod: Pod) -> None:
        self._pods[pod.uid] = pod

    def remove(self, pod: Pod) -> None:
        self._pods.pop(pod.uid, None)

    def get(self, uid: str) -> Pod | None:
        return self._pods.get(uid)

    def pods(self) -> list[Pod]:
        return list(self._pods.values())

    def by_uid(self) -> dict[str, Pod]:
        return dict(self._pods)


@attrs.define(eq=False)
class Kubelet:
    """One node. Embed it: ``await nursery.start(kubelet.run)``; cancel the nursery to stop."""

    config: KubeletConfig
    runtime: Runtime
    pod_config: PodConfig
    pod_sources: Sequence[PodSource] = ()  # components feeding pod_config (file, http, api)
    clock: WallClock = attrs.Factory(WallClock)
    run_sync: RunSync = run_in_thread  # small file operations (see kubelet_trio.fsio)
    cache: PodCache = attrs.Factory(PodCache)
    pod_manager: PodManager = attrs.Factory(PodManager)
    status_manager: StatusManager = attrs.Factory(StatusManager)
    kube_runtime: KubeRuntimeManager = attrs.field(init=False)
    pleg: GenericPLEG = attrs.field(init=False)
    pod_workers: PodWorkers = attrs.field(init=False)
    ready: trio_util.AsyncBool = attrs.Factory(lambda: trio_util.AsyncBool(False))
    runtime_error: str | None = None
    sync_loop_last_iteration: float = -math.inf
    _sources_seen: set[str] = attrs.Factory(set)
    _nursery: trio.Nursery | None = None

    def __attrs_post_init__(self) -> None:
        self.kube_runtime = KubeRuntimeManager(
            self.runtime,
            node_name=self.config.node_name,
            clock=self.clock,
            pod_logs_dir=self.config.pod_logs_dir,
            run_sync=self.run_sync,
        )
        self.pleg = GenericPLEG(
            self.kube_runtime,
            self.cache,
            relist_period=self.config.pleg_relist_period,
            relist_threshold=self.config.pleg_relist_threshold,
        )
        self.pod_workers = PodWorkers(
            self,
            self.cache,
            resync_interval=self.config.sync_frequency,
            jitter=self.config.jitter,
        )
        if not self.config.node_ips:
            self.config = attrs.evolve(self.config, node_ips=default_node_ips())

    # -- the tree ----------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[Kubelet] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the node until cancelled; reports started once every component is up."""
        send, receive = trio.open_memory_channel[LoopEvent](MERGED_CHANNEL_SIZE)
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self._runtime_status_loop)
            await nursery.start(self.pleg.run)
            await nursery.start(self.pod_workers.run)
            await nursery.start(self.pod_config.run)
            for source in self.pod_sources:
                await nursery.start(source.run)
            async with send:
                nursery.start_soon(self._forward, self.pod_config.updates, EventKind.CONFIG, send.clone())
                nursery.start_soon(self._forward, self.pleg.events, EventKind.PLEG, send.clone())
                nursery.start_soon(self._ticker, self.config.sync_tick, EventKind.SYNC_TICK, send.clone())
                nursery.start_soon(
                    self._ticker, self.config.housekeeping_period, EventKind.HOUSEKEEPING, send.clone()
                )
            nursery.start_soon(self._sync_loop, receive)
            self.ready.value = True
            logger.info("kubelet started node=%s", self.config.node_name)
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
        async with sink:
            async for _ in trio_util.periodic(period):
                with contextlib.suppress(trio.WouldBlock):
                    sink.send_nowait(LoopEvent(kind))

    async def _runtime_status_loop(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """updateRuntimeUp: ask the runtime for its status every 5 s; errors make the sync loop wait."""
        started = False
        async for _ in trio_util.periodic(RUNTIME_STATUS_PERIOD):
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
                self._set_runtime_error(f"container runtime is down: {exc}")
            if not started:
                started = True
                task_status.started()

    def _set_runtime_error(self, error: str | None) -> None:
        if error != self.runtime_error:
            if error:
                logger.error("runtime health error=%s", error)
            else:
                logger.info("container runtime is healthy")
        self.runtime_error = error

    def health_errors(self) -> list[str]:
        """What makes this node unhealthy: the runtime and the PLEG."""
        errors = [self.runtime_error] if self.runtime_error else []
        healthy, message = self.pleg.healthy()
        if not healthy:
            errors.append(f"PLEG is not healthy: {message}")
        return errors

    # -- the sync loop -------------------------------------------------------------------------------

    @property
    def sources_ready(self) -> bool:
        """Every configured source delivered a SET and the sync loop handled an update from it."""
        return self.pod_config.sources_ready.value and all(
            source in self._sources_seen for source in self.pod_config.sources
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
                    logger.exception("sync loop iteration failed kind=%s", event.kind.value)
                self.sync_loop_last_iteration = trio.current_time()

    async def _iteration(self, event: LoopEvent) -> None:
        if event.kind is EventKind.CONFIG:
            self._handle_config(event.payload)
        elif event.kind is EventKind.PLEG:
            self._handle_pleg(event.payload)
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
            for pod in update.pods:
                self.pod_manager.add_or_update(pod)
        else:
            logger.error("kubelet does not support snapshot update op=%s", update.op)
        self._sources_seen.add(update.source)

    def handle_pod_additions(self, pods: Iterable[Pod]) -> None:
        for pod in sorted(pods, key=lambda p: (p.metadata.creation_timestamp or "") if p.metadata else ""):
            self.pod_manager.add_or_update(pod)
            logger.info("pod added pod=%s/%s uid=%s", pod.namespace, pod.name, pod.uid)
            self.pod_workers.update_pod(UpdatePodOptions(UpdateType.CREATE, pod=pod))

    def handle_pod_updates(self, pods: Iterable[Pod]) -> None:
        for pod in pods:
            self.pod_manager.add_or_update(pod)
            self.pod_workers.update_pod(UpdatePodOptions(UpdateType.UPDATE, pod=pod))

    def handle_pod_removes(self, pods: Iterable[Pod]) -> None:
        for pod in pods:
            self.pod_manager.remove(pod)
            logger.info("pod removed pod=%s/%s uid=%s", pod.namespace, pod.name, pod.uid)
            if not self.sources_ready:
                continue  # housekeeping deletes it once every source has spoken
            self.pod_workers.update_pod(UpdatePodOptions(UpdateType.KILL, pod=pod))

    def _handle_pleg(self, event: PodLifecycleEvent) -> None:
        if event.type is PodLifecycleEventType.CONTAINER_REMOVED:
            return
        pod = self.pod_manager.get(event.uid)
        if pod is not None:
            self.pod_workers.update_pod(UpdatePodOptions(UpdateType.SYNC, pod=pod))
        if event.type is PodLifecycleEventType.CONTAINER_DIED and self._nursery is not None:
            self._nursery.start_soon(self._remove_dead_containers, event.uid)

    async def _remove_dead_containers(self, uid: str) -> None:
        """Keep only the newest dead instance of each container (maxPerPodContainer = 1)."""
        try:
            await self.kube_runtime.remove_dead_containers(self.cache.get(uid), keep_per_container=1)
        except Exception as exc:
            logger.warning("removing dead containers failed uid=%s error=%s", uid, exc)

    def _handle_sync_tick(self) -> None:
        due = set(self.pod_workers.due())
        now = self.clock.now()
        for pod in self.pod_manager.pods():
            status = self.status_manager.get(pod.uid)
            if status is not None and active_deadline_exceeded(pod, status, now):
                due.add(pod.uid)
        for uid in due:
            pod = self.pod_manager.get(uid)
            if pod is not None:
                self.pod_workers.update_pod(UpdatePodOptions(UpdateType.SYNC, pod=pod))
            else:
                self.pod_workers.wake_due(uid)

    async def handle_pod_cleanups(self) -> None:
        """Housekeeping (Go HandlePodCleanups): kill orphans, restart forgotten pods, collect garbage."""
        desired = self.pod_manager.by_uid()
        known = self.pod_workers.sync_known_pods(desired)
        try:
            running = await self.kube_runtime.get_pods(all=False)
        except Exception as exc:
            logger.warning("housekeeping could not list runtime pods error=%s", exc)
            return
        for uid, pod in desired.items():
            if uid in known or is_terminal_phase(pod):
                continue
            if pod.metadata and pod.metadata.deletion_timestamp:
                continue
            logger.info(
                "housekeeping starts a pod unknown to the workers pod=%s/%s uid=%s",
                pod.namespace,
                pod.name,
                uid,
            )
            self.pod_workers.update_pod(UpdatePodOptions(UpdateType.CREATE, pod=pod))
        for runtime_pod in running:
            if runtime_pod.uid in known or runtime_pod.uid in desired:
                continue
            logger.info(
                "housekeeping kills an orphaned pod pod=%s/%s uid=%s",
                runtime_pod.namespace,
                runtime_pod.name,
                runtime_pod.uid,
            )
            self.pod_workers.update_pod(
                UpdatePodOptions(
                    UpdateType.KILL, running_pod=runtime_pod, grace_period_override=ORPHAN_GRACE_PERIOD
                )
            )
        try:
            keep = {uid for uid in desired} | {
                uid for uid in known if self.pod_workers.could_have_running_containers(uid)
            }
            await self.kube_runtime.collect_orphans(keep)
        except Exception as exc:
            logger.warning("garbage collection failed error=%s", exc)
        self.status_manager.remove_orphaned(desired)

    # -- PodSyncer: what a pod worker runs ----------------------------------------------------------

    def generate_status(self, pod: Pod, runtime_status: PodStatus, *, terminal: bool = False) -> ApiPodStatus:
        old = self.status_manager.get(pod.uid) or pod.status
        return generate_api_pod_status(
            pod,
            runtime_status,
            old_status=old,
            clock=self.clock,
            node_ips=self.config.node_ips,
            reasons=self.kube_runtime.reasons(pod.uid),
            pod_is_terminal=terminal,
        )

    async def sync_pod(self, update_type: UpdateType, pod: Pod, status: PodStatus) -> bool:
        api_status = self.generate_status(pod, status)  # applies activeDeadlineSeconds too
        self.status_manager.set_pod_status(pod, api_status)
        if api_status.phase in ("Succeeded", "Failed"):
            return True
        result = await self.kube_runtime.sync_pod(pod, status)
        if not result.ok:
            summary = "; ".join(
                f"{s.action} {s.target}: {s.error} {s.message}".strip() for s in result.failed
            )
            raise SyncError(summary, retry_at=result.earliest_backoff())
        return False

    async def sync_terminating_pod(self, pod: Pod, status: PodStatus, grace_period: int) -> None:
        self.status_manager.set_pod_status(pod, self.generate_status(pod, status))
        logger.info(
            "killing pod pod=%s/%s uid=%s grace_period=%ss", pod.namespace, pod.name, pod.uid, grace_period
        )
        with trio.move_on_after(max(grace_period, 2) + KILL_DEADLINE_MARGIN) as scope:
            result = await self.kube_runtime.kill_pod(pod, runtime_pod_from_status(status), grace_period)
        if scope.cancelled_caught:
            raise SyncError(f"killing the pod did not finish within {grace_period}s + margin")
        if not result.ok:
            raise SyncError("; ".join(f"{s.action} {s.target}: {s.error}" for s in result.failed))
        fresh = await self.kube_runtime.get_pod_status(pod.uid, pod.name, pod.namespace)
        if fresh.running_containers:
            raise SyncError("detected running containers after a successful kill")
        final = self.generate_status(pod, fresh, terminal=True)
        self.status_manager.set_pod_status(pod, final)

    async def sync_terminating_runtime_pod(self, running_pod: RuntimePod) -> None:
        result = await self.kube_runtime.kill_pod(None, running_pod, ORPHAN_GRACE_PERIOD)
        if not result.ok:
            raise SyncError("; ".join(f"{s.action} {s.target}: {s.error}" for s in result.failed))

    async def sync_terminated_pod(self, pod: Pod, status: PodStatus) -> None:
        final = self.generate_status(pod, status, terminal=True)
        self.status_manager.set_pod_status(pod, final)
        self.status_manager.terminate_pod(pod)
