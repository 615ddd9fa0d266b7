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
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio
import trio_util

from kubelet_trio import allocation, defaults
from kubelet_trio.api import Pod
from kubelet_trio.api.pod import TERMINAL_PHASES
from kubelet_trio.api.status import PodCondition as ApiPodCondition
from kubelet_trio.api.status import PodStatus as ApiPodStatus
from kubelet_trio.api.timefmt import rfc3339
from kubelet_trio.clock import WallClock
from kubelet_trio.cm.allocatable import NodeAllocatable
from kubelet_trio.cm.cgroup_manager import CgroupError
from kubelet_trio.cm.container_manager import FAILED_TO_CREATE_POD_CONTAINER
from kubelet_trio.config.podconfig import PodConfig
from kubelet_trio.config.types import PodOperation, PodUpdate
from kubelet_trio.container.cache import PodCache
from kubelet_trio.container.types import ContainerState, PodStatus, RuntimePod
from kubelet_trio.container_log_manager import (
    DEFAULT_MAX_FILES,
    DEFAULT_MAX_SIZE,
    DEFAULT_MONITOR_INTERVAL,
    ContainerLogManager,
)
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.eviction import (
    EvictionManager,
)
from kubelet_trio.fsio import RunSync
from kubelet_trio.images import ImageGCManager
from kubelet_trio.images.gc import NodeEventSink
from kubelet_trio.kuberuntime.gc import GCPolicy
from kubelet_trio.kuberuntime.manager import (
    ACTION_RESIZE_POD_IN_PLACE,
    KubeRuntimeManager,
    running_pod_from_status,
)
from kubelet_trio.lifecycle.predicate import admit_pod_count, admit_standalone
from kubelet_trio.logs import error_text, kobj, kv, vlevel
from kubelet_trio.metrics import KubeletMetrics
from kubelet_trio.nodeshutdown import NodeShutdownManager, ShutdownSocket, socket_path
from kubelet_trio.nodestatus.addresses import NodeAddressError, choose_node_ip, read_host_network
from kubelet_trio.objects import NO_OBJECTS, ObjectStore, ObjectUnavailable, Secret
from kubelet_trio.pleg.events import PodLifecycleEvent, PodLifecycleEventType
from kubelet_trio.pleg.generic import GenericPLEG
from kubelet_trio.pod.manager import PodManager
from kubelet_trio.pod_workers import PodWorkers, SyncError, UpdatePodOptions, UpdateType, WorkType
from kubelet_trio.prober import ProbeManager, ProbeUpdate
from kubelet_trio.prober.results import ProbeKind, ProbeResult
from kubelet_trio.stats import CriStatsProvider
from kubelet_trio.status.conditions import need_to_reconcile_pod_readiness
from kubelet_trio.status.generate import (
    DEADLINE_EXCEEDED_REASON,
    active_deadline_exceeded,
    generate_api_pod_status,
)
from kubelet_trio.status.manager import StatusManager
from kubelet_trio.status.qos import pod_qos
from kubelet_trio.sysctl import SysctlAllowlist
from kubelet_trio.volumemanager import MountError, VolumeManager, make_pod_data_dirs, setup_data_dirs

if TYPE_CHECKING:
    from kubelet_trio.boundary import BoundaryErrors
    from kubelet_trio.cm.container_manager import ContainerManager, NodeConfig
    from kubelet_trio.cm.devicemanager import DeviceManager
    from kubelet_trio.cm.oom_watcher import OOMWatcher
    from kubelet_trio.container.types import ContainerStatus
    from kubelet_trio.stats import Summary
    from kubelet_trio.stats.cadvisor import CadvisorSnapshot

logger = logging.getLogger(__name__)

SYNC_TICK = 1.0
HOUSEKEEPING_PERIOD = 2.0
RUNTIME_STATUS_PERIOD = 5.0
CONTAINER_GC_PERIOD = 60.0  # Go: ContainerGCPeriod
MERGED_CHANNEL_SIZE = 100
ORPHAN_GRACE_PERIOD = 1
FAILED_TO_RETRIEVE_IMAGE_PULL_SECRET = "FailedToRetrieveImagePullSecret"
OBJECT_PREFETCH_TIMEOUT = 10.0  # a pod sync waits this long at most for its ConfigMaps and Secrets
KILL_DEADLINE_MARGIN = 10.0  # beyond the grace period, for the runtime to deliver SIGKILL and answer


class PodSource(Protocol):
    """A pod config source component (file, http, api): it sends SETs into the PodConfig."""

    async def run(self, *, task_status: trio.TaskStatus[None] = ...) -> None: ...


