"""API mode: the components that connect a node to a Kubernetes API server.

:func:`kubelet_trio.kubelet_builder.build_kubelet` builds them, in two steps around the Kubelet, when its
dependencies carry an API client (standalone vs API mode is decided there and nowhere else):

- :func:`build_api_mode_parts`, before the Kubelet: the ``api`` pod source (it feeds the PodConfig), the
  event recorder (where pod and node events go), node registration and status with the Node informer, the
  node Lease, ConfigMaps and Secrets from the API server (:class:`~kubelet_trio.apiobjects.ApiObjectStore`,
  fetched at the start of each pod sync, cached for ``object_cache_ttl``), projected service account tokens
  from the TokenRequest API (:class:`~kubelet_trio.token.TokenManager`), RuntimeClasses resolved through an
  informer (:class:`~kubelet_trio.runtimeclass.RuntimeClassManager`), and admission against the Node's
  allocatable (:mod:`kubelet_trio.lifecycle.predicate`). The Kubelet's parts are built from these values.
  Node status reads the Kubelet's health only once running, through a view the builder gives it, so it
  exists before the Kubelet and admission can read the Node from it.
- :func:`build_api_mode`, after the Kubelet: the two components that read the pods it holds, the pod
  status publisher and the mirror-pod manager, each from a narrow view.

:meth:`ApiMode.components` is what :meth:`~kubelet_trio.kubelet.Kubelet.run` starts in its tree.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from kubelet_trio import defaults, version

if TYPE_CHECKING:  # the components themselves are imported by the functions that build them
    from collections.abc import Callable

    from kubelet_trio.api import Pod
    from kubelet_trio.apiobjects import ApiObjectStore, WatchingObjectStore
    from kubelet_trio.boundary import BoundaryErrors
    from kubelet_trio.client import ApiClient, TokenBucket
    from kubelet_trio.client.reflector import ObjectReflector
    from kubelet_trio.clock import WallClock
    from kubelet_trio.config.apiserver import ApiserverSource
    from kubelet_trio.config.podconfig import PodConfig
    from kubelet_trio.events import EventRecorder
    from kubelet_trio.fsio import RunSync
    from kubelet_trio.kubelet import Component, KubeletConfig
    from kubelet_trio.lifecycle.predicate import NodeView, PredicateAdmitHandler
    from kubelet_trio.nodelease import NodeLeaseController
    from kubelet_trio.nodestatus import MachineInfo, NodeHost, NodeStatusManager
    from kubelet_trio.pod.manager import PodManager
    from kubelet_trio.pod.mirror import MirrorPodManager
    from kubelet_trio.pod_workers import PodWorkers
    from kubelet_trio.runtimeclass import RuntimeClassManager
    from kubelet_trio.serviceinformer import ServiceInformer
    from kubelet_trio.status.manager import StatusManager
    from kubelet_trio.status.sync import StatusPublisher
    from kubelet_trio.token import TokenManager

__all__ = [
    "KUBELET_VERSION",
    "ApiMode",
    "ApiModeOptions",
    "ApiModeParts",
    "api_pod_source",
    "build_api_mode",
    "build_api_mode_parts",
    "open_kubeconfig_client",
]

#: The Kubernetes version whose kubelet behaviour this follows, tagged with ours (``kubeletVersion``).
KUBELET_VERSION = version.KUBELET_VERSION  # the one declaration: kubelet_trio.version


@attrs.frozen
class ApiModeOptions:
    """Node registration and reporting settings (the KubeletConfiguration fields of the same names)."""

    register_node: bool = defaults.REGISTER_NODE
    register_schedulable: bool = True
    node_labels: Mapping[str, str] = attrs.Factory(dict)
    register_with_taints: tuple[Mapping[str, Any], ...] = ()
    hostname: str | None = None
    max_pods: int = defaults.MAX_PODS
    kubelet_port: int = defaults.PORT
    kube_reserved: Mapping[str, str] = attrs.Factory(dict)
    system_reserved: Mapping[str, str] = attrs.Factory(dict)
    eviction_hard: Mapping[str, str] = defaults.EVICTION_HARD
    node_status_update_frequency: float = defaults.NODE_STATUS_UPDATE_FREQUENCY
    node_status_report_frequency: float = defaults.NODE_STATUS_REPORT_FREQUENCY
    node_lease_duration_seconds: int = defaults.NODE_LEASE_DURATION_SECONDS
    status_sync_period: float = 10.0
    event_record_qps: float = defaults.EVENT_RECORD_QPS
    event_burst: int = defaults.EVENT_BURST
    #: One event rate limit shared by several nodes (sim-nodes); None: a limit of this node's own from
    #: event_record_qps and event_burst.
    event_limiter: TokenBucket | None = None
    mirror_pod_period: float = 2.0
    # configMapAndSecretChangeDetectionStrategy: Watch, Cache (TTL: the Node's node.alpha.kubernetes.io/ttl
    # annotation, else object_cache_ttl, else the sync frequency) or Get
    object_strategy: str = defaults.CONFIG_MAP_AND_SECRET_CHANGE_DETECTION_STRATEGY
    object_cache_ttl: float | None = None
    machine: MachineInfo | None = None  # tests pin the machine; None reads /proc and friends


@attrs.frozen(kw_only=True)
class ApiModeParts:
    """The API-mode components built before the Kubelet (see :func:`build_api_mode_parts`)."""

    client: ApiClient
    source: ApiserverSource
    recorder: EventRecorder
    node_status: NodeStatusManager
    node_informer: ObjectReflector
    lease: NodeLeaseController
    objects: ApiObjectStore | WatchingObjectStore
    tokens: TokenManager
    runtime_classes: RuntimeClassManager
    admit: PredicateAdmitHandler
    services: ServiceInformer


@attrs.frozen(kw_only=True)
class ApiMode(ApiModeParts):
    """All of a node's API-mode components: the parts and the two built after the Kubelet."""

    publisher: StatusPublisher
    mirrors: MirrorPodManager

    def components(self) -> tuple[Component, ...]:
        """The long-lived ones, in the order the Kubelet starts them (after its pod workers)."""
        from kubelet_trio.apiobjects import WatchingObjectStore

        components: tuple[Component, ...] = (
            self.recorder,
            self.node_status,
            self.node_informer,
            self.runtime_classes,
            self.lease,
            self.publisher,
            self.mirrors,
            self.tokens,
            self.services,
        )
        if isinstance(self.objects, WatchingObjectStore):
            components += (self.objects,)
        return components


