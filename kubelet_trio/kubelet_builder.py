"""The composition root: one place that builds a node (Go: ``NewMainKubelet`` and ``RunKubelet``).

::

    deps = KubeletDeps(runtime=runtime, pod_config=pod_config, sources=(file_source,))
    async with open_kubelet(KubeletConfig(node_name="node-1"), deps) as node:
        ...  # node.kubelet runs until the block exits (pods are left running, as the Go kubelet does)

:func:`build_kubelet` reads top to bottom in Go's order: the runtime and what it declares it can do;
standalone or API mode, decided here and nowhere else (with an API client the ``api`` pod source is
added, with the API-mode components the Kubelet's parts are built from); the node's state (pod cache,
pod manager, status manager); the managers, each on the ones before it; the Kubelet, given all of them;
last, the API-mode components that read its pods (the status publisher and the mirror-pod manager).
Nothing is constructed anywhere else and nothing rewires the Kubelet once built. :func:`open_kubelet`
builds the node and runs it.

Some parts call the Kubelet back once it runs: the pod workers sync pods through it, the eviction and
shutdown managers kill pods and list the active ones, lifecycle hooks ask a pod's IPs, node status reads
its health. They are built before it, on a :class:`_KubeletCalls` view that is bound to the Kubelet as soon
as it exists, before anything runs (Go hands them the ``klet`` it is still filling in).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from kubelet_trio.allocation import AllocationManager, standalone_resize_fit
from kubelet_trio.api.container import Container
from kubelet_trio.api.timefmt import format_time
from kubelet_trio.apimode import ApiModeOptions
from kubelet_trio.clock import WallClock
from kubelet_trio.cm.allocatable import NodeAllocatable, read_node_allocatable
from kubelet_trio.cm.cgroup_manager import CGROUP_ROOT
from kubelet_trio.cm.node_container_manager import PODS_ENFORCEMENT_KEY
from kubelet_trio.config.podconfig import PodConfig
from kubelet_trio.container.cache import PodCache
from kubelet_trio.container.types import ContainerState, PodStatus, RuntimePod
from kubelet_trio.container_log_manager import ContainerLogManager, LogRotatePolicy
from kubelet_trio.credentialprovider import node_keyring
from kubelet_trio.cri.instrumented import InstrumentedRuntime
from kubelet_trio.cri.runtime import Runtime, runtime_capabilities
from kubelet_trio.eviction import (
    EvictionConfig,
    EvictionManager,
    HostSignals,
    ImageGC,
    SignalSource,
    SimulatedSignals,
    StatsPodUsage,
    parse_thresholds,
)
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.images import ImageFsStatsProvider, ImageGCManager, ImageGCPolicy, StatvfsImageFs
from kubelet_trio.kubelet import (
    Component,
    EventSink,
    Kubelet,
    KubeletConfig,
    PodSource,
    record_pod_event,
)
from kubelet_trio.kubelet_node_status import default_node_ips, record_node_event
from kubelet_trio.kuberuntime.container import RunContainerOptions, RunOptionsProvider
from kubelet_trio.kuberuntime.manager import KubeRuntimeManager
from kubelet_trio.kuberuntime.mounts import RunOptionsGenerator
from kubelet_trio.lifecycle import HandlerRunner
from kubelet_trio.lifecycle.predicate import admit_standalone
from kubelet_trio.metrics import KubeletMetrics
from kubelet_trio.network.dns import DnsConfigurer
from kubelet_trio.nodeshutdown import NodeShutdownManager
from kubelet_trio.objects import NO_OBJECTS
from kubelet_trio.pleg.generic import GenericPLEG
from kubelet_trio.pod.manager import PodManager
from kubelet_trio.pod_workers import PodWorkers, UpdateType
from kubelet_trio.prober import ProbeManager
from kubelet_trio.stats import CriStatsProvider, HostSampler, read_host_sample
from kubelet_trio.status.manager import StatusManager
from kubelet_trio.sysctl import SysctlAllowlist
from kubelet_trio.volumemanager import VolumeManager
from kubelet_trio.volumemanager.mounter import SystemMounter

if TYPE_CHECKING:
    from kubelet_trio.api import Pod
    from kubelet_trio.apimode import ApiMode, ApiModeParts
    from kubelet_trio.client import ApiClient
    from kubelet_trio.cm.container_manager import ContainerManager
    from kubelet_trio.cm.devicemanager import DeviceManager
    from kubelet_trio.cm.oom_watcher import OOMWatcher
    from kubelet_trio.credentialprovider import PluginProvider
    from kubelet_trio.server.host import HostInterface
    from kubelet_trio.volume.persistent import ExternalVolumes

__all__ = ["KubeletDeps", "KubeletNode", "build_kubelet", "open_kubelet"]


@attrs.frozen(kw_only=True)
class KubeletDeps:
    """What a node is built from besides its :class:`KubeletConfig` (Go: ``kubelet.Dependencies``).

    ``pod_config`` merges the pod sources; ``sources`` feed it (their channels come from it). With
    ``api_client`` the node runs in API mode: the builder adds the ``api`` source to ``pod_config``, and
    node status, lease, events, objects and tokens come from the API server.
    """

    runtime: Runtime
    pod_config: PodConfig
    sources: Sequence[PodSource] = ()
    clock: WallClock = attrs.Factory(WallClock)
    run_sync: RunSync = run_in_thread  # small file operations (see kubelet_trio.fsio)
    metrics: KubeletMetrics = attrs.Factory(KubeletMetrics)
    instrument_runtime: bool = False  # time every CRI call into ``metrics`` (the daemon does)
    allocatable: NodeAllocatable | None = None  # None: the machine's CPUs and memory
    host_stats: HostSampler = read_host_sample  # the node's CPU/memory/fs counters (tests: fixed ones)
    cgroup_fs_root: str = CGROUP_ROOT  # where pod cgroups are made (tests: a stand-in tree)
    configz: Mapping[str, Any] | None = None  # /configz (kubelet_trio.configz.configz_body(options))
    event_sink: EventSink | None = None  # standalone: where pod events go (API mode: the API server)
    api_client: ApiClient | None = None  # API mode when set
    api_options: ApiModeOptions = attrs.Factory(ApiModeOptions)
    # Standalone only: a client for the Kubelet API's webhooks without the rest of API mode (tests)
    webhook_client: ApiClient | None = None
    # eviction signals (None: simulated ones without pressure on a runtime whose containers use no real
    # resources, see RuntimeCapabilities.simulated; else this machine's); an image GC the eviction
    # manager reclaims disk with
    eviction_signals: SignalSource | None = None
    image_gc: ImageGC | None = None
    image_fs: ImageFsStatsProvider | None = None  # image GC's disk figures; None: statvfs (real runtimes)
    # the registered credential provider plugins (--image-credential-provider-config and -bin-dir, read by
    # kubelet_trio.credentialprovider.register_credential_provider_plugins); with the node's docker config
    # file (looked for from config.root_dir) they make the node keyring every image pull may use
    credential_providers: Sequence[PluginProvider] = ()


@attrs.frozen
class KubeletNode:
    """A built node: the Kubelet and, in API mode, its API-mode components."""

    kubelet: Kubelet
    api: ApiMode | None = None
    components: tuple[Component, ...] = ()  # the node's own beyond the Kubelet's managers (plugin registry)

    async def run(self, *, task_status: trio.TaskStatus[Kubelet] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the Kubelet, with the node's and API mode's components in its tree; reports started once
        all are up."""
        components = (*self.components, *(self.api.components() if self.api is not None else ()))
        await self.kubelet.run(components=components, task_status=task_status)