@attrs.frozen
class KubeletConfig:
    node_name: str
    pod_logs_dir: str = defaults.POD_LOGS_DIR
    root_dir: str = defaults.ROOT_DIR
    node_ips: tuple[str, ...] = ()
    sync_frequency: float = defaults.SYNC_FREQUENCY
    sync_tick: float = SYNC_TICK
    housekeeping_period: float = HOUSEKEEPING_PERIOD
    container_gc_period: float = CONTAINER_GC_PERIOD
    pleg_relist_period: float = 1.0
    pleg_relist_threshold: float = 180.0
    jitter: float = 0.5
    # Go spreads the first probes of workers started with the kubelet over one period; a harness that
    # checks exact probe times turns it off.
    probe_start_jitter: bool = True
    healthz_port: int = 0  # 0 = off (the CLI's default is 10248)
    healthz_bind_address: str = defaults.HEALTHZ_BIND_ADDRESS
    read_only_port: int = 0  # 0 = off, as in the Go kubelet
    address: str = defaults.ADDRESS  # the read-only server's and the Kubelet API's bind address
    port: int = 0  # the Kubelet API (TLS, authenticated); 0 = off (the CLI's default is 10250)
    tls_cert_file: str = ""  # "" with tls_private_key_file "": self-signed under <root_dir>/pki
    tls_private_key_file: str = ""
    client_ca_file: str = ""  # authentication.x509.clientCAFile
    tls_min_version: str = defaults.TLS_MIN_VERSION  # tlsMinVersion: Go's name ("": TLS 1.2)
    tls_cipher_suites: tuple[str, ...] = ()  # tlsCipherSuites: Go's names ((): the TLS library's)
    anonymous_auth: bool = defaults.ANONYMOUS_AUTH  # authentication.anonymous.enabled
    authentication_token_webhook: bool = defaults.AUTHENTICATION_WEBHOOK  # authentication.webhook.enabled
    authorization_mode: str = defaults.AUTHORIZATION_MODE  # authorization.mode: AlwaysAllow or Webhook
    # webhook answer caches: authentication.webhook.cacheTTL, authorization.webhook.cache*TTL
    authentication_cache_ttl: float = defaults.AUTHENTICATION_WEBHOOK_CACHE_TTL
    authorized_cache_ttl: float = defaults.AUTHORIZATION_WEBHOOK_CACHE_AUTHORIZED_TTL
    unauthorized_cache_ttl: float = defaults.AUTHORIZATION_WEBHOOK_CACHE_UNAUTHORIZED_TTL
    streaming_connection_idle_timeout: float = (
        defaults.STREAMING_CONNECTION_IDLE_TIMEOUT
    )  # exec/attach/port-forward streams
    cluster_dns: tuple[str, ...] = ()  # clusterDNS: the nameservers of ClusterFirst pods
    cluster_domain: str = ""  # clusterDomain: search domains and pod FQDNs
    resolv_conf: str = defaults.RESOLV_CONF  # the node's resolver file for dnsPolicy Default ("" = none)
    # secret/downwardAPI/projected volumes on tmpfs, as Go; None: when running as root (an unprivileged
    # embedding writes them to disk). Harnesses on a simulated runtime pass False.
    memory_backed_volumes: bool | None = None
    # container log rotation (kubelet_trio.container_log_manager); a negative max size turns it off
    container_log_max_size: int = DEFAULT_MAX_SIZE
    container_log_max_files: int = DEFAULT_MAX_FILES
    container_log_monitor_interval: float = DEFAULT_MONITOR_INTERVAL
    # allowedUnsafeSysctls: sysctls (or prefixes ending in *) pods may set beyond the safe ones
    allowed_unsafe_sysctls: tuple[str, ...] = ()
    # node-pressure eviction (kubelet_trio.eviction): thresholds signal -> quantity or percentage
    eviction_hard: Mapping[str, str] = attrs.Factory(lambda: dict(defaults.EVICTION_HARD))
    eviction_soft: Mapping[str, str] = attrs.Factory(dict)
    eviction_soft_grace_period: Mapping[str, float] = attrs.Factory(dict)  # seconds
    eviction_minimum_reclaim: Mapping[str, str] = attrs.Factory(dict)
    eviction_pressure_transition_period: float = defaults.EVICTION_PRESSURE_TRANSITION_PERIOD
    eviction_max_pod_grace_period: int = defaults.EVICTION_MAX_POD_GRACE_PERIOD
    # image GC (kubelet_trio.images), container GC policy (kuberuntime.gc), graceful node shutdown
    image_gc_high_threshold_percent: int = defaults.IMAGE_GC_HIGH_THRESHOLD_PERCENT
    image_gc_low_threshold_percent: int = defaults.IMAGE_GC_LOW_THRESHOLD_PERCENT
    image_minimum_gc_age: float = defaults.IMAGE_MINIMUM_GC_AGE
    minimum_container_ttl_duration: float = defaults.MINIMUM_CONTAINER_TTL_DURATION
    maximum_dead_containers_per_container: int = defaults.MAXIMUM_DEAD_CONTAINERS_PER_CONTAINER
    maximum_dead_containers: int = defaults.MAXIMUM_DEAD_CONTAINERS
    shutdown_grace_period: float = defaults.SHUTDOWN_GRACE_PERIOD  # seconds; 0: off
    shutdown_grace_period_critical_pods: float = defaults.SHUTDOWN_GRACE_PERIOD_CRITICAL_PODS
    pod_infra_container_image: str = ""  # never garbage collected (besides the runtime's sandbox image)
    # maxPods: standalone admission's pod limit (OutOfpods); None: no limit (the CLI's default is 110). In
    # API mode admission reads the Node's allocatable pods, set from ApiModeOptions.max_pods instead.
    max_pods: int | None = None
    # device plugins (kubelet_trio.cm.devicemanager): serve <root_dir>/device-plugins/kubelet.sock, report the
    # plugins' resources and give their devices to containers. Go always does; off for embedded nodes
    # that share a machine (one socket per root dir)
    device_plugins: bool = False
    # pod cgroups (kubelet_trio.cm): None keeps pods in the runtime's default cgroup, as embedded nodes
    # must (unprivileged, or sharing the machine's kubepods with another kubelet); the daemon on a real
    # runtime sets it from cgroupsPerQOS and the settings around it
    cgroups: NodeConfig | None = None
    # the plugin registry (kubelet_trio.pluginmanager): watch <root_dir>/plugins_registry, where CSI drivers'
    # registrars put their sockets, so that their volumes can be mounted. Go always does; off for embedded
    # nodes, which rarely have drivers (API mode's local and hostPath persistent volumes work without it)
    plugin_registry: bool = False
    # image pulls (kubelet_trio.kuberuntime.images): serializeImagePulls, maxParallelImagePulls (None: no
    # limit), registryPullQPS / registryBurst (a token bucket; 0 = no limit, the embedded default: Go's 5
    # QPS would fail the pulls of a harness that starts many pods at once; the CLI's default is Go's)
    serialize_image_pulls: bool = defaults.SERIALIZE_IMAGE_PULLS
    max_parallel_image_pulls: int | None = None
    registry_pull_qps: float = 0.0
    registry_burst: int = defaults.REGISTRY_BURST


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


