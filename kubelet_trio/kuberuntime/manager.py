"""``KubeRuntimeManager``: the kubelet's runtime manager over a CRI ``Runtime`` (Go:
``kuberuntime_manager.go``), the kubelet-level runtime (Go: ``kubecontainer.Runtime``).

- ``get_pods`` / ``get_pod_status`` read the runtime, seeing only objects labelled with this node.
- ``sync_pod`` runs :func:`~kubelet_trio.kuberuntime.actions.compute_pod_actions` and executes it
  (Go's ``SyncPod``): kill the pod or unwanted containers, prune/purge init containers, (re)create the
  sandbox, start init containers (one at a time; sidecars may fail without aborting) and app containers
  (each failure is recorded, the others still start). Every start passes the crash-loop backoff first.
  Failures come back as :class:`~kubelet_trio.container.runtime.SyncStep` errors whose ``error`` is the
  container's waiting reason and whose ``backoff_until`` says when a retry can succeed.
- ``kill_pod`` stops all containers in parallel, then every sandbox.
- GC: ``garbage_collect`` (the periodic policy), ``remove_dead_containers``, ``collect_orphans``.

Nothing here sets timeouts: the pod worker's cancel scope bounds a sync (a deleted pod cancels its
slow pull) and the kill path's deadline bounds a kill.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import TYPE_CHECKING, Protocol

import attrs
import trio

from kubelet_trio import defaults
from kubelet_trio.allocation.state import ACTUATED_PODS_STATE_FILE, ResourceState
from kubelet_trio.clock import go_duration
from kubelet_trio.cm.cgroup_manager import CgroupError
from kubelet_trio.cm.helpers import ResourceConfig
from kubelet_trio.container.hash import hash_container
from kubelet_trio.container.runtime import PodSyncResult, SyncStep
from kubelet_trio.container.types import (
    ContainerResources,
    ContainerState,
    ContainerStatus,
    PodStatus,
    RuntimeContainer,
    RuntimePod,
    SandboxStatus,
)
from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.kuberuntime.actions import (
    NO_PROBE_RESULTS,
    PodActions,
    ProbeResults,
    compute_pod_actions,
    has_restartable_init_container,
)
from kubelet_trio.kuberuntime.backoff import (
    CONTAINER_BACKOFF_INITIAL,
    CONTAINER_BACKOFF_MAX,
    Backoff,
)
from kubelet_trio.kuberuntime.container import (
    ContainerLifecycle,
    HookRunner,
    RunOptionsProvider,
    StartContainerError,
    TerminationOrdering,
    format_pod,
    plain_run_options,
)
from kubelet_trio.kuberuntime.gc import (
    DEFAULT_MAX_PER_POD_CONTAINER,
    ContainerGC,
    GCPolicy,
    GCResult,
    PodStateProvider,
)
from kubelet_trio.kuberuntime.images import (
    IMAGE_BACKOFF_INITIAL,
    IMAGE_BACKOFF_MAX,
    EventSink,
    ImageManager,
)
from kubelet_trio.kuberuntime.labels import (
    POD_UID_LABEL,
    LabeledContainerInfo,
    node_selector,
    parse_container_annotations,
    parse_container_labels,
)
from kubelet_trio.kuberuntime.logs import make_dirs
from kubelet_trio.kuberuntime.resize import (
    ContainerToUpdate,
    PodCgroupResizer,
    ResizeError,
    linux_resources_for,
    validate_memory_resize,
    values_of,
)
from kubelet_trio.kuberuntime.sandbox import generate_pod_sandbox_config, is_host_network_pod
from kubelet_trio.kuberuntime.termination import termination_message
from kubelet_trio.logs import kobj, kv

if TYPE_CHECKING:
    from kubelet_trio.api import Container, Pod
    from kubelet_trio.clock import WallClock
    from kubelet_trio.credentialprovider import DockerKeyring, PullSecret
    from kubelet_trio.cri.runtime import Runtime

__all__ = [
    "ACTION_CREATE_POD_SANDBOX",
    "ACTION_KILL_CONTAINER",
    "ACTION_KILL_POD_SANDBOX",
    "ACTION_START_CONTAINER",
    "ERR_CRASH_LOOP_BACKOFF",
    "KubeRuntimeManager",
    "RuntimeHandlerError",
    "RuntimeHandlerResolver",
    "running_pod_from_status",
]

logger = logging.getLogger(__name__)

DnsConfigProvider = Callable[["Pod"], Awaitable[pb.DnsConfig]]
"""The sandbox's DNS settings (:meth:`kubelet_trio.network.dns.DnsConfigurer.pod_dns_config`)."""

#: How long a sandbox creation waits for the first listing of RuntimeClasses (an API server that is slow
#: or down at start-up) before it fails, to be retried with the pod worker's backoff.
RUNTIME_CLASS_SYNC_WAIT = 10.0


class RuntimeHandlerError(Exception):
    """The pod's RuntimeClass cannot be resolved to a runtime handler (missing, or not known yet)."""


class RuntimeHandlerResolver(Protocol):
    """RuntimeClass name → CRI runtime handler (Go: ``runtimeclass.Manager``; in API mode
    :class:`kubelet_trio.runtimeclass.RuntimeClassManager`)."""

    async def wait_synced(self) -> None:
        """Return once the RuntimeClasses have been listed."""
        ...

    def lookup_runtime_handler(self, runtime_class_name: str | None) -> str:
        """The handler ("" for no class); :class:`RuntimeHandlerError` when it cannot be told."""
        ...


