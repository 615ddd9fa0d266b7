"""API mode: the pieces that connect a node to a Kubernetes API server, composed in one place.

:func:`kubelet_trio.kubelet_builder.open_kubelet` uses it when its dependencies carry an API client; the
pod source must exist before the :class:`~kubelet_trio.kubelet.Kubelet` (it feeds the PodConfig) and the
other components need the Kubelet, so :func:`build_api_mode` runs while the Kubelet is built (it is the
Kubelet's extension, called once from its constructor) and returns what the Kubelet plugs in.

:func:`build_api_mode` makes the components added to the Kubelet's tree: the event recorder (the
Kubelet's event sink), node registration and status, the node Lease, the pod status publisher and
the mirror-pod manager; it makes ConfigMaps and Secrets come from the API server
(:class:`~kubelet_trio.apiobjects.ApiObjectStore`, fetched at the start of each pod sync, cached for
``object_cache_ttl``) and projected service account tokens from the TokenRequest API
(:class:`~kubelet_trio.token.TokenManager`); pods' ``runtimeClassName`` is resolved to a CRI runtime
handler through an informer over RuntimeClasses (:class:`~kubelet_trio.runtimeclass.RuntimeClassManager`);
and it turns on admission against the Node's allocatable (:mod:`kubelet_trio.lifecycle.predicate`).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from kubelet_trio import defaults, version

if TYPE_CHECKING:  # the components themselves are imported by the functions that build them
    from kubelet_trio.api import Pod
    from kubelet_trio.apiobjects import ApiObjectStore, WatchingObjectStore
    from kubelet_trio.boundary import BoundaryErrors
    from kubelet_trio.client import ApiClient, TokenBucket
    from kubelet_trio.client.reflector import ObjectReflector
    from kubelet_trio.config.apiserver import ApiserverSource
    from kubelet_trio.config.podconfig import PodConfig
    from kubelet_trio.events import EventRecorder
    from kubelet_trio.kubelet import Kubelet, KubeletExtension
    from kubelet_trio.lifecycle.predicate import NodeView, PredicateAdmitHandler
    from kubelet_trio.nodelease import NodeLeaseController
    from kubelet_trio.nodestatus import MachineInfo, NodeStatusManager
    from kubelet_trio.pod.mirror import MirrorPodManager
    from kubelet_trio.runtimeclass import RuntimeClassManager
    from kubelet_trio.status.sync import StatusPublisher
    from kubelet_trio.token import TokenManager

__all__ = [
    "KUBELET_VERSION",
    "ApiMode",
    "ApiModeOptions",
    "api_pod_source",
    "build_api_mode",
    "open_kubeconfig_client",
]

#: The Kubernetes version whose kubelet behaviour this follows, tagged with ours (``kubeletVersion``).
KUBELET_VERSION = version.KUBELET_VERSION  # the one declaration: kubelet_trio.version


@attrs.frozen
class ApiModeOptions:
    """Node registration and reporting settings (the KubeletConfiguration fields of the same names)."""

    register_node: bool = True
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


@attrs.define(eq=False)
class ApiMode:
    client: ApiClient
    source: ApiserverSource
    recorder: EventRecorder
    node_status: NodeStatusManager
    lease: NodeLeaseController
    publisher: StatusPublisher
    mirrors: MirrorPodManager
    objects: ApiObjectStore | WatchingObjectStore
    tokens: TokenManager
    node_informer: ObjectReflector
    runtime_classes: RuntimeClassManager
    admit: PredicateAdmitHandler

    def extension(self) -> KubeletExtension:
        """What the Kubelet plugs in: the components in start order and the API-backed collaborators."""
        from kubelet_trio.apiobjects import WatchingObjectStore
        from kubelet_trio.kubelet import KubeletExtension

        components: list[Any] = [
            self.recorder,
            self.node_status,
            self.node_informer,
            self.runtime_classes,
            self.lease,
            self.publisher,
            self.mirrors,
            self.tokens,
        ]
        if isinstance(self.objects, WatchingObjectStore):
            components.append(self.objects)
        return KubeletExtension(
            components=tuple(components),
            event_sink=self.recorder.record,
            admit=self.admit,
            api_client=self.client,  # the Kubelet API's TokenReview and SubjectAccessReview webhooks
            object_store=self.objects,
            object_prefetch=self.objects.ensure_pod,
            tokens=self.tokens,
            runtime_classes=self.runtime_classes,
            node_event_sink=self.recorder.record_node,
        )


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


@attrs.define(eq=False)
class _KubeletPods:
    """The mirror-pod manager's view of the kubelet."""

    kubelet: Kubelet

    @property
    def sources_ready(self) -> bool:
        return self.kubelet.sources_ready

    def static_pods(self) -> list[Pod]:
        return [p for p in self.kubelet.pod_manager.pods() if p.is_static]

    def is_termination_requested(self, uid: str) -> bool:
        return self.kubelet.pod_workers.is_termination_requested(uid)