def default_node_ips() -> tuple[str, ...]:
    """For an embedding that passes no node IPs: the default-route interface's address (no name lookup
    here; the daemon resolves the node name first, as Go: ``nodestatus.resolve_node_ips``)."""
    try:
        network = read_host_network()
        return (choose_node_ip(node_ip="", node_name="", hostname="", resolved=(), network=network),)
    except (NodeAddressError, OSError):
        return ("127.0.0.1",)


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


def record_node_event(sink: NodeEventSink | None, type_: str, reason: str, message: str) -> None:
    """Events about the Node (FreeDiskSpaceFailed, NodeShutdown, ...): logged, and to ``sink`` when there is
    one (API mode: the API server)."""
    logger.info("node event", extra=kv(type=type_, reason=reason, message=message))
    if sink is not None:
        sink(type_, reason, message)


@attrs.define(eq=False, kw_only=True)
class Kubelet:
    """One node: the sync loop over the parts it is given (Go: ``pkg/kubelet.Kubelet``).

    :func:`kubelet_trio.kubelet_builder.build_kubelet` builds every part and then the Kubelet; the Kubelet
    constructs nothing and nothing rewires it afterwards.
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

    async def _pod_ips(self, pod: Pod) -> tuple[str, ...]:
        """The pod's IPs from the runtime (httpGet lifecycle hooks without a host)."""
        return (await self._kube_runtime.get_pod_status(pod.uid, pod.name, pod.namespace)).ips

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

    def active_pods(self) -> list[Pod]:
        """Go ``GetActivePods``: admitted pods whose termination was not requested and that are not done."""
        return [
            p
            for p in self._pod_manager.pods()
            if p.uid not in self.rejected
            and not p.is_terminal
            and self._pod_workers.is_known(p.uid)
            and not self._pod_workers.is_termination_requested(p.uid)
        ]

    async def terminate_pod_abnormally(
        self, pod: Pod, *, grace_period: int, reason: str, message: str
    ) -> None:
        """Go ``TerminatePodAbnormallyAndWait``: the pod is Failed with ``reason`` and ``message`` (phases
        are monotonic, so it stays so) and killed through its worker with ``grace_period``; returns once it
        is killed. Raises TimeoutError when that takes longer than the grace period and a margin."""
        status = self.generate_status(pod, self._cache.get(pod.uid))
        condition = ApiPodCondition(
            type="DisruptionTarget",
            status="True",
            reason="TerminationByKubelet",
            message=message,
            last_transition_time=rfc3339(self.clock.now()),
        )
        others = tuple(c for c in status.conditions or () if c.type != "DisruptionTarget")
        conditions = (*others, condition)
        failed = attrs.evolve(status, phase="Failed", reason=reason, message=message, conditions=conditions)
        self._status_manager.set_pod_status(pod, failed)
        killed = trio.Event()
        self._pod_workers.update_pod(
            UpdatePodOptions(UpdateType.KILL, pod=pod, grace_period_override=grace_period, killed=killed)
        )
        with trio.move_on_after(grace_period * 1.5 + KILL_DEADLINE_MARGIN):
            await killed.wait()
        if not killed.is_set():
            raise TimeoutError(f"pod {pod.full_name} was not killed within its grace period {grace_period}s")

    async def delete_all_unused_containers(self) -> None:
        """Go ``DeleteAllUnusedContainers`` (eviction's node-level reclaim): the container GC under the
        node's policy, also evicting the dead containers of pods that are not deleted."""
        await self._kube_runtime.garbage_collect(
            self._gc_policy(), self, all_sources_ready=self.sources_ready, evict_non_deleted_pods=True
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
                active = [p for p in self._pod_manager.pods() if self._is_admitted_active(p.uid)]
            return active

        for pod in sorted(pods, key=lambda p: (p.metadata.creation_timestamp or "") if p.metadata else ""):
            self._pod_manager.add_or_update(pod)
            logger.info("pod added", extra=kv(pod=kobj(pod), uid=pod.uid))
            known = self._pod_workers.is_known(pod.uid)  # then already among the active pods, if active
            if self._reject_if_not_admitted(pod, active_pods):
                continue
            self._pod_workers.update_pod(UpdatePodOptions(UpdateType.CREATE, pod=pod))
            if active is not None and not known and self._is_admitted_active(pod.uid):
                active.append(pod)

    def _is_admitted_active(self, uid: str) -> bool:
        """Go ``filterOutInactivePods`` over the admitted pods: the ones new pods are admitted against."""
        return (
            uid not in self.rejected
            and self._pod_workers.is_known(uid)
            and not self._pod_workers.is_termination_requested(uid)
        )

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
        if event.type is PodLifecycleEventType.CONTAINER_DIED and self._nursery is not None:
            self._nursery.start_soon(self._remove_dead_containers, event.uid)

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

    async def _remove_dead_containers(self, uid: str) -> None:
        """Keep the newest max(maxPerPodContainer, 1) dead instances of each container (Go's deletor)."""
        keep = self.config.maximum_dead_containers_per_container
        try:
            await self._kube_runtime.remove_dead_containers(self._cache.get(uid), keep_per_container=keep)
        except Exception as exc:
            logger.warning("removing dead containers failed", extra=kv(uid=uid, error=exc))

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
                        policy, self, all_sources_ready=self.sources_ready
                    )
                except Exception as exc:
                    logger.warning("container garbage collection failed", extra=kv(error=exc))

    def _gc_policy(self) -> GCPolicy:
        return GCPolicy(
            self.config.minimum_container_ttl_duration,
            self.config.maximum_dead_containers_per_container,
            self.config.maximum_dead_containers,
        )

    def should_pod_content_be_removed(self, uid: str) -> bool:
        """Container GC: a pod no longer desired whose worker cannot have running containers."""
        return uid not in self._pod_manager.by_uid() and not self._pod_workers.could_have_running_containers(
            uid
        )

    def should_pod_runtime_be_removed(self, uid: str) -> bool:
        """Container GC for eviction's reclaim: a terminated pod, or one whose content should go."""
        return self._pod_workers.is_terminated(uid) or self.should_pod_content_be_removed(uid)

    def _still_running(self, uid: str) -> bool:
        """The pod cache, which a worker refreshes right after killing a pod, still shows it running (the
        PLEG's listing may predate the kill by a relist)."""
        return self._cache.get(uid).could_be_running

    async def handle_pod_cleanups(self) -> None:
        """Housekeeping (Go HandlePodCleanups): kill orphans, restart forgotten pods, collect garbage."""
        desired = self._pod_manager.by_uid()
        known = self._pod_workers.sync_known_pods(desired)
        self._probe_manager.cleanup_pods(desired)
        running = [  # the PLEG's listing is at most one relist period old: no second listing
            p
            for p in self._pleg.pods()
            if any(c.state is ContainerState.RUNNING for c in (*p.containers, *p.sandboxes))
            and self._still_running(p.uid)
        ]
        for uid, pod in desired.items():
            if uid in known or uid in self.rejected or pod.is_terminal:
                continue
            if pod.metadata and pod.metadata.deletion_timestamp:
                continue
            logger.info("housekeeping starts a pod unknown to the workers", extra=kv(pod=kobj(pod), uid=uid))
            self._pod_workers.update_pod(UpdatePodOptions(UpdateType.CREATE, pod=pod))
        for runtime_pod in running:
            if runtime_pod.uid in known or runtime_pod.uid in desired:
                continue
            logger.info(
                "housekeeping kills an orphaned pod", extra=kv(pod=kobj(runtime_pod), uid=runtime_pod.uid)
            )
            self._pod_workers.update_pod(
                UpdatePodOptions(
                    UpdateType.KILL, running_pod=runtime_pod, grace_period_override=ORPHAN_GRACE_PERIOD
                )
            )
        self._status_manager.remove_orphaned(desired)
        if self._allocation_manager is not None:  # Go: RemoveOrphanedPods of both states
            self._allocation_manager.remove_orphaned_pods(set(desired) | set(known))
            self._kube_runtime.remove_orphaned_actuated(set(desired) | set(known))
        self._kube_runtime.gc_backoffs()  # Go: kl.backOff.GC(), entries idle for twice the maximum
        keep = set(desired) | set(known)
        self._data_dirs_made.intersection_update(keep)
        await self._volume_manager.cleanup_orphaned_pod_dirs(keep)
        if self._container_manager is not None:  # Go: cleanupOrphanedPodCgroups
            # a terminated pod's cgroup goes even while the pod is still desired (Go's possiblyRunningPods)
            possibly_running = {uid for uid, work in known.items() if work is not WorkType.TERMINATED}
            possibly_running |= {uid for uid in desired if uid not in known} | {p.uid for p in running}
            await self._container_manager.cleanup_orphaned_pod_cgroups(
                possibly_running, lambda uid: bool(self._volume_manager.mounted_volumes(uid))
            )

    # -- PodSyncer: what a pod worker runs ----------------------------------------------------------

    def generate_status(self, pod: Pod, runtime_status: PodStatus, *, terminal: bool = False) -> ApiPodStatus:
        old = self._status_manager.get(pod.uid) or pod.status
        readiness, started = self._probe_manager.probe_status(pod, runtime_status)
        am = self._allocation_manager
        return generate_api_pod_status(
            am.update_pod_from_allocation(pod)[0] if am is not None else pod,  # Go: the allocated pod
            runtime_status,
            old_status=old,
            clock=self.clock,
            node_ips=self.config.node_ips,
            reasons=self._kube_runtime.reasons(pod.uid),
            readiness=readiness,
            started=started,
            pod_is_terminal=terminal,
            resize_conditions=am.resize_conditions(pod.uid) if am is not None else None,
        )

    async def sync_pod(self, update_type: UpdateType, pod: Pod, status: PodStatus) -> bool:
        """Move one pod towards its spec (Go: ``SyncPod``); its pod worker calls it with the pod's latest
        runtime status, again after each event or resync, so each step is idempotent. Tearing down is
        :meth:`sync_terminating_pod` and :meth:`sync_terminated_pod`.

        The workflow is:

        1. Generate the pod's API status from the runtime status (``activeDeadlineSeconds`` included);
           a deadline that has just passed records a DeadlineExceeded event.
        2. Give the status to the status manager. A terminal phase (all containers exited under
           restartPolicy Never/OnFailure, or the deadline) ends here: True tells the worker to terminate.
        3. With pod cgroups (``cgroupsPerQOS``): make the pod's cgroup unless it exists, first killing
           the pod when it runs without one (not brought back under restartPolicy Never); a cgroup that
           cannot be made is a FailedCreatePodContainer event and a sync error.
           API mode: fetch the ConfigMaps and Secrets the pod references into the object store, for at
           most ``OBJECT_PREFETCH_TIMEOUT`` (after that the sync goes on with what is cached).
        4. Make the pod's data directories, once per pod (a failure is a Failed event and a sync error).
        5. Mount its volumes (FailedMount events come from the volume manager).
        6. Collect the Secrets of ``imagePullSecrets`` (missing ones: one Warning event naming them).
        7. Start the pod's probe workers (a newer pod object replaces the running workers' copy).
        8. A host-network pod without IPs from the runtime gets the node's.
        9. Run the runtime manager's sync: sandbox, init containers, containers, restarts, backoff.
        10. When the runtime changed, inspect the pod at once and report the new status; else tell the
            worker that this sync changed nothing.
        11. Raise :class:`SyncError` for failed steps (with the earliest backoff expiry, so the worker
            retries then); return False: the pod is not terminal.
        """
        previous = self._status_manager.get(pod.uid)
        am = self._allocation_manager
        if am is not None:  # the pod runs with its allocated resources (in-place resize)
            pod = am.update_pod_from_allocation(pod)[0]
            in_progress = self._kube_runtime.is_pod_resize_in_progress(pod, status)
            allocation.track_resize_in_progress(am, pod, in_progress)
        api_status = self.generate_status(pod, status)  # applies activeDeadlineSeconds too
        deadline_passed = api_status.reason == DEADLINE_EXCEEDED_REASON
        if deadline_passed and (previous is None or previous.reason != DEADLINE_EXCEEDED_REASON):
            # Go's active deadline handler records it when it fails the pod
            self.record_event(pod, "Normal", DEADLINE_EXCEEDED_REASON, api_status.message or "")
        self._status_manager.set_pod_status(pod, api_status)
        if api_status.phase in TERMINAL_PHASES:
            return True
        if self._container_manager is not None:
            await self._ensure_pod_cgroup(pod, status, api_status)
        if self._object_prefetch is not None:  # Go: register secrets and configmaps
            with trio.move_on_after(OBJECT_PREFETCH_TIMEOUT) as scope:
                await self._object_prefetch(pod)
            if scope.cancelled_caught:  # go on with what is cached; the next sync asks again
                logger.warning(
                    "fetching configmaps and secrets timed out", extra=kv(pod=kobj(pod), uid=pod.uid)
                )
        if pod.uid not in self._data_dirs_made:
            try:  # Go: makePodDataDirs, 0750, so no other local user reaches the pod's files
                await self.run_sync(make_pod_data_dirs, self.config.root_dir, pod.uid)
            except OSError as err:
                message = f"error making pod data directories: {err}"
                self.record_event(pod, "Warning", "Failed", message)
                raise SyncError(message) from err
            self._data_dirs_made.add(pod.uid)
        try:  # Go: WaitForAttachAndMount; FailedMount events come from the volume manager
            await self._volume_manager.mount_pod(pod)
        except MountError as err:
            raise SyncError(f"Unable to attach or mount volumes: {err}") from err
        pull_secrets = self._pull_secrets(pod)
        self._probe_manager.add_pod(pod)
        if pod.spec is not None and pod.spec.host_network and not status.ips:
            # Go: a host-network pod's IPs are the node's (its env and /etc/hosts use them).
            status = attrs.evolve(status, ips=tuple(ip.ip or "" for ip in api_status.pod_ips or ()))
        result = await self._kube_runtime.sync_pod(pod, status, pull_secrets)
        for step in result.failed:
            if am is not None and step.action == ACTION_RESIZE_POD_IN_PLACE:
                allocation.record_resize_error(am, pod, step.message)
        if result.steps:  # the runtime changed: report it now rather than after the next relist
            fresh = await self._refresh_cache(pod)
            if fresh is not None:
                if am is not None:  # Go: a resize re-inspects the pod, which ends PodResizeInProgress
                    in_progress = self._kube_runtime.is_pod_resize_in_progress(pod, fresh)
                    allocation.track_resize_in_progress(am, pod, in_progress)
                self._status_manager.set_pod_status(pod, self.generate_status(pod, fresh))
        else:
            self._pod_workers.untouched(pod.uid)
        if not result.ok:
            summary = "; ".join(
                f"{s.action} {s.target}: {s.error} {s.message}".strip() for s in result.failed
            )
            raise SyncError(summary, retry_at=result.earliest_backoff())
        return False

    async def _ensure_pod_cgroup(self, pod: Pod, status: PodStatus, api_status: ApiPodStatus) -> None:
        """Make the pod's cgroup before its sandbox (Go: SyncPod's "Create Cgroups for the pod"). A pod
        with running containers but no cgroup (started by a kubelet without cgroups) is killed first, to
        come back under it; one with restartPolicy Never is not brought back."""
        cm = self._container_manager
        assert cm is not None
        if self._pod_workers.is_termination_requested(pod.uid) or await cm.pods.exists(pod):
            return
        running = any(s.state and s.state.running for s in api_status.container_statuses or ())
        killed = False
        if running:
            logger.info("killing a pod running outside its cgroup", extra=kv(pod=kobj(pod), uid=pod.uid))
            runtime_pod = running_pod_from_status(status, self._kube_runtime.runtime_type)
            result = await self._kube_runtime.kill_pod(pod, runtime_pod)
            if result.ok:
                killed = True
            else:
                logger.error("KillPod failed", extra=kv(pod=kobj(pod), uid=pod.uid))
        if killed and pod.spec is not None and pod.spec.restart_policy == "Never":
            return
        try:
            await cm.ensure_pod_cgroup(pod)
        except CgroupError as err:
            message = f"unable to ensure pod container exists: {err}"
            self.record_event(pod, "Warning", FAILED_TO_CREATE_POD_CONTAINER, message)
            raise SyncError(
                f"failed to ensure that the pod: {pod.uid} cgroups exist and are correctly applied: {err}"
            ) from err

    def _pull_secrets(self, pod: Pod) -> list[Secret]:
        """The Secrets of the pod's ``spec.imagePullSecrets`` (Go: ``getPullSecretsForPod``), in its order,
        from the store volumes use (prefetched at the start of the sync). One that is missing or cannot be
        known is left out: an info line each, and one Warning event naming them all; the pull goes on
        with the others. Entries without a name are skipped. Standalone (no API server, no store) the
        references are ignored: Go 1.33's standalone kubelet has no secret manager to ask, later ones
        refuse static pods that reference secrets."""
        refs = (pod.spec.image_pull_secrets if pod.spec is not None else None) or ()
        if not refs or self._object_store is NO_OBJECTS:
            return []
        found: list[Secret] = []
        failed: list[str] = []
        for ref in refs:
            if not ref.name:  # API validation lets empty names through (Go skips them too)
                continue
            try:
                secret = self._object_store.get_secret(pod.namespace, ref.name)
                error = None if secret is not None else f'secrets "{ref.name}" not found'
            except ObjectUnavailable as err:
                secret, error = None, str(err)
            if secret is None:
                logger.info(
                    "Unable to retrieve pull secret, the image pull may not succeed.",
                    extra=kv(pod=kobj(pod), secret=f"{pod.namespace}/{ref.name}", err=error),
                )
                failed.append(ref.name)
                continue
            found.append(secret)
        if failed:
            self.record_event(
                pod,
                "Warning",
                FAILED_TO_RETRIEVE_IMAGE_PULL_SECRET,
                f"Unable to retrieve some image pull secrets ({', '.join(failed)}); "
                "attempting to pull the image may not succeed.",
            )
        return found

    async def sync_terminating_pod(self, pod: Pod, status: PodStatus, grace_period: int) -> None:
        """Stop every container of a pod whose termination was requested (Go: ``SyncTerminatingPod``):
        deleted, evicted, terminal, or no longer desired. The worker calls it until it returns without an
        error, then :meth:`sync_terminated_pod`.

        The workflow is:

        1. Stop the liveness and startup probes (readiness goes on reporting while containers stop).
        2. Report the current status.
        3. Kill the pod's containers and sandbox through the runtime manager with ``grace_period``
           (preStop hooks included), bounded by the grace period plus ``KILL_DEADLINE_MARGIN``; a kill
           that does not finish or fails raises :class:`SyncError`, and the worker retries.
        4. Inspect the pod into the pod cache and tell the worker when, so the terminated step need not
           wait for a relist; a container still running raises :class:`SyncError`.
        5. Remove the pod from the probe manager.
        6. Report the final status, generated as terminal.
        """
        self._probe_manager.stop_liveness_and_startup(pod)
        self._status_manager.set_pod_status(pod, self.generate_status(pod, status))
        logger.info("killing pod", extra=kv(pod=kobj(pod), uid=pod.uid, grace_period=grace_period))
        with trio.move_on_after(max(grace_period, 2) + KILL_DEADLINE_MARGIN) as scope:
            result = await self._kube_runtime.kill_pod(
                pod, running_pod_from_status(status, self._kube_runtime.runtime_type), grace_period
            )
        if scope.cancelled_caught:
            raise SyncError(f"killing the pod did not finish within {grace_period}s + margin")
        if not result.ok:
            raise SyncError("; ".join(f"{s.action} {s.target}: {s.error}" for s in result.failed))
        inspected_at = trio.current_time()
        fresh = await self._refresh_cache(pod)
        if fresh is None:
            raise SyncError("cannot inspect the pod after killing it")
        # The terminated cleanup follows at once and may read this inspection: no relist to wait for.
        self._pod_workers.refreshed(pod.uid, inspected_at)
        if fresh.running_containers:
            raise SyncError("detected running containers after a successful kill")
        self._probe_manager.remove_pod(pod)
        final = self.generate_status(pod, fresh, terminal=True)
        self._status_manager.set_pod_status(pod, final)

    async def _refresh_cache(self, pod: Pod) -> PodStatus | None:
        """Inspect the pod right after this kubelet acted on it and write the pod cache (the relist
        stays the source of truth: it corrects the entry and sends the lifecycle events). None when
        the runtime cannot be asked."""
        timestamp = trio.current_time()
        try:
            fresh = await self._kube_runtime.get_pod_status(pod.uid, pod.name, pod.namespace)
        except Exception as err:
            logger.warning("inspecting the pod after a sync failed", extra=kv(pod=kobj(pod), err=err))
            return None
        self._cache.set(pod.uid, fresh, None, timestamp)
        return fresh

    async def sync_terminating_runtime_pod(self, running_pod: RuntimePod) -> None:
        """Kill an orphan known only from the runtime (no pod spec) with ``ORPHAN_GRACE_PERIOD``
        (Go: ``SyncTerminatingRuntimePod``); a failed kill raises :class:`SyncError`."""
        result = await self._kube_runtime.kill_pod(None, running_pod, ORPHAN_GRACE_PERIOD)
        if not result.ok:
            raise SyncError("; ".join(f"{s.action} {s.target}: {s.error}" for s in result.failed))

    async def sync_terminated_pod(self, pod: Pod, status: PodStatus) -> None:
        """Release what a pod held once none of its containers runs (Go: ``SyncTerminatedPod``); the
        worker calls it until it returns without an error, and then the pod is finished.

        The workflow is:

        1. Forget that the pod's data directories were made (a restart of the same UID makes them again).
        2. Unmount and remove its volumes (a failure raises :class:`SyncError`; the worker retries).
        3. Report its final status, generated as terminal.
        4. Tell the status manager the pod is terminated (Go: ``TerminatePod``): containers never seen to
           end are reported as gone, and the phase becomes terminal.
        """
        self._data_dirs_made.discard(pod.uid)  # a restart of the same UID makes them again
        try:  # Go: WaitForUnmount
            await self._volume_manager.unmount_pod(pod.uid)
        except MountError as err:
            raise SyncError(f"Unable to tear down volumes: {err}") from err
        final = self.generate_status(pod, status, terminal=True)
        self._status_manager.set_pod_status(pod, final)
        self._status_manager.terminate_pod(pod)

    # --- HostInterface queries ---
    # The verbs of kubelet_trio.server.host.HostInterface (Go: server.HostInterface), what the HTTP servers
    # and run-once ask of the node. They answer with values (pods, statuses, URLs, figures), so no module
    # but this one and the builder holds a component of the Kubelet.

    def kubelet_config(self) -> KubeletConfig:
        return self.config

    def auth_client(self) -> Any:
        return self.api_client

    def wall_ns(self) -> int:
        return self.clock.wall_ns()

    async def run_blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await self.run_sync(fn, *args)

    def boundary_errors(self) -> BoundaryErrors:
        return self.metrics.boundary_errors

    def pods(self) -> list[Pod]:
        """Go ``GetPods``: the desired pods, each with the status this kubelet reports for it."""
        pods = []
        for pod in self._pod_manager.pods():
            status = self._status_manager.get(pod.uid)
            pods.append(pod if status is None else attrs.evolve(pod, status=status))
        return pods

    def pod_by_name(self, namespace: str, name: str) -> Pod | None:
        for pod in self._pod_manager.pods():
            if pod.namespace == namespace and pod.name == name:
                return pod
        return None

    def status_of(self, uid: str) -> ApiPodStatus | None:
        return self._status_manager.get(uid)

    async def wait_for_status(self, uid: str, predicate: Callable[[ApiPodStatus], bool]) -> ApiPodStatus:
        return await self._status_manager.wait_for(uid, predicate)

    async def wait_status_change(self, seen: int) -> int:
        version: int = await self._status_manager.version.wait_value(lambda value: value != seen)
        return version

    def container_instances(self, uid: str, name: str | None = None) -> list[ContainerStatus]:
        status = self._cache.get(uid)
        return list(status.container_statuses) if name is None else status.instances(name)

    async def running_pods(self) -> list[RuntimePod]:
        return await self._kube_runtime.get_pods(all=False)

    def _running_instance(self, pod: Pod, container: str) -> str:
        """The id of the running instance of ``container`` in the pod cache (Go's error otherwise)."""
        for status in self._cache.get(pod.uid).instances(container):
            if status.state is ContainerState.RUNNING:
                return status.id
        raise LookupError(f'container not found ("{container}")')

    async def exec_url(
        self,
        pod: Pod,
        container: str,
        cmd: Sequence[str],
        *,
        stdin: bool,
        stdout: bool,
        stderr: bool,
        tty: bool,
    ) -> str:
        from kubelet_trio.cri.gen.runtime import v1 as pb

        container_id = self._running_instance(pod, container)
        request = pb.ExecRequest(
            container_id=container_id, cmd=list(cmd), tty=tty, stdin=stdin, stdout=stdout, stderr=stderr
        )
        return await self.runtime.exec(request)

    async def attach_url(self, pod: Pod, container: str, *, stdin: bool, stdout: bool, stderr: bool) -> str:
        from kubelet_trio.cri.gen.runtime import v1 as pb

        spec = next((c for c in pod.spec.all_containers() if c.name == container), None) if pod.spec else None
        if spec is None:
            raise LookupError(f'container not found ("{container}")')
        tty = bool(spec.tty)
        container_id = self._running_instance(pod, container)
        request = pb.AttachRequest(
            container_id=container_id, stdin=stdin, tty=tty, stdout=stdout, stderr=stderr and not tty
        )
        return await self.runtime.attach(request)

    async def port_forward_url(self, pod: Pod, ports: Sequence[int]) -> str:
        from kubelet_trio.cri.gen.runtime import v1 as pb

        sandboxes = self._cache.get(pod.uid).sandbox_statuses  # newest first
        ready = [s for s in sandboxes if s.ready]
        if not (ready or sandboxes):
            raise LookupError(f'failed to find sandbox for pod "{pod.name}"')
        sandbox_id = (ready or list(sandboxes))[0].id
        return await self.runtime.port_forward(
            pb.PortForwardRequest(pod_sandbox_id=sandbox_id, port=list(ports))
        )

    async def run_in_container(self, pod: Pod, container: str, cmd: Sequence[str]) -> tuple[int, bytes]:
        answer = await self.runtime.exec_sync(self._running_instance(pod, container), list(cmd), 0)
        return answer.exit_code, bytes(answer.stdout) + bytes(answer.stderr)

    async def container_log_path(self, container_id: str) -> str:
        response = await self.runtime.container_status(container_id)
        return response.status.log_path if response.status else ""

    async def stats_summary(self, *, cpu_and_memory_only: bool = False) -> Summary:
        return await self._stats_provider.summary(cpu_and_memory_only=cpu_and_memory_only)

    async def cadvisor_snapshot(self) -> CadvisorSnapshot:
        from kubelet_trio.stats.cadvisor import cadvisor_snapshot  # with the first /metrics/cadvisor

        return await cadvisor_snapshot(self.runtime, self.config.node_name, self.run_sync)

    def render_metrics(self) -> bytes:
        self.metrics.update_running(self._cache)
        self.metrics.note_statuses(self._status_manager, self.clock.now())  # catch up with the watcher
        return self.metrics.render()

    def render_probe_metrics(self) -> bytes:
        return self.metrics.render_probes()

    def resync_interval(self) -> float:
        return self.config.sync_frequency

    def latest_loop_entry_time(self) -> float:
        return self.sync_loop_last_iteration

    def pleg_health(self) -> tuple[bool, str]:
        return self._pleg.healthy()

    def runtime_health(self) -> str | None:
        return self.runtime_error

    def request_sync(self, uid: str) -> Pod | None:
        pod = self._pod_manager.get(uid)
        if pod is not None:
            self._pod_workers.update_pod(UpdatePodOptions(UpdateType.SYNC, pod=pod))
        return pod

    async def wait_pod_finished(self, uid: str) -> None:
        await self._pod_workers.wait_finished(uid)

    async def purge_pods(self, uids: Iterable[str]) -> None:
        purged = set(uids)
        for uid in purged:
            if self._pod_workers.is_known(uid):
                await self._pod_workers.wait_finished(uid)
        leftovers = [p for p in await self._kube_runtime.get_pods(all=True) if p.uid in purged]
        await self._kube_runtime.gc.collect_orphans(leftovers, ())