def build_kubelet(config: KubeletConfig, deps: KubeletDeps) -> KubeletNode:
    """Build a node, not yet running (:func:`open_kubelet` runs it)."""
    clock, run_sync, metrics = deps.clock, deps.run_sync, deps.metrics
    if not config.node_ips:
        config = attrs.evolve(config, node_ips=default_node_ips())
    metrics.set_node_name(config.node_name)

    # The runtime (every call timed, when asked) and what it can do beyond the CRI
    capabilities = runtime_capabilities(deps.runtime)
    runtime = deps.runtime
    if deps.instrument_runtime:
        runtime = InstrumentedRuntime(runtime, metrics.observe_runtime_operation)
    allocatable = deps.allocatable if deps.allocatable is not None else read_node_allocatable(config.root_dir)
    calls = _KubeletCalls(runtime, clock)  # how the parts below call the Kubelet back (bound once it exists)

    # Standalone or API mode. API mode: the api pod source, and the components that do not read the
    # Kubelet's pods (events, node status, lease, objects, tokens, RuntimeClasses, admission)
    sources = list(deps.sources)
    api: ApiModeParts | None = None
    if deps.api_client is not None:
        from kubelet_trio.apimode import build_api_mode_parts

        client = deps.api_client
        if client.metrics is None:
            client.metrics = metrics  # rest_client_* on this node's /metrics
        if client.boundary_errors is None:
            client.boundary_errors = metrics.boundary_errors  # what its reflectors contain
        api = build_api_mode_parts(
            client,
            deps.pod_config,
            config,
            deps.api_options,
            clock=clock,
            run_sync=run_sync,
            boundary_errors=metrics.boundary_errors,
            node_host=calls,
        )
        sources.append(api.source)
    event_sink = api.recorder.record if api is not None else deps.event_sink
    node_event_sink = api.recorder.record_node if api is not None else None
    pod_events = functools.partial(record_pod_event, event_sink)
    node_events = functools.partial(record_node_event, node_event_sink)
    objects = api.objects if api is not None else NO_OBJECTS

    # The node's state
    cache = PodCache()
    pod_manager = PodManager()
    status_manager = StatusManager()

    # Plugins that register through <root_dir>/plugins_registry (CSI drivers), and the volumes from outside
    # the node (claims, inline CSI volumes) they and API mode's persistent volumes provide
    mounter = SystemMounter()
    components: list[Component] = []
    external_volumes: ExternalVolumes | None = None
    if config.plugin_registry or api is not None:
        external_volumes, plugin_components = _build_volume_plugins(config, api, mounter, run_sync, metrics)
        components += plugin_components

    # The managers
    probe_manager = ProbeManager(
        runtime=runtime,
        status_provider=status_manager.get,
        cache=cache,
        clock=clock,
        events=pod_events,
        metrics=metrics,
        initial_jitter=config.probe_start_jitter,
    )
    volume_manager = VolumeManager(
        root_dir=config.root_dir,
        run_sync=run_sync,
        objects=objects,
        allocatable=allocatable,
        events=pod_events,
        memory_backed=config.memory_backed_volumes,
        tokens=api.tokens if api is not None else None,
        on_operation=metrics.observe_storage_operation,
        mounter=mounter,
        external=external_volumes,
    )
    metrics.track_volumes(volume_manager.volume_counts)
    device_manager: DeviceManager | None = None
    if config.device_plugins:
        from kubelet_trio.cm.devicemanager import DeviceManager  # grpclib: only with device plugins

        device_manager = DeviceManager(
            config.root_dir,
            boundary_errors=metrics.boundary_errors,
            run_sync=run_sync,
            pods=pod_manager.pods,  # and the pod resources API is served
            active_pods=calls.active_pods,
            sources_ready=calls.sources_ready,
        )
    container_manager: ContainerManager | None = None  # pod cgroups, and system OOMs as Node events
    oom_watcher: OOMWatcher | None = None
    if config.cgroups is not None and config.cgroups.cgroups_per_qos:
        from kubelet_trio.cm.container_manager import ContainerManager
        from kubelet_trio.cm.oom_watcher import OOMWatcher

        container_manager = ContainerManager(
            config=config.cgroups,
            active_pods=calls.active_pods,
            runtime=runtime,
            record_node_event=node_events,
            observe_operation=metrics.observe_cgroup_operation,
            cgroup_fs_root=deps.cgroup_fs_root,
            run_sync=run_sync,
        )
        oom_watcher = OOMWatcher(record=node_events)
    stats_provider = CriStatsProvider(
        runtime,
        config.node_name,
        config.root_dir,
        config.pod_logs_dir,
        clock=clock,
        run_sync=run_sync,
        host=deps.host_stats,
        claim_usage=external_volumes.claim_usage if external_volumes is not None else None,
        system_cgroups={"pods": container_manager.node_allocatable_paths} if container_manager else {},
        cgroup_root=deps.cgroup_fs_root,
    )
    kube_runtime = KubeRuntimeManager(
        runtime,
        node_name=config.node_name,
        clock=clock,
        pod_logs_dir=config.pod_logs_dir,
        run_sync=run_sync,
        events=pod_events,
        probe_results=probe_manager.results,
        on_container_started=probe_manager.container_started,
        on_container_stopped=probe_manager.container_stopped,
        hooks=HandlerRunner(runtime=runtime, pod_ips=calls.pod_ips),
        run_options=_with_devices(
            RunOptionsGenerator(
                root_dir=config.root_dir,
                volumes=volume_manager,
                host_ips=config.node_ips,
                cluster_domain=config.cluster_domain,
                objects=objects,
                allocatable=allocatable,
                run_sync=run_sync,
                services=api.services if api is not None else None,
            ),
            device_manager,
        ),
        dns_config=DnsConfigurer(
            cluster_dns=config.cluster_dns,
            cluster_domain=config.cluster_domain,
            resolv_conf=config.resolv_conf,
            node_ips=config.node_ips,
            events=pod_events,
            run_sync=run_sync,
        ).pod_dns_config,
        runtime_classes=api.runtime_classes if api is not None else None,
        keyring=node_keyring(config.root_dir, deps.credential_providers, run_sync=run_sync),
        serialize_image_pulls=config.serialize_image_pulls,
        max_parallel_image_pulls=config.max_parallel_image_pulls,
        registry_pull_qps=config.registry_pull_qps,
        registry_burst=config.registry_burst,
        pod_cgroup_parent=container_manager.pod_cgroup_parent if container_manager is not None else None,
        pod_cgroups=container_manager.pods if container_manager is not None else None,
        checkpoint_dir=config.root_dir,
        memory_capacity=allocatable.oom_memory_capacity,
    )
    # In-place resize (Go: allocation.NewManager): resizes fit against the Node (API mode) or this
    # machine's allocatable (standalone)
    allocation_manager = AllocationManager(
        checkpoint_dir=config.root_dir,
        admit=api.admit if api is not None else standalone_resize_fit(config.node_name, allocatable),
        active_pods=calls.active_pods,
        pod_by_uid=pod_manager.get,
        trigger_sync=lambda pod: calls.request_sync(pod.uid),
        now=lambda: format_time(clock.now()),
        events=pod_events,
        sources_ready=calls.sources_ready,
    )
    pleg = GenericPLEG(
        kube_runtime,
        cache,
        relist_period=config.pleg_relist_period,
        relist_threshold=config.pleg_relist_threshold,
        on_relist=metrics.observe_relist,
        change_token=capabilities.change_token,
    )
    pod_workers = PodWorkers(
        calls,
        cache,
        resync_interval=config.sync_frequency,
        jitter=config.jitter,
        on_sync_duration=metrics.observe_pod_worker,
        inspect=calls.refresh_cache,
    )
    image_gc_manager = ImageGCManager(
        runtime,
        deps.image_fs or StatvfsImageFs(runtime, run_sync),
        ImageGCPolicy(
            config.image_gc_high_threshold_percent,
            config.image_gc_low_threshold_percent,
            config.image_minimum_gc_age,
        ),
        events=node_events,
        keep=(config.pod_infra_container_image,) if config.pod_infra_container_image else (),
    )
    shutdown_manager = NodeShutdownManager.from_settings(
        config.shutdown_grace_period,
        config.shutdown_grace_period_critical_pods,
        active_pods=calls.active_pods,
        terminator=calls,
        events=node_events,
    )
    if deps.eviction_signals is not None:
        signals: SignalSource = deps.eviction_signals
    elif capabilities.simulated:
        signals = SimulatedSignals()
    else:
        signals = HostSignals(
            config.root_dir,
            runtime=runtime,
            run_sync=run_sync,
            pods_cgroup=container_manager.node_allocatable_paths if container_manager is not None else None,
            cgroup_root=deps.cgroup_fs_root,
        )
    eviction_manager = EvictionManager(
        config=EvictionConfig(
            thresholds=parse_thresholds(
                config.eviction_hard,
                config.eviction_soft,
                config.eviction_soft_grace_period,
                config.eviction_minimum_reclaim,
                enforce_node_allocatable=container_manager is not None
                and PODS_ENFORCEMENT_KEY in container_manager.config.enforce_node_allocatable,
            ),
            pressure_transition_period=config.eviction_pressure_transition_period,
            max_pod_grace_period=config.eviction_max_pod_grace_period,
        ),
        signals=signals,
        usage=StatsPodUsage(stats_provider),
        killer=calls,
        # Go getAllocatedPods: pods are ranked by the requests they were admitted with, not a pending resize
        active_pods=lambda: allocation_manager.allocated_pods(calls.active_pods()),
        wait_cleaned_up=pod_workers.wait_finished,
        pod_events=pod_events,
        node_events=node_events,
        container_gc=calls,
        image_gc=deps.image_gc or image_gc_manager,
    )
    metrics.track_evictions(eviction_manager.evictions)
    container_log_manager = ContainerLogManager(
        runtime=runtime,
        policy=LogRotatePolicy(config.container_log_max_size, config.container_log_max_files),
        monitor_interval=config.container_log_monitor_interval,
        clock=clock,
        run_sync=run_sync,
        running_containers=lambda: (
            c.id for p in pleg.pods() for c in p.containers if c.state is ContainerState.RUNNING
        ),
    )

    # The Kubelet, on all of the above
    kubelet = Kubelet(
        config=config,
        runtime=runtime,
        clock=clock,
        run_sync=run_sync,
        metrics=metrics,
        pod_config=deps.pod_config,
        pod_sources=tuple(sources),
        cache=cache,
        pod_manager=pod_manager,
        status_manager=status_manager,
        probe_manager=probe_manager,
        volume_manager=volume_manager,
        kube_runtime=kube_runtime,
        pleg=pleg,
        pod_workers=pod_workers,
        stats_provider=stats_provider,
        image_gc_manager=image_gc_manager,
        shutdown_manager=shutdown_manager,
        eviction_manager=eviction_manager,
        container_log_manager=container_log_manager,
        device_manager=device_manager,
        allocation_manager=allocation_manager,
        container_manager=container_manager,
        oom_watcher=oom_watcher,
        sysctls=SysctlAllowlist.build(config.allowed_unsafe_sysctls),
        event_sink=event_sink,
        node_event_sink=node_event_sink,
        forget_pod_events=api.recorder.forget_pods if api is not None else None,
        admit=api.admit if api is not None else admit_standalone,
        count_pods=api is None,  # API mode: the predicates count pods against the Node's allocatable
        api_client=api.client if api is not None else deps.webhook_client,
        object_store=objects,
        object_prefetch=api.objects.ensure_pod if api is not None else None,
        allocatable=allocatable,
        serve_http=functools.partial(_serve_http, config=config, configz=deps.configz),
    )
    calls.bind(kubelet)
    if api is None:
        return KubeletNode(kubelet, components=tuple(components))

    # API mode's components that read the Kubelet's pods
    from kubelet_trio.apimode import build_api_mode

    mode = build_api_mode(
        api,
        deps.api_options,
        node_name=config.node_name,
        statuses=status_manager,
        pods=pod_manager,
        workers=pod_workers,
        sources_ready=lambda: kubelet.sources_ready,
    )
    return KubeletNode(kubelet, mode, components=tuple(components))