def api_pod_source(
    client: ApiClient,
    pod_config: PodConfig,
    node_name: str,
    *,
    rng: random.Random | None = None,
    boundary_errors: BoundaryErrors | None = None,
) -> ApiserverSource:
    """The ``api`` pod source (``pod_config`` must list ``"api"`` among its sources); what it contains
    of the server's input is counted in ``boundary_errors``."""
    from kubelet_trio.config.apiserver import ApiserverSource
    from kubelet_trio.config.types import API_SOURCE

    return ApiserverSource(
        client,
        node_name,
        pod_config.source_channel(API_SOURCE),
        rng=rng or random.Random(),
        boundary_errors=boundary_errors,
    )


def build_api_mode_parts(
    client: ApiClient,
    pod_config: PodConfig,
    config: KubeletConfig,
    options: ApiModeOptions,
    *,
    clock: WallClock,
    run_sync: RunSync,
    boundary_errors: BoundaryErrors,
    node_host: NodeHost,
) -> ApiModeParts:
    """The API-mode components that do not read the Kubelet's pods; ``pod_config`` gets the ``api``
    source, and node status reads ``node_host`` (the Kubelet, once it runs)."""
    from kubelet_trio.client import TokenBucket
    from kubelet_trio.client.reflector import ObjectReflector
    from kubelet_trio.config.types import API_SOURCE
    from kubelet_trio.events import EventRecorder
    from kubelet_trio.lifecycle.predicate import NodeView, PredicateAdmitHandler
    from kubelet_trio.nodelease import NodeLeaseController
    from kubelet_trio.nodestatus import NodeStatusConfig, NodeStatusManager
    from kubelet_trio.runtimeclass import RuntimeClassManager
    from kubelet_trio.serviceinformer import ServiceInformer
    from kubelet_trio.token import TokenManager

    node_name = config.node_name
    pod_config.add_source(API_SOURCE)
    source = api_pod_source(client, pod_config, node_name, boundary_errors=boundary_errors)
    # Go gives events a client of their own (eventRecordQPS/eventBurst): a burst of events never makes
    # status updates wait for the API client's tokens.
    events_limiter = options.event_limiter or TokenBucket(options.event_record_qps, options.event_burst)
    recorder = EventRecorder(attrs.evolve(client, limiter=events_limiter), node_name, clock)
    node_status = NodeStatusManager(
        client,
        node_host,
        NodeStatusConfig(
            node_name=node_name,
            kubelet_version=KUBELET_VERSION,
            hostname=options.hostname,
            node_ips=config.node_ips,
            node_labels=dict(options.node_labels),
            register_with_taints=tuple(options.register_with_taints),
            register_schedulable=options.register_schedulable,
            max_pods=options.max_pods,
            kubelet_port=options.kubelet_port,
            kube_reserved=dict(options.kube_reserved),
            system_reserved=dict(options.system_reserved),
            eviction_hard=dict(options.eviction_hard),
        ),
        root_dir=config.root_dir,
        machine=options.machine,
        register=options.register_node,
        update_frequency=options.node_status_update_frequency,
        report_frequency=options.node_status_report_frequency,
        events=recorder.record_node,
        run_sync=run_sync,
    )
    # The node informer: labels and taints others set reach admission, annotations the object cache.
    node_informer = ObjectReflector(
        client, "/api/v1/nodes", node_name, on_change=node_status.observe, boundary_errors=boundary_errors
    )
    lease = NodeLeaseController(
        client,
        node_name,
        clock,
        lambda: node_status.node_uid,
        lease_duration_seconds=options.node_lease_duration_seconds,
        renew_interval=options.node_lease_duration_seconds * 0.25,
    )

    def node_view() -> NodeView | None:
        node = node_status.current_node()
        return NodeView.from_node(node) if node is not None else None

    recorder.record_node("Normal", "Starting", "Starting kubelet.")
    return ApiModeParts(
        client=client,
        source=source,
        recorder=recorder,
        node_status=node_status,
        node_informer=node_informer,
        lease=lease,
        objects=_object_store(client, options, config.sync_frequency, node_status),
        tokens=TokenManager(client=client, clock=clock),
        runtime_classes=RuntimeClassManager(client),
        admit=PredicateAdmitHandler(node_view),
        services=ServiceInformer(client),
    )