def build_api_mode(
    kubelet: Kubelet, client: ApiClient, source: ApiserverSource, options: ApiModeOptions | None = None
) -> ApiMode:
    """The API-mode components for ``kubelet``, which is being built (it is only referenced here, never
    changed: :meth:`ApiMode.extension` is what the Kubelet's constructor plugs in)."""
    from kubelet_trio.client import TokenBucket
    from kubelet_trio.client.reflector import ObjectReflector
    from kubelet_trio.events import EventRecorder
    from kubelet_trio.lifecycle.predicate import NodeView, PredicateAdmitHandler
    from kubelet_trio.nodelease import NodeLeaseController
    from kubelet_trio.nodestatus import NodeStatusConfig, NodeStatusManager
    from kubelet_trio.pod.mirror import MirrorPodManager
    from kubelet_trio.runtimeclass import RuntimeClassManager
    from kubelet_trio.status.sync import StatusPublisher
    from kubelet_trio.token import TokenManager

    options = options or ApiModeOptions()
    node_name = kubelet.config.node_name
    # Go gives events a client of their own (eventRecordQPS/eventBurst): a burst of events never makes
    # status updates wait for the API client's tokens.
    events_limiter = options.event_limiter or TokenBucket(options.event_record_qps, options.event_burst)
    recorder = EventRecorder(attrs.evolve(client, limiter=events_limiter), node_name, kubelet.clock)
    node_status = NodeStatusManager(
        client,
        kubelet,
        NodeStatusConfig(
            node_name=node_name,
            kubelet_version=KUBELET_VERSION,
            hostname=options.hostname,
            node_ips=kubelet.config.node_ips,
            node_labels=dict(options.node_labels),
            register_with_taints=tuple(options.register_with_taints),
            register_schedulable=options.register_schedulable,
            max_pods=options.max_pods,
            kubelet_port=options.kubelet_port,
            kube_reserved=dict(options.kube_reserved),
            system_reserved=dict(options.system_reserved),
            eviction_hard=dict(options.eviction_hard),
        ),
        root_dir=kubelet.config.root_dir,
        machine=options.machine,
        register=options.register_node,
        update_frequency=options.node_status_update_frequency,
        report_frequency=options.node_status_report_frequency,
        events=recorder.record_node,
        run_sync=kubelet.run_sync,
    )

    def node_uid() -> str | None:
        return node_status.node_uid

    lease = NodeLeaseController(
        client,
        node_name,
        kubelet.clock,
        node_uid,
        lease_duration_seconds=options.node_lease_duration_seconds,
        renew_interval=options.node_lease_duration_seconds * 0.25,
    )
    publisher = StatusPublisher(
        client, kubelet, mirror_pods=lambda: source.mirror_pods.value, sync_period=options.status_sync_period
    )
    mirrors = MirrorPodManager(
        client,
        node_name,
        _KubeletPods(kubelet),
        source.mirror_pods,
        node_uid,
        period=options.mirror_pod_period,
    )

    def node_view() -> NodeView | None:
        node = node_status.current_node()
        return NodeView.from_node(node) if node is not None else None

    # The node informer: labels and taints others set reach admission, annotations the object cache.
    node_informer = ObjectReflector(
        client,
        "/api/v1/nodes",
        node_name,
        on_change=node_status.observe,
        boundary_errors=kubelet.metrics.boundary_errors,
    )
    objects = _object_store(client, options, kubelet.config.sync_frequency, node_status)
    tokens = TokenManager(client=client, clock=kubelet.clock)
    runtime_classes = RuntimeClassManager(client)
    recorder.record_node("Normal", "Starting", "Starting kubelet.")
    return ApiMode(
        client,
        source,
        recorder,
        node_status,
        lease,
        publisher,
        mirrors,
        objects,
        tokens,
        node_informer,
        runtime_classes,
        PredicateAdmitHandler(node_view),
    )


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