def _build_volume_plugins(
    config: KubeletConfig,
    api: ApiModeParts | None,
    mounter: SystemMounter,
    run_sync: RunSync,
    metrics: KubeletMetrics,
) -> tuple[ExternalVolumes, list[Component]]:
    """The CSI drivers' registration (with ``plugin_registry``), the node's CSI record in the API (API
    mode) and the set-up of claims and CSI volumes; with the components that run them, in start order."""
    from kubelet_trio.aiobridge import SharedAsyncioThread
    from kubelet_trio.volume.csi import CsiDrivers, CsiRegistrationHandler, NodeInfoManager
    from kubelet_trio.volume.csi.plugin import CsiVolumePlugin
    from kubelet_trio.volume.persistent import ExternalVolumes

    bridge = SharedAsyncioThread()  # gRPC to the plugins, started at the first call
    drivers = CsiDrivers()
    components: list[Component] = [bridge]
    node_info = NodeInfoManager(api.client, config.node_name) if api is not None else None
    if config.plugin_registry:
        from kubelet_trio.pluginmanager import CSI_PLUGIN, PLUGINS_REGISTRY, PluginManager

        plugins = PluginManager(
            os.path.join(config.root_dir, PLUGINS_REGISTRY),
            run_sync=run_sync,
            boundary_errors=metrics.boundary_errors,
            bridge=bridge,
        )
        plugins.add_handler(CSI_PLUGIN, CsiRegistrationHandler(drivers, bridge, node_info))
        if node_info is not None:
            components.append(node_info)  # the CSINode, before drivers are added to it
        components.append(plugins)
    volumes = CsiVolumePlugin(
        root_dir=config.root_dir,
        node_name=config.node_name,
        drivers=drivers,
        bridge=bridge,
        is_mount_point=mounter.is_mount_point,
        run_sync=run_sync,
    )
    external = ExternalVolumes(api=api.client if api is not None else None, csi=volumes)
    components.append(external)  # measures the persistent volumes for kubelet_volume_stats_*
    metrics.track_volume_stats(external.measured)
    return external, components