# SyncAction
ACTION_START_CONTAINER = "StartContainer"
ACTION_KILL_CONTAINER = "KillContainer"
ACTION_CREATE_POD_SANDBOX = "CreatePodSandbox"
ACTION_CONFIG_POD_SANDBOX = "ConfigPodSandbox"
ACTION_KILL_POD_SANDBOX = "KillPodSandbox"
ACTION_RESIZE_POD_IN_PLACE = "ResizePodInPlace"
ERR_RESIZE_POD_IN_PLACE = "ResizePodInPlaceError"
# Sync errors
ERR_CRASH_LOOP_BACKOFF = "CrashLoopBackOff"
ERR_KILL_CONTAINER = "KillContainerError"
ERR_KILL_POD_SANDBOX = "KillPodSandboxError"
ERR_CREATE_POD_SANDBOX = "CreatePodSandboxError"
ERR_CONFIG_POD_SANDBOX = "ConfigPodSandboxError"

_CONTAINER_STATES = {
    pb.ContainerState.CONTAINER_CREATED: ContainerState.CREATED,
    pb.ContainerState.CONTAINER_RUNNING: ContainerState.RUNNING,
    pb.ContainerState.CONTAINER_EXITED: ContainerState.EXITED,
    pb.ContainerState.CONTAINER_UNKNOWN: ContainerState.UNKNOWN,
}


def _container_state(state: pb.ContainerState) -> ContainerState:
    return _CONTAINER_STATES.get(state, ContainerState.UNKNOWN)


def _sandbox_ips(status: pb.PodSandboxStatus) -> tuple[str, ...]:
    """``determinePodSandboxIPs``: the primary IP, then the additional ones."""
    network = status.network
    if network is None:
        return ()
    ips = [network.ip, *(p.ip for p in network.additional_ips)]
    return tuple(ip for ip in ips if ip)


def _to_resources(status: pb.ContainerStatus) -> ContainerResources | None:
    linux = status.resources.linux if status.resources is not None else None
    if linux is None:
        return None
    return ContainerResources(
        cpu_shares=linux.cpu_shares,
        cpu_quota=linux.cpu_quota,
        cpu_period=linux.cpu_period,
        memory_limit=linux.memory_limit_in_bytes,
    )


def _to_sandbox_status(status: pb.PodSandboxStatus) -> SandboxStatus:
    linux = status.linux
    options = linux.namespaces.options if linux is not None and linux.namespaces is not None else None
    network = status.network
    return SandboxStatus(
        id=status.id,
        attempt=status.metadata.attempt if status.metadata is not None else 0,
        ready=status.state is pb.PodSandboxState.SANDBOX_READY,
        created_at=status.created_at,
        ip=network.ip if network is not None else "",
        additional_ips=tuple(p.ip for p in network.additional_ips) if network is not None else (),
        host_network=options is not None and options.network is pb.NamespaceMode.NODE,
    )


def running_pod_from_status(status: PodStatus, runtime_type: str = "containerd") -> RuntimePod:
    """``ConvertPodStatusToRunningPod``: the running containers and every sandbox of a pod."""
    return RuntimePod(
        uid=status.uid,
        name=status.name,
        namespace=status.namespace,
        containers=tuple(
            RuntimeContainer(id=c.id, name=c.name, state=c.state, created_at=c.created_at, hash=c.hash)
            for c in status.container_statuses
            if c.state is ContainerState.RUNNING
        ),
        sandboxes=tuple(
            RuntimeContainer(
                id=s.id,
                name=status.name,
                state=ContainerState.RUNNING if s.ready else ContainerState.EXITED,
                created_at=s.created_at,
            )
            for s in status.sandbox_statuses
        ),
    )


def _ctx(pod: Pod) -> dict[str, object]:
    return {"pod": kobj(pod), "uid": pod.uid}


@attrs.define
class _PodEntry:
    name: str
    namespace: str
    created_at: int = 0
    containers: list[RuntimeContainer] = attrs.Factory(list)
    sandboxes: list[RuntimeContainer] = attrs.Factory(list)