@attrs.frozen
class _PodStatuses:
    """The status publisher's view: the statuses, the desired pods and the pod workers' states."""

    status_manager: StatusManager
    pod_manager: PodManager
    pod_workers: PodWorkers


@attrs.frozen
class _StaticPods:
    """The mirror-pod manager's view: the static pods and whether every pod source has spoken."""

    pods: PodManager
    workers: PodWorkers
    ready: Callable[[], bool]

    @property
    def sources_ready(self) -> bool:
        return self.ready()

    def static_pods(self) -> list[Pod]:
        return [p for p in self.pods.pods() if p.is_static]

    def is_termination_requested(self, uid: str) -> bool:
        return self.workers.is_termination_requested(uid)


def build_api_mode(
    parts: ApiModeParts,
    options: ApiModeOptions,
    *,
    node_name: str,
    statuses: StatusManager,
    pods: PodManager,
    workers: PodWorkers,
    sources_ready: Callable[[], bool],
) -> ApiMode:
    """``parts`` with the two components that read the Kubelet's pods: the status publisher and the
    mirror-pod manager (the Kubelet's status manager, pod manager and pod workers, and its
    ``sources_ready``)."""
    from kubelet_trio.pod.mirror import MirrorPodManager
    from kubelet_trio.status.sync import StatusPublisher

    source = parts.source
    publisher = StatusPublisher(
        parts.client,
        _PodStatuses(statuses, pods, workers),
        mirror_pods=lambda: source.mirror_pods.value,
        sync_period=options.status_sync_period,
    )
    mirrors = MirrorPodManager(
        parts.client,
        node_name,
        _StaticPods(pods, workers, sources_ready),
        source.mirror_pods,
        lambda: parts.node_status.node_uid,
        period=options.mirror_pod_period,
    )
    return ApiMode(**attrs.asdict(parts, recurse=False), publisher=publisher, mirrors=mirrors)


OBJECT_TTL_ANNOTATION = "node.alpha.kubernetes.io/ttl"
STRATEGIES = defaults.CHANGE_DETECTION_STRATEGIES


def _object_store(
    client: ApiClient, options: ApiModeOptions, sync_frequency: float, node_status: NodeStatusManager
) -> ApiObjectStore | WatchingObjectStore:
    from kubelet_trio.apiobjects import ApiObjectStore, WatchingObjectStore

    if options.object_strategy == "Watch":
        return WatchingObjectStore(client, idle_after=5 * sync_frequency)
    if options.object_strategy == "Get":
        return ApiObjectStore(client, ttl=0, keep_stale=False)
    if options.object_strategy != "Cache":
        raise ValueError(f"unknown configMapAndSecretChangeDetectionStrategy {options.object_strategy!r}")

    def node_ttl() -> float | None:
        """Go's ``GetObjectTTLFromNodeFunc``: whole seconds from the Node annotation."""
        node = node_status.node.value or {}
        value = ((node.get("metadata") or {}).get("annotations") or {}).get(OBJECT_TTL_ANNOTATION)
        try:
            return float(int(value)) if value is not None else None
        except ValueError:
            return None

    ttl = sync_frequency if options.object_cache_ttl is None else options.object_cache_ttl
    return ApiObjectStore(client, ttl=ttl, ttl_source=node_ttl)


@contextlib.asynccontextmanager
async def open_kubeconfig_client(
    path: str, *, qps: float = defaults.KUBE_API_QPS, burst: int = defaults.KUBE_API_BURST
) -> AsyncIterator[ApiClient]:
    """The daemon's API client from ``--kubeconfig`` (an unreadable kubeconfig is a RuntimeError, which
    the CLI reports in one line)."""
    from kubelet_trio.client import KubeConfigError, load_kubeconfig, open_api_client

    try:
        config = load_kubeconfig(path)
    except KubeConfigError as err:
        raise RuntimeError(f"--kubeconfig: {err}") from None
    async with open_api_client(config, qps=qps, burst=burst) as client:
        yield client