@attrs.define(eq=False)
class _KubeletCalls:
    """The Kubelet as its own parts call it once it runs (see the module docstring).

    It serves the pod workers (:class:`~kubelet_trio.pod_workers.PodSyncer`), the eviction and shutdown
    managers (killing pods, the active pods, container GC), the device manager, lifecycle hooks and node
    status (:class:`~kubelet_trio.nodestatus.NodeHost`). :func:`build_kubelet` binds it right after the
    Kubelet is built; a call before that is a bug in the builder and raises.
    """

    runtime: Runtime
    clock: WallClock
    _kubelet: Kubelet | None = None

    def bind(self, kubelet: Kubelet) -> None:
        if self._kubelet is not None:
            raise RuntimeError("the Kubelet is bound already")
        self._kubelet = kubelet

    @property
    def kubelet(self) -> Kubelet:
        if self._kubelet is None:
            raise RuntimeError("the Kubelet is called before it is built")
        return self._kubelet

    # the pod workers
    async def sync_pod(self, update_type: UpdateType, pod: Pod, status: PodStatus) -> bool:
        return await self.kubelet.sync_pod(update_type, pod, status)

    async def sync_terminating_pod(self, pod: Pod, status: PodStatus, grace_period: int) -> None:
        await self.kubelet.sync_terminating_pod(pod, status, grace_period)

    async def sync_terminating_runtime_pod(self, running_pod: RuntimePod) -> None:
        await self.kubelet.sync_terminating_runtime_pod(running_pod)

    async def sync_terminated_pod(self, pod: Pod, status: PodStatus) -> None:
        await self.kubelet.sync_terminated_pod(pod, status)

    async def refresh_cache(self, pod: Pod) -> PodStatus | None:
        return await self.kubelet._refresh_cache(pod)

    # the eviction and shutdown managers, the device manager
    async def terminate_pod_abnormally(
        self, pod: Pod, *, grace_period: int, reason: str, message: str, evict: bool = False
    ) -> None:
        await self.kubelet.terminate_pod_abnormally(
            pod, grace_period=grace_period, reason=reason, message=message, evict=evict
        )

    async def delete_all_unused_containers(self) -> None:
        await self.kubelet.delete_all_unused_containers()

    def active_pods(self) -> list[Pod]:
        return self.kubelet.active_pods()

    def request_sync(self, uid: str) -> None:
        self.kubelet.request_sync(uid)

    def sources_ready(self) -> bool:
        return self.kubelet.sources_ready

    # lifecycle hooks
    async def pod_ips(self, pod: Pod) -> tuple[str, ...]:
        return await self.kubelet._pod_ips(pod)

    # node status
    def health_errors(self) -> list[str]:
        return self.kubelet.health_errors()

    def node_pressure(self) -> frozenset[str]:
        return self.kubelet.node_pressure()

    def extended_resources(self) -> tuple[dict[str, str], dict[str, str]]:
        return self.kubelet.extended_resources()

    async def extended_resources_changed(self) -> None:
        await self.kubelet.extended_resources_changed()