@attrs.define(eq=False)
class KubeRuntimeManager:
    """The kubelet's runtime manager for one node.

    Args:
        runtime: the CRI runtime (``CriRuntime`` or ``SimRuntime``).
        node_name: stamped as ``kubelet-trio.io/node`` on everything created; only such objects are seen.
        clock: maps CRI wall-clock timestamps to Trio time (crash-loop backoff is anchored on a
            container's ``finishedAt``); share the runtime's under a MockClock.
        pod_logs_dir: root of the pod log directories.
        runtime_type: the ``<type>://`` prefix of container ids in the API.
        events: ``(pod, type, reason, message)`` callback for Pulling/Pulled/Created/Started/Killing/
            BackOff/Failed/… events.
        probe_results: live mapping ``(ProbeKind, container id) → ProbeResult`` read by
            ``compute_pod_actions`` (the prober's seam).
        on_container_started: ``(pod uid, container name, container id, pod IP)`` once a container
            has started, so the prober checks it before the status shows it.
        on_container_stopped: ``(pod uid, container id)`` as soon as StopContainer returned, so the
            prober stops exec'ing into a container the status does not show stopped yet.
        hooks: lifecycle hook runner (postStart / preStop); None runs no hooks.
        run_options: what the kubelet adds to containers (env, mounts); the default passes plain envs.
        serialize_image_pulls: one pull at a time, like the Go kubelet's default (``serializeImagePulls``).
        max_parallel_image_pulls: with ``serialize_image_pulls`` false, the most pulls at once (None: no
            limit; ``maxParallelImagePulls``).
        registry_pull_qps, registry_burst: pulls started per second and their burst (``registryPullQPS``,
            ``registryBurst``); a pull over the limit fails with Go's "pull QPS exceeded". 0: no limit.
        dns_config: the sandbox's DNS settings (servers, searches, options) per pod; None leaves them to
            the runtime's defaults.
        runtime_classes: resolves ``spec.runtimeClassName`` to the handler RunPodSandbox is given; None
            (no API server) runs every sandbox with the runtime's default handler.
        keyring: the node's registry credentials (docker config file, credential provider plugins:
            :func:`kubelet_trio.credentialprovider.node_keyring`), tried after the pod's pull secrets.
        pod_cgroups: the pod cgroups an in-place resize resizes (None: none, pods run in the runtime's
            cgroups).
        checkpoint_dir: where ``actuated_pods_state`` (the resources each container was last given,
            :mod:`kubelet_trio.allocation.state`) is kept; None: in memory.
        memory_capacity: the node's memory, for the OOM score of a resized container.
    """

    _runtime: Runtime = attrs.field(alias="runtime")
    node_name: str = attrs.field(kw_only=True)
    clock: WallClock = attrs.field(kw_only=True)
    pod_logs_dir: str = attrs.field(default=defaults.POD_LOGS_DIR, kw_only=True)
    runtime_type: str = attrs.field(default="containerd", kw_only=True)
    events: EventSink | None = attrs.field(default=None, kw_only=True)
    probe_results: ProbeResults = attrs.field(default=NO_PROBE_RESULTS, kw_only=True)
    on_container_started: Callable[[str, str, str, str], None] | None = attrs.field(
        default=None, kw_only=True
    )
    on_container_stopped: Callable[[str, str], None] | None = attrs.field(default=None, kw_only=True)
    hooks: HookRunner | None = attrs.field(default=None, kw_only=True)
    run_options: RunOptionsProvider = attrs.field(default=plain_run_options, kw_only=True)
    serialize_image_pulls: bool = attrs.field(default=defaults.SERIALIZE_IMAGE_PULLS, kw_only=True)
    max_parallel_image_pulls: int | None = attrs.field(default=None, kw_only=True)
    registry_pull_qps: float = attrs.field(default=0.0, kw_only=True)
    registry_burst: int = attrs.field(default=defaults.REGISTRY_BURST, kw_only=True)
    run_sync: RunSync = attrs.field(default=run_in_thread, kw_only=True)
    dns_config: DnsConfigProvider | None = attrs.field(default=None, kw_only=True)
    runtime_classes: RuntimeHandlerResolver | None = attrs.field(default=None, kw_only=True)
    keyring: DockerKeyring | None = attrs.field(default=None, kw_only=True)
    # the pod cgroup each sandbox runs under (the container manager's; None: the runtime's default)
    pod_cgroup_parent: Callable[[Pod], str] | None = attrs.field(default=None, kw_only=True)
    # in-place resize: the pod cgroups to resize (None: none), where actuated_pods_state is kept (None:
    # in memory), the node's memory capacity for the OOM score
    pod_cgroups: PodCgroupResizer | None = attrs.field(default=None, kw_only=True)
    checkpoint_dir: str | None = attrs.field(default=None, kw_only=True)
    memory_capacity: int = attrs.field(default=0, kw_only=True)
    actuated: ResourceState = attrs.field(init=False)

    crash_backoff: Backoff = attrs.field(
        init=False, factory=lambda: Backoff(CONTAINER_BACKOFF_INITIAL, CONTAINER_BACKOFF_MAX)
    )
    images: ImageManager = attrs.field(init=False)
    lifecycle: ContainerLifecycle = attrs.field(init=False)
    gc: ContainerGC = attrs.field(init=False)
    _reasons: dict[str, dict[str, tuple[str, str]]] = attrs.field(init=False, factory=dict)

    def __attrs_post_init__(self) -> None:
        self.actuated = ResourceState(self.checkpoint_dir, ACTUATED_PODS_STATE_FILE)
        self.images = ImageManager(
            self._runtime,
            Backoff(IMAGE_BACKOFF_INITIAL, IMAGE_BACKOFF_MAX),
            events=self.events,
            serialize_pulls=self.serialize_image_pulls,
            max_parallel_pulls=self.max_parallel_image_pulls,
            pull_qps=self.registry_pull_qps,
            pull_burst=self.registry_burst,
            keyring=self.keyring,
        )
        self.lifecycle = ContainerLifecycle(
            runtime=self._runtime,
            images=self.images,
            node_name=self.node_name,
            pod_logs_dir=self.pod_logs_dir,
            events=self.events,
            hooks=self.hooks,
            run_options=self.run_options,
            run_sync=self.run_sync,
            on_started=self.on_container_started,
            on_stopped=self.on_container_stopped,
        )
        self.gc = ContainerGC(runtime=self._runtime, lifecycle=self.lifecycle, pod_logs_dir=self.pod_logs_dir)

    @property
    def runtime(self) -> Runtime:
        return self._runtime

    def _event(self, pod: Pod | None, type_: str, reason: str, message: str) -> None:
        if self.events is not None and pod is not None:
            self.events(pod, type_, reason, message)

    # --- reading the runtime --------------------------------------------------------------------

    async def get_pods(self, all: bool = True) -> list[RuntimePod]:
        """This node's pods from ListPodSandbox + ListContainers, grouped by pod UID, newest first.

        ``all=False`` lists only ready sandboxes and running containers.
        """
        sandbox_filter = pb.PodSandboxFilter(label_selector=node_selector(self.node_name))
        container_filter = pb.ContainerFilter(label_selector=node_selector(self.node_name))
        if not all:
            sandbox_filter.state = pb.PodSandboxStateValue(state=pb.PodSandboxState.SANDBOX_READY)
            container_filter.state = pb.ContainerStateValue(state=pb.ContainerState.CONTAINER_RUNNING)
        pods: dict[str, _PodEntry] = {}
        for sandbox in await self._runtime.list_pod_sandbox(sandbox_filter):
            md = sandbox.metadata
            if md is None:
                continue
            entry = pods.setdefault(md.uid, _PodEntry(md.name, md.namespace))
            entry.sandboxes.append(
                RuntimeContainer(
                    id=sandbox.id,
                    name=md.name,
                    state=ContainerState.RUNNING
                    if sandbox.state is pb.PodSandboxState.SANDBOX_READY
                    else ContainerState.EXITED,
                    created_at=sandbox.created_at,
                )
            )
            entry.created_at = max(entry.created_at, sandbox.created_at)
        for container in await self._runtime.list_containers(container_filter):
            labels = parse_container_labels(container.labels)
            if not labels.pod_uid:
                continue
            entry = pods.setdefault(labels.pod_uid, _PodEntry(labels.pod_name, labels.pod_namespace))
            entry.containers.append(
                RuntimeContainer(
                    id=container.id,
                    name=labels.container_name
                    or (container.metadata.name if container.metadata is not None else ""),
                    state=_container_state(container.state),
                    created_at=container.created_at,
                    hash=parse_container_annotations(container.annotations).hash,
                )
            )
        result = [
            RuntimePod(
                uid=uid,
                name=e.name,
                namespace=e.namespace,
                containers=tuple(e.containers),
                sandboxes=tuple(e.sandboxes),
            )
            for uid, e in sorted(pods.items(), key=lambda item: item[1].created_at, reverse=True)
        ]
        return result

    def _to_container_status(self, status: pb.ContainerStatus) -> ContainerStatus:
        labels = parse_container_labels(status.labels)
        annotations = parse_container_annotations(status.annotations)
        state = _container_state(status.state)
        exited = state is ContainerState.EXITED
        return ContainerStatus(
            id=status.id,
            name=labels.container_name or (status.metadata.name if status.metadata is not None else ""),
            state=state,
            created_at=status.created_at,
            started_at=status.started_at if state is not ContainerState.CREATED else 0,
            finished_at=status.finished_at if exited else 0,
            exit_code=status.exit_code if exited else 0,
            image=status.image.image if status.image is not None else "",
            image_ref=status.image_ref,
            hash=annotations.hash,
            restart_count=annotations.restart_count,
            reason=status.reason if exited else "",
            message=status.message if exited else "",
            runtime_type=self.runtime_type,
            resources=self._with_actuated_memory_request(_to_resources(status), labels),
        )

    def _with_actuated_memory_request(
        self, resources: ContainerResources | None, labels: LabeledContainerInfo
    ) -> ContainerResources | None:
        """Go ``toKubeContainerStatus``: the memory request is the actuated one (a cgroup holds none)."""
        if resources is None:
            return None
        actuated = self.actuated.get_container(labels.pod_uid, labels.container_name)
        request = (actuated.requests or {}).get("memory") if actuated is not None else None
        if request is None or request.is_zero():
            return resources
        return attrs.evolve(resources, memory_request=request.int_value())

    async def get_pod_status(self, uid: str, name: str, namespace: str) -> PodStatus:
        """Sandboxes (newest first, with PodSandboxStatus) and containers (newest first, with
        ContainerStatus) of one pod; ``ips`` come from the newest sandbox when it is ready. Objects
        that vanish between list and status are skipped."""
        timestamp = trio.current_time()
        selector = node_selector(self.node_name, **{POD_UID_LABEL: uid})
        sandboxes = await self._runtime.list_pod_sandbox(pb.PodSandboxFilter(label_selector=selector))
        sandboxes.sort(
            key=lambda s: (s.created_at, s.metadata.attempt if s.metadata is not None else 0), reverse=True
        )
        sandbox_statuses: list[SandboxStatus] = []
        ips: tuple[str, ...] = ()
        for index, sandbox in enumerate(sandboxes):
            try:
                response = await self._runtime.pod_sandbox_status(sandbox.id)
            except cri_errors.NotFoundError:
                continue
            if response.status is None:
                raise cri_errors.CriCallError("PodSandboxStatus", f"sandbox {sandbox.id}: status is nil")
            converted = _to_sandbox_status(response.status)
            if index == 0 and converted.ready:
                ips = _sandbox_ips(response.status)
            sandbox_statuses.append(converted)

        container_statuses: list[ContainerStatus] = []
        for container in await self._runtime.list_containers(pb.ContainerFilter(label_selector=selector)):
            try:
                container_response = await self._runtime.container_status(container.id)
            except cri_errors.NotFoundError:
                continue
            cri_status = container_response.status
            if cri_status is None:
                raise cri_errors.CriCallError("ContainerStatus", f"container {container.id}: status is nil")
            status = self._to_container_status(cri_status)
            if status.state is ContainerState.EXITED:
                annotations = parse_container_annotations(cri_status.annotations)
                message = await self.run_sync(
                    termination_message,
                    cri_status,
                    annotations.termination_message_path,
                    annotations.termination_message_policy,
                )
                status = attrs.evolve(status, message=message)
            container_statuses.append(status)
        # Newest first; instances created in the same instant (possible under a MockClock) are ordered
        # by their restart count.
        container_statuses.sort(key=lambda c: (c.created_at, c.restart_count), reverse=True)
        return PodStatus(
            uid=uid,
            name=name,
            namespace=namespace,
            ips=ips,
            container_statuses=tuple(container_statuses),
            sandbox_statuses=tuple(sandbox_statuses),
            timestamp=timestamp,
        )

    # --- sync -----------------------------------------------------------------------------------

    def compute_pod_actions(self, pod: Pod, status: PodStatus) -> PodActions:
        return compute_pod_actions(
            pod, status, self.probe_results, lambda name: self.actuated.get_container(pod.uid, name)
        )

    def is_pod_resize_in_progress(self, allocated_pod: Pod, status: PodStatus) -> bool:
        """Go ``IsPodResizeInProgress``: a running resizable container whose actuated CPU or memory
        differs from its allocation."""
        spec = allocated_pod.spec
        containers = [
            *(c for c in (spec.init_containers if spec else None) or () if c.is_sidecar),
            *((spec.containers if spec else None) or ()),
        ]
        for container in containers:
            current = status.find(container.name or "")
            if current is None or current.state is not ContainerState.RUNNING:
                continue
            actuated = self.actuated.get_container(allocated_pod.uid, container.name or "")
            if values_of(container.resources) != values_of(actuated):
                return True
        return False

    def remove_orphaned_actuated(self, keep: Collection[str]) -> None:
        """Forget the actuated resources of pods no longer known."""
        self.actuated.remove_orphaned_pods(keep)

    def remove_orphaned_reasons(self, keep: Collection[str]) -> None:
        """Forget the failed-start reasons of pods no longer known (Go bounds its reasonCache with an LRU;
        a pod that is gone never asks again)."""
        for uid in [uid for uid in self._reasons if uid not in keep]:
            del self._reasons[uid]

    def reasons(self, uid: str) -> dict[str, tuple[str, str]]:
        """Go's ``reasonCache``: container name → (reason, message) of its last failed start, cleared
        by a successful start."""
        return dict(self._reasons.get(uid, {}))

    def _update_reasons(self, uid: str, steps: list[SyncStep]) -> None:
        for step in steps:
            if step.action != ACTION_START_CONTAINER:
                continue
            if step.error:
                self._reasons.setdefault(uid, {})[step.target] = (step.error, step.message)
            elif uid in self._reasons:
                self._reasons[uid].pop(step.target, None)
        if uid in self._reasons and not self._reasons[uid]:
            del self._reasons[uid]

    async def sync_pod(
        self, pod: Pod, status: PodStatus, pull_secrets: Sequence[PullSecret] = ()
    ) -> PodSyncResult:
        """Compute and execute the pod's actions (``SyncPod``); ``pull_secrets`` are the Secrets of the
        pod's ``spec.imagePullSecrets`` the caller could fetch, in the pod's order."""
        steps: list[SyncStep] = []
        try:
            await self._sync_pod(pod, status, steps, pull_secrets)
        finally:
            self._update_reasons(pod.uid, steps)
        return PodSyncResult(tuple(steps))

    async def _sync_pod(
        self, pod: Pod, status: PodStatus, steps: list[SyncStep], pull_secrets: Sequence[PullSecret]
    ) -> None:
        ctx = _ctx(pod)
        actions = self.compute_pod_actions(pod, status)
        logger.debug("computed pod actions", extra=kv(**ctx, actions=actions))
        if actions.create_sandbox and actions.sandbox_id:
            self._event(
                pod, "Normal", "SandboxChanged", "Pod sandbox changed, it will be killed and re-created."
            )

        # Kill the pod, or the containers that must not run.
        if actions.kill_pod:
            killed = await self.kill_pod(pod, running_pod_from_status(status, self.runtime_type))
            steps.extend(killed.steps)
            if not killed.ok:
                logger.warning("killing pod failed", extra=kv(**ctx, errors=killed.failed))
                return
            if actions.create_sandbox:
                await self._purge_init_containers(pod, status)
        else:
            by_id = {c.id: c for c in status.container_statuses}
            for container_id, info in actions.containers_to_kill.items():
                logger.info(
                    "killing unwanted container", extra=kv(**ctx, container=info.name, id=container_id)
                )
                try:
                    await self.lifecycle.kill_container(
                        pod, by_id[container_id], None, info.reason, info.message
                    )
                except cri_errors.CriError as err:
                    steps.append(SyncStep(ACTION_KILL_CONTAINER, info.name, ERR_KILL_CONTAINER, str(err)))
                    return
                steps.append(SyncStep(ACTION_KILL_CONTAINER, info.name))

        await self._prune_init_containers(pod, status)

        # The sandbox.
        pod_ips = status.ips
        sandbox_id = actions.sandbox_id
        if actions.create_sandbox:
            try:
                sandbox_id = await self._create_pod_sandbox(pod, actions.attempt)
            except (cri_errors.CriError, OSError, RuntimeHandlerError) as err:
                message = f'Failed to create sandbox for pod "{format_pod(pod)}": {err}'
                logger.warning("creating sandbox failed", extra=kv(**ctx, err=err))
                self._event(pod, "Warning", "FailedCreatePodSandBox", f"Failed to create pod sandbox: {err}")
                steps.append(
                    SyncStep(ACTION_CREATE_POD_SANDBOX, format_pod(pod), ERR_CREATE_POD_SANDBOX, message)
                )
                return
            steps.append(SyncStep(ACTION_CREATE_POD_SANDBOX, sandbox_id))
            try:
                response = await self._runtime.pod_sandbox_status(sandbox_id)
            except cri_errors.CriError as err:
                self._event(
                    pod, "Warning", "FailedStatusPodSandBox", f"Unable to get pod sandbox status: {err}"
                )
                steps.append(
                    SyncStep(ACTION_CONFIG_POD_SANDBOX, sandbox_id, ERR_CONFIG_POD_SANDBOX, str(err))
                )
                return
            if response.status is not None and not is_host_network_pod(pod):
                pod_ips = _sandbox_ips(response.status)
        pod_ip = pod_ips[0] if pod_ips else ""
        sandbox_config: pb.PodSandboxConfig | None = None

        async def start(container: Container) -> SyncStep:
            nonlocal sandbox_config
            if sandbox_config is None:  # made once a container starts: most syncs start none
                sandbox_config = generate_pod_sandbox_config(
                    pod,
                    actions.attempt,
                    node_name=self.node_name,
                    pod_logs_dir=self.pod_logs_dir,
                    cgroup_parent=self._cgroup_parent(pod),
                )
            step = await self._start(pod, container, status, sandbox_id, sandbox_config, pod_ip, pull_secrets)
            steps.append(step)
            return step

        # Ephemeral containers first, so a debugging container starts even while an init container
        # keeps failing (they cannot be set at creation, so init containers normally ran long before).
        ephemerals = (pod.spec.ephemeral_containers if pod.spec else None) or ()
        for index in actions.ephemeral_containers_to_start:
            await start(ephemerals[index])

        # Init containers.
        inits = (pod.spec.init_containers if pod.spec else None) or ()
        legacy_next = actions.next_init_container_to_start
        if legacy_next is not None and (await start(inits[legacy_next])).error:
            return
        for index in actions.init_containers_to_start:
            if (await start(inits[index])).error and not inits[index].is_sidecar:
                return  # a failed sidecar start is retried later; a regular init container blocks

        # In-place resize of the running containers (Go: step 8, before the containers are started).
        if actions.containers_to_update or actions.update_pod_resources:
            steps.append(await self._do_pod_resize(pod, status, actions))

        # App containers: a failure does not stop the others.
        containers = (pod.spec.containers if pod.spec else None) or ()
        for index in actions.containers_to_start:
            await start(containers[index])

    async def _create_pod_sandbox(self, pod: Pod, attempt: int) -> str:
        config = generate_pod_sandbox_config(
            pod,
            attempt,
            node_name=self.node_name,
            pod_logs_dir=self.pod_logs_dir,
            cgroup_parent=self._cgroup_parent(pod),
        )
        if self.dns_config is not None:
            config.dns_config = await self.dns_config(pod)
        await self.run_sync(make_dirs, config.log_directory)
        handler = await self._runtime_handler(pod)
        sandbox_id = await self._runtime.run_pod_sandbox(config, handler)
        # Go's "Created PodSandbox for pod" is V(4): a line per pod start costs at scale
        logger.debug("created sandbox", extra=kv(**_ctx(pod), sandbox=sandbox_id, attempt=attempt))
        return sandbox_id

    def _cgroup_parent(self, pod: Pod) -> str:
        return self.pod_cgroup_parent(pod) if self.pod_cgroup_parent is not None else ""

    async def _runtime_handler(self, pod: Pod) -> str:
        """The handler of the pod's RuntimeClass (Go: ``LookupRuntimeHandler`` in ``createPodSandbox``)."""
        name = pod.spec.runtime_class_name if pod.spec else None
        if not name or self.runtime_classes is None:
            return ""
        with trio.move_on_after(RUNTIME_CLASS_SYNC_WAIT):
            await self.runtime_classes.wait_synced()
        handler = self.runtime_classes.lookup_runtime_handler(name)
        logger.info(
            "running pod with runtime handler", extra=kv(**_ctx(pod), runtime_class=name, handler=handler)
        )
        return handler

    @staticmethod
    def crash_backoff_key(pod: Pod, container: Container) -> str:
        """``GetStableKey``: ``<podName>_<ns>_<podUID>_<container>_<hash>``."""
        return f"{pod.name}_{pod.namespace}_{pod.uid}_{container.name}_{hash_container(container)}"

    def _do_backoff(self, pod: Pod, container: Container, status: PodStatus) -> SyncStep | None:
        """``doBackOff``: the crash-loop step error if the container's last exit is too recent."""
        name = container.name or ""
        exited = next(
            (c for c in status.container_statuses if c.name == name and c.state is ContainerState.EXITED),
            None,
        )
        if exited is None:
            return None
        finished = self.clock.to_trio(exited.finished_at)
        key = self.crash_backoff_key(pod, container)
        if self.crash_backoff.is_in_backoff_since(key, finished):
            delay = self.crash_backoff.get(key)
            self._event(
                pod,
                "Warning",
                "BackOff",
                f"Back-off restarting failed container {name} in pod {format_pod(pod)}",
            )
            message = (
                f"back-off {go_duration(delay)} restarting failed container={name} pod={format_pod(pod)}"
            )
            logger.debug("back-off restarting container", extra=kv(**_ctx(pod), container=name, delay=delay))
            return SyncStep(ACTION_START_CONTAINER, name, ERR_CRASH_LOOP_BACKOFF, message, finished + delay)
        self.crash_backoff.next(key, finished)
        return None

    async def _start(
        self,
        pod: Pod,
        container: Container,
        status: PodStatus,
        sandbox_id: str,
        sandbox_config: pb.PodSandboxConfig,
        pod_ip: str,
        pull_secrets: Sequence[PullSecret] = (),
    ) -> SyncStep:
        name = container.name or ""
        backoff = self._do_backoff(pod, container, status)
        if backoff is not None:
            return backoff
        # Go records the actuated resources as the container is created
        self.actuated.set_container(pod.uid, name, values_of(container.resources).requirements())
        try:
            await self.lifecycle.start_container(
                pod,
                container,
                status,
                sandbox_id=sandbox_id,
                sandbox_config=sandbox_config,
                pod_ip=pod_ip,
                pull_secrets=pull_secrets,
            )
        except StartContainerError as err:
            logger.info(
                "starting container failed",
                extra=kv(**_ctx(pod), container=name, reason=err.reason, message=err.message),
            )
            return SyncStep(ACTION_START_CONTAINER, name, err.reason, err.message, err.backoff_until)
        return SyncStep(ACTION_START_CONTAINER, name)

    async def _do_pod_resize(self, pod: Pod, status: PodStatus, actions: PodActions) -> SyncStep:
        """Go ``doPodResizeAction``: memory, then CPU; for each, the pod cgroup grows before the
        containers and shrinks after them."""
        target = format_pod(pod)
        try:
            await self._resize(pod, status, actions)
        except (ResizeError, cri_errors.CriError) as err:
            logger.warning("pod resize failed", extra=kv(**_ctx(pod), error=str(err)))
            return SyncStep(ACTION_RESIZE_POD_IN_PLACE, target, ERR_RESIZE_POD_IN_PLACE, str(err))
        return SyncStep(ACTION_RESIZE_POD_IN_PLACE, target)

    async def _resize(self, pod: Pod, status: PodStatus, actions: PodActions) -> None:
        cgroups = self.pod_cgroups
        desired = cgroups.resource_config(pod) if cgroups is not None else None
        current = cgroups.resource_config(self._actuated_pod(pod)) if cgroups is not None else None
        memory_updates = actions.containers_to_update.get("memory", ())
        await validate_memory_resize(
            self._runtime,
            pod,
            status,
            current.memory if current is not None else None,
            desired.memory if desired is not None else None,
            memory_updates,
            actions.update_pod_resources and cgroups is not None,
            killed=set(actions.containers_to_kill),
        )

        async def set_pod(limit: bool, resource: str) -> None:
            if cgroups is None or desired is None:
                return
            if resource == "cpu":
                config = (
                    ResourceConfig(cpu_period=desired.cpu_period, cpu_quota=desired.cpu_quota)
                    if limit
                    else ResourceConfig(cpu_shares=desired.cpu_shares)
                )
            elif limit:
                config = ResourceConfig(memory=desired.memory)
            else:
                return  # memory requests are not written to cgroups
            try:
                await cgroups.set_pod_cgroup_config(pod, config)
            except (OSError, CgroupError) as err:
                raise ResizeError(f"failed to set pod cgroup config ({resource}): {err}") from err

        async def resize(resource: str, cur_lim: int, new_lim: int, cur_req: int, new_req: int) -> None:
            if new_lim > cur_lim:
                await set_pod(True, resource)
            if new_req > cur_req:
                await set_pod(False, resource)
            for update in actions.containers_to_update.get(resource, ()):
                await self._update_container(pod, resource, update)
            if new_req < cur_req:
                await set_pod(False, resource)
            if new_lim < cur_lim:
                await set_pod(True, resource)

        pod_wide = actions.update_pod_resources
        if memory_updates or pod_wide:
            cur = (current.memory if current is not None else None) or 0
            new = (desired.memory if desired is not None else None) or cur
            await resize("memory", cur, new, 0, 0)
        if actions.containers_to_update.get("cpu") or pod_wide:
            cur_quota = (current.cpu_quota if current is not None else None) or 0
            new_quota = (desired.cpu_quota if desired is not None else None) or cur_quota
            cur_shares = (current.cpu_shares if current is not None else None) or 0
            new_shares = (desired.cpu_shares if desired is not None else None) or cur_shares
            await resize("cpu", cur_quota, new_quota, cur_shares, new_shares)

    def _actuated_pod(self, pod: Pod) -> Pod:
        """The pod with the resources its containers were last given."""
        actuated = self.actuated.get_pod(pod.uid) or {}
        spec = pod.spec
        if spec is None:
            return pod

        def swap(containers: Sequence[Container] | None) -> tuple[Container, ...] | None:
            if containers is None:
                return None
            return tuple(
                attrs.evolve(c, resources=actuated[c.name or ""]) if (c.name or "") in actuated else c
                for c in containers
            )

        return attrs.evolve(
            pod,
            spec=attrs.evolve(
                spec, containers=swap(spec.containers), init_containers=swap(spec.init_containers)
            ),
        )

    async def _update_container(self, pod: Pod, resource: str, update: ContainerToUpdate) -> None:
        """Go ``updatePodContainerResources`` for one container: ``resource`` at its new values, the
        other as last actuated."""
        name = update.container.name or ""
        actuated = values_of(self.actuated.get_container(pod.uid, name))
        values = actuated.with_resource(resource, update.desired)
        linux = linux_resources_for(pod, update.container, values, self.memory_capacity)
        try:
            await self._runtime.update_container_resources(update.container_id, linux)
        except cri_errors.CriError as err:
            logger.error(
                "updateContainerResources failed",
                extra=kv(**_ctx(pod), container=name, id=update.container_id, resource=resource, error=err),
            )
            raise ResizeError(str(err)) from err
        self.actuated.set_container(pod.uid, name, values.requirements())
        logger.info(
            "container resources updated",
            extra=kv(**_ctx(pod), container=name, id=update.container_id, resource=resource),
        )

    async def _purge_init_containers(self, pod: Pod, status: PodStatus) -> None:
        """Remove every instance of every init container (the sandbox is being recreated)."""
        names = {c.name for c in (pod.spec.init_containers if pod.spec else None) or ()}
        for instance in status.container_statuses:
            if instance.name in names:
                await self._remove_quietly(pod, instance)

    async def _prune_init_containers(self, pod: Pod, status: PodStatus) -> None:
        """Keep only the newest exited instance of each init container."""
        names = {c.name for c in (pod.spec.init_containers if pod.spec else None) or ()}
        seen: set[str] = set()
        for instance in status.container_statuses:  # newest first
            if instance.name not in names or instance.state not in (
                ContainerState.EXITED,
                ContainerState.UNKNOWN,
            ):
                continue
            if instance.name not in seen:
                seen.add(instance.name)
                continue
            await self._remove_quietly(pod, instance)

    async def _remove_quietly(self, pod: Pod, instance: ContainerStatus) -> None:
        try:
            await self.lifecycle.remove_container(instance.id)
        except cri_errors.CriError as err:
            logger.warning(
                "failed to remove init container",
                extra=kv(**_ctx(pod), container=instance.name, id=instance.id, err=err),
            )

    # --- kill -----------------------------------------------------------------------------------

    async def kill_container(
        self,
        pod: Pod | None,
        status: ContainerStatus | RuntimeContainer,
        grace_override: int | None = None,
        reason: str = "",
        message: str = "",
    ) -> None:
        """Stop one container (see :meth:`ContainerLifecycle.kill_container`)."""
        await self.lifecycle.kill_container(pod, status, grace_override, reason, message)

    async def kill_pod(
        self, pod: Pod | None, runtime_pod: RuntimePod, grace_period_override: int | None = None
    ) -> PodSyncResult:
        """Stop every container of ``runtime_pod`` in parallel (each with its own grace period; with
        sidecars, regular containers go first), then stop every sandbox. ``pod`` may be None (a pod
        the kubelet no longer knows): grace periods then come from the containers' annotations."""
        ordering = None
        if pod is not None and has_restartable_init_container(pod):
            ordering = TerminationOrdering.for_pod(pod, {c.name for c in runtime_pod.containers})
        container_steps: list[SyncStep | None] = [None] * len(runtime_pod.containers)

        async def kill_one(index: int, container: RuntimeContainer) -> None:
            try:
                await self.lifecycle.kill_container(pod, container, grace_period_override, ordering=ordering)
            except cri_errors.CriError as err:
                logger.warning(
                    "kill container failed",
                    extra=kv(
                        pod=kobj(runtime_pod),
                        uid=runtime_pod.uid,
                        container=container.name,
                        id=container.id,
                        err=err,
                    ),
                )
                container_steps[index] = SyncStep(
                    ACTION_KILL_CONTAINER, container.name, ERR_KILL_CONTAINER, str(err)
                )
                return
            container_steps[index] = SyncStep(ACTION_KILL_CONTAINER, container.name)

        async with trio.open_nursery() as nursery:
            for index, container in enumerate(runtime_pod.containers):
                nursery.start_soon(kill_one, index, container)
        steps = [step for step in container_steps if step is not None]

        for sandbox in runtime_pod.sandboxes:
            try:
                await self._runtime.stop_pod_sandbox(sandbox.id)
            except cri_errors.NotFoundError:
                pass
            except cri_errors.CriError as err:
                logger.warning(
                    "stop sandbox failed",
                    extra=kv(pod=kobj(runtime_pod), uid=runtime_pod.uid, sandbox=sandbox.id, err=err),
                )
                steps.append(SyncStep(ACTION_KILL_POD_SANDBOX, sandbox.id, ERR_KILL_POD_SANDBOX, str(err)))
                continue
            steps.append(SyncStep(ACTION_KILL_POD_SANDBOX, sandbox.id))
        return PodSyncResult(tuple(steps))

    # --- garbage collection ---------------------------------------------------------------------

    async def remove_dead_containers(
        self,
        status: PodStatus,
        keep_per_container: int = DEFAULT_MAX_PER_POD_CONTAINER,
        *,
        remove_all: bool = False,
    ) -> list[str]:
        return await self.gc.remove_dead_containers(status, keep_per_container, remove_all=remove_all)

    async def collect_orphans(self, desired_uids: Collection[str]) -> list[str]:
        """Remove stopped pods of this node that are not desired: containers, sandboxes, log dirs."""
        return await self.gc.collect_orphans(await self.get_pods(all=True), desired_uids)

    async def garbage_collect(
        self,
        policy: GCPolicy,
        state: PodStateProvider,
        *,
        all_sources_ready: bool,
        evict_non_deleted_pods: bool = False,
    ) -> GCResult:
        """Container GC under ``policy`` over this node's runtime pods (Go: ``GarbageCollect``)."""

        async def sandboxes_with_containers() -> set[str]:
            selector = node_selector(self.node_name)
            containers = await self._runtime.list_containers(pb.ContainerFilter(label_selector=selector))
            return {c.pod_sandbox_id for c in containers}

        return await self.gc.garbage_collect(
            policy,
            await self.get_pods(all=True),
            sandboxes_with_containers=sandboxes_with_containers,
            state=state,
            all_sources_ready=all_sources_ready,
            now_ns=self.clock.wall_ns(),
            evict_non_deleted_pods=evict_non_deleted_pods,
        )

    def gc_backoffs(self) -> None:
        """Forget expired crash-loop and image backoff entries (housekeeping)."""
        self.crash_backoff.gc()
        self.images.backoff.gc()