def _with_devices(options: RunOptionsProvider, manager: DeviceManager | None) -> RunOptionsProvider:
    """``options`` plus what device plugins add (Go: ``GetResources`` before the kubelet's own envs
    and mounts, so a container's own env var of the same name wins)."""
    if manager is None:
        return options

    async def with_devices(pod: Pod, container: Container, pod_ip: str) -> RunContainerOptions:
        base = await options(pod, container, pod_ip)
        devices = await manager.container_options(pod, container)
        if devices.empty:
            return base
        return attrs.evolve(
            base,
            envs=devices.envs + base.envs,
            mounts=devices.mounts + base.mounts,
            devices=devices.devices,
            annotations=devices.annotations,
            cdi_devices=devices.cdi_devices,
        )

    return with_devices


async def _serve_http(
    kubelet: HostInterface,
    *,
    config: KubeletConfig,
    configz: Mapping[str, Any] | None,
    task_status: trio.TaskStatus[dict[str, str]],
) -> None:
    """:func:`kubelet_trio.server.serve.serve_kubelet_http`, imported only for a node that serves HTTP."""
    if not (config.healthz_port or config.read_only_port or config.port):
        task_status.started({})  # every server off: what serve_kubelet_http reports, without its imports
        return
    from kubelet_trio.server.serve import serve_kubelet_http

    await serve_kubelet_http(kubelet, configz=configz, task_status=task_status)


@contextlib.asynccontextmanager
async def open_kubelet(config: KubeletConfig, deps: KubeletDeps) -> AsyncIterator[KubeletNode]:
    """Build the node and run it until the block exits; yields once every component is up."""
    node = build_kubelet(config, deps)
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        yield node
        nursery.cancel_scope.cancel()
