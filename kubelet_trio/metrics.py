"""The kubelet's Prometheus metrics, with the Go kubelet's names (``pkg/kubelet/metrics/metrics.go``).

One :class:`KubeletMetrics` per :class:`~kubelet_trio.kubelet.Kubelet`, each with its own
``CollectorRegistry`` (no process-global registry: a test harness runs many nodes in one process).
Durations are measured on Trio's clock, so they are exact under ``MockClock``.

- ``kubelet_running_pods`` / ``kubelet_running_containers{container_state}``: computed from the PLEG's
  pod cache at scrape time (:meth:`KubeletMetrics.update_running`), as the Go PLEG does after a relist.
- ``kubelet_pod_start_duration_seconds``: from the first time the kubelet saw a pod (its
  ``kubernetes.io/config.seen`` annotation) until its phase first became Running
  (:meth:`KubeletMetrics.watch_pod_starts`).
- ``kubelet_pod_worker_duration_seconds{operation_type}``: each pod-worker sync, by work type
  (``sync``, ``terminating``, ``terminated``).
- ``kubelet_pleg_relist_duration_seconds`` / ``kubelet_pleg_relist_interval_seconds``.
- ``kubelet_runtime_operations_total`` / ``_duration_seconds`` / ``_errors_total{operation_type}``:
  fed by :class:`~kubelet_trio.cri.instrumented.InstrumentedRuntime`.
- ``kubelet_node_name{node}`` (always 1: dashboards count kubelets with ``sum(kubelet_node_name)``),
  ``process_*`` (:class:`~kubelet_trio.promtext.ProcessCollector` on this registry: several nodes in one
  process each report the same process) and client-go's ``rest_client_requests_total{code,method,host}`` /
  ``rest_client_request_duration_seconds{verb,host}``, fed by the API client
  (:class:`~kubelet_trio.client.metrics.RequestMetrics`).
- ``kubelet_node_config_error`` (always 0: this kubelet has no dynamic config to fail) and
  ``kubelet_evictions{eviction_signal}`` (read from the eviction manager's counts, present once a pod was
  evicted; Go's name has no ``_total``).
- ``storage_operation_duration_seconds{volume_plugin,operation_name,status,migrated}``: each volume
  set-up (``volume_mount``) and tear-down (``volume_unmount``) of the volume manager, and
  ``volume_manager_total_volumes{plugin_name,state}`` (desired and actual state of the world), present
  once a pod has a volume.
- ``kubelet_certificate_manager_{client,server}_ttl_seconds`` and the renewal error counters
  ``kubelet_certificate_manager_client_expiration_renew_errors`` /
  ``kubelet_server_expiration_renew_errors``, present for the certificate managers handed to
  :meth:`KubeletMetrics.track_certificates` (certificate rotation on).
- ``go_goroutines``: the number of Trio tasks of the run, the stand-in for goroutines that dashboards
  plot; a test harness running several nodes in one Trio run counts them all.
- ``kubelet_trio_boundary_errors_total{boundary}`` (this project's own): failures contained at a peer
  (:mod:`kubelet_trio.boundary`), present once one happened.
- ``/metrics/probes`` is a registry of its own, as in Go: ``prober_probe_total{probe_type,result,
  container,pod,namespace,pod_uid}``, ``prober_probe_duration_seconds`` and
  ``process_start_time_seconds``, fed by the probe workers
  (:class:`~kubelet_trio.prober.metrics.ProbeMetrics`).

Not served: ``kubelet_cgroup_manager_duration_seconds`` (this kubelet has no cgroup manager yet: pod
cgroups are the runtime's) and ``storage_operation_errors_total`` (gone from the Go kubelet too: a
failure is ``status="fail-unknown"`` on the duration).

A node whose servers do not serve ``/metrics`` (``--port 0 --read-only-port 0``) builds
``KubeletMetrics(enabled=False)``: every hook does nothing and :mod:`kubelet_trio.promtext` (the metric
types and the text format, as client_golang writes it) is never imported.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio

from kubelet_trio.boundary import BoundaryErrors
from kubelet_trio.config.types import CONFIG_FIRST_SEEN_ANNOTATION
from kubelet_trio.container.types import ContainerState

if TYPE_CHECKING:
    from kubelet_trio.api import Pod
    from kubelet_trio.container.cache import PodCache
    from kubelet_trio.pod_workers import WorkType
    from kubelet_trio.prober.results import ProbeKind, ProbeResult
    from kubelet_trio.promtext import CollectorRegistry, Counter, Gauge, Histogram, Metric, ProcessCollector
    from kubelet_trio.status.manager import StatusManager

__all__ = ["CONTENT_TYPE", "CertificateSource", "KubeletMetrics", "render_registry"]

logger = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DEF_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)  # client_golang's DefBuckets
POD_START_BUCKETS = (
    0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800,
    2700, 3600,
)  # fmt: skip
RUNTIME_OPERATION_BUCKETS = tuple(0.005 * 2.5**i for i in range(14))  # ExponentialBuckets(.005, 2.5, 14)
CONTAINER_STATES = tuple(state.value for state in ContainerState)
REST_CLIENT_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
#: Go's ``probeType.String()`` and ``probeResult*`` label values.
PROBE_TYPES = {"liveness": "Liveness", "readiness": "Readiness", "startup": "Startup"}
PROBE_RESULTS = {"Success": "successful", "Failure": "failed", "Unknown": "unknown"}
STORAGE_OPERATION_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600)
#: prometheus-client's default buckets, which this series has always had here (Go's: DefBuckets, and
#: ExponentialBucketsRange(0.01, 10, 10) since 1.31)
CGROUP_MANAGER_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)


class CertificateSource(Protocol):
    """What the certificate metrics read of a certificate manager."""

    @property
    def renew_errors(self) -> int: ...

    def expiration(self) -> dt.datetime | None: ...


class ClaimVolumeStats(Protocol):
    """What ``kubelet_volume_stats_*`` read of a claim-backed volume's usage."""

    @property
    def claim_namespace(self) -> str: ...

    @property
    def claim_name(self) -> str: ...

    @property
    def usage(
        self,
    ) -> Any: ...  # capacity_bytes, available_bytes, used_bytes, inodes, inodes_free, inodes_used


#: Go's volume stats collector: (series, help, usage field)
_VOLUME_STATS = (
    ("kubelet_volume_stats_capacity_bytes", "Capacity in bytes of the volume", "capacity_bytes"),
    ("kubelet_volume_stats_available_bytes", "Number of available bytes in the volume", "available_bytes"),
    ("kubelet_volume_stats_used_bytes", "Number of used bytes in the volume", "used_bytes"),
    ("kubelet_volume_stats_inodes", "Maximum number of inodes in the volume", "inodes"),
    ("kubelet_volume_stats_inodes_free", "Number of free inodes in the volume", "inodes_free"),
    ("kubelet_volume_stats_inodes_used", "Number of used inodes in the volume", "inodes_used"),
)


def _volume_stats(stats: list[ClaimVolumeStats]) -> Iterator[Metric]:
    """One series per claim (the first volume of a claim counts, as Go's collector de-duplicates)."""
    if not stats:
        return
    from kubelet_trio.promtext import GaugeMetricFamily

    seen: dict[tuple[str, str], ClaimVolumeStats] = {}
    for entry in stats:
        seen.setdefault((entry.claim_namespace, entry.claim_name), entry)
    for name, help_text, field in _VOLUME_STATS:
        family = GaugeMetricFamily(name, help_text, labels=["namespace", "persistentvolumeclaim"])
        for (namespace, claim), entry in sorted(seen.items()):
            value = getattr(entry.usage, field)
            if value is not None:
                family.add_metric([namespace, claim], value)
        yield family


def render_registry(registry: CollectorRegistry) -> bytes:
    """The text exposition format 0.0.4 of ``registry``."""
    from kubelet_trio.promtext import generate_latest

    return generate_latest(registry)


def _count_tasks(task: trio.lowlevel.Task) -> int:
    return 1 + sum(_count_tasks(child) for nursery in task.child_nurseries for child in nursery.child_tasks)


@attrs.define(eq=False)
class _NodeCollector:
    """Series read from the node's parts at scrape time: evictions, volumes, certificates, tasks."""

    evictions: Mapping[str, int] | None = None
    volumes: Callable[[], Mapping[tuple[str, str], int]] | None = None
    volume_stats: Callable[[], Iterable[ClaimVolumeStats]] | None = None
    client_certificate: CertificateSource | None = None
    server_certificate: CertificateSource | None = None

    def collect(self) -> Iterator[Metric]:
        from kubelet_trio.promtext import CounterMetricFamily, GaugeMetricFamily

        if self.evictions:  # Go's name has no _total
            evictions = CounterMetricFamily(
                "kubelet_evictions",
                "Cumulative number of pod evictions by eviction signal",
                labels=["eviction_signal"],
            )
            for signal, count in sorted(self.evictions.items()):
                evictions.add_metric([signal], count)
            yield evictions
        counts = self.volumes() if self.volumes is not None else {}
        if counts:
            volumes = GaugeMetricFamily(
                "volume_manager_total_volumes",
                "Number of volumes in Volume Manager",
                labels=["plugin_name", "state"],
            )
            for (plugin, state), count in sorted(counts.items()):
                volumes.add_metric([plugin, state], count)
            yield volumes
        yield from _volume_stats(list(self.volume_stats()) if self.volume_stats is not None else [])
        for source, kind, errors in (
            (self.client_certificate, "client", "kubelet_certificate_manager_client_expiration_renew_errors"),
            (self.server_certificate, "server", "kubelet_server_expiration_renew_errors"),
        ):
            if source is None:
                continue
            expiration = source.expiration()
            ttl = (expiration - dt.datetime.now(dt.UTC)).total_seconds() if expiration else float("inf")
            yield GaugeMetricFamily(
                f"kubelet_certificate_manager_{kind}_ttl_seconds",
                f"Seconds until the kubelet's {kind} certificate expires (negative once expired, +Inf "
                "when there is none).",
                ttl,
            )
            yield CounterMetricFamily(errors, "Counter of certificate renewal errors.", source.renew_errors)
        try:
            root = trio.lowlevel.current_root_task()
        except RuntimeError:  # rendered outside Trio
            return
        if root is None:
            return
        tasks = _count_tasks(root)
        yield GaugeMetricFamily(
            "go_goroutines", "Number of Trio tasks that currently exist (the stand-in for goroutines).", tasks
        )


@attrs.frozen
class _ProcessStartTime:
    """Only ``process_start_time_seconds`` (what Go registers next to the prober metrics)."""

    process: ProcessCollector

    def collect(self) -> Iterator[Metric]:
        return (m for m in self.process.collect() if m.name == "process_start_time_seconds")


@attrs.frozen
class _BoundaryErrorsCollector:
    """``kubelet_trio_boundary_errors_total{boundary}``, read from the node's :class:`BoundaryErrors`."""

    errors: BoundaryErrors

    def collect(self) -> Iterator[Metric]:
        if not self.errors.counts:
            return  # as a Go vector with no children: no HELP/TYPE either
        from kubelet_trio.promtext import CounterMetricFamily

        family = CounterMetricFamily(
            "kubelet_trio_boundary_errors_total",
            "Failures contained at a boundary where outside input arrives (the peer was closed).",
            labels=["boundary"],
        )
        for boundary, count in sorted(self.errors.counts.items()):
            family.add_metric([boundary], count)
        yield family


def _parse_seen(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    try:
        # RFC3339Nano: Python's fromisoformat handles at most 6 fractional digits.
        head, _, frac = value.rstrip("Z").partition(".")
        stamp = dt.datetime.fromisoformat(head).replace(tzinfo=dt.UTC)
        return stamp + dt.timedelta(microseconds=int((frac + "000000")[:6])) if frac else stamp
    except ValueError:
        return None


@attrs.define(eq=False)
class KubeletMetrics:
    """The node's metrics; with ``enabled=False`` (nothing serves them) the hooks record nothing."""

    enabled: bool = True
    #: Failures contained per peer (:mod:`kubelet_trio.boundary`); counted even when nothing serves them.
    boundary_errors: BoundaryErrors = attrs.Factory(BoundaryErrors)
    registry: CollectorRegistry = attrs.field(init=False)
    running_pods: Gauge = attrs.field(init=False)
    running_containers: Gauge = attrs.field(init=False)
    pod_start_duration: Histogram = attrs.field(init=False)
    pod_worker_duration: Histogram = attrs.field(init=False)
    pleg_relist_duration: Histogram = attrs.field(init=False)
    pleg_relist_interval: Histogram = attrs.field(init=False)
    runtime_operations: Counter = attrs.field(init=False)
    runtime_operations_duration: Histogram = attrs.field(init=False)
    runtime_operations_errors: Counter = attrs.field(init=False)
    node_name: Gauge = attrs.field(init=False)
    rest_client_requests: Counter = attrs.field(init=False)
    rest_client_request_duration: Histogram = attrs.field(init=False)
    node_config_error: Gauge = attrs.field(init=False)
    storage_operation_duration: Histogram = attrs.field(init=False)
    cgroup_manager_duration: Histogram = attrs.field(init=False)
    _node: _NodeCollector = attrs.Factory(_NodeCollector)
    probes_registry: CollectorRegistry = attrs.field(init=False)
    prober_probes: Counter = attrs.field(init=False)
    prober_probe_duration: Histogram = attrs.field(init=False)
    _started_pods: set[str] = attrs.Factory(set)
    _first_seen: dict[str, float] = attrs.Factory(dict)

    def __attrs_post_init__(self) -> None:
        if not self.enabled:
            return
        from kubelet_trio.promtext import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

        self.registry = r = CollectorRegistry()
        self.running_pods = Gauge(
            "kubelet_running_pods", "Number of pods that have a running pod sandbox", registry=r
        )
        self.running_containers = Gauge(
            "kubelet_running_containers",
            "Number of containers currently running",
            ["container_state"],
            registry=r,
        )
        self.pod_start_duration = Histogram(
            "kubelet_pod_start_duration_seconds",
            "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
            buckets=POD_START_BUCKETS,
            registry=r,
        )
        self.pod_worker_duration = Histogram(
            "kubelet_pod_worker_duration_seconds",
            "Duration in seconds to sync a single pod. Broken down by operation type: sync, terminating, "
            "terminated",
            ["operation_type"],
            buckets=DEF_BUCKETS,
            registry=r,
        )
        self.pleg_relist_duration = Histogram(
            "kubelet_pleg_relist_duration_seconds",
            "Duration in seconds for relisting pods in PLEG.",
            buckets=DEF_BUCKETS,
            registry=r,
        )
        self.pleg_relist_interval = Histogram(
            "kubelet_pleg_relist_interval_seconds",
            "Interval in seconds between relisting in PLEG.",
            buckets=DEF_BUCKETS,
            registry=r,
        )
        self.runtime_operations = Counter(
            "kubelet_runtime_operations_total",
            "Cumulative number of runtime operations by operation type.",
            ["operation_type"],
            registry=r,
        )
        self.runtime_operations_duration = Histogram(
            "kubelet_runtime_operations_duration_seconds",
            "Duration in seconds of runtime operations. Broken down by operation type.",
            ["operation_type"],
            buckets=RUNTIME_OPERATION_BUCKETS,
            registry=r,
        )
        self.runtime_operations_errors = Counter(
            "kubelet_runtime_operations_errors_total",
            "Cumulative number of runtime operation errors by operation type.",
            ["operation_type"],
            registry=r,
        )
        self.node_name = Gauge(
            "kubelet_node_name", "The node's name. The count is always 1.", ["node"], registry=r
        )
        self.node_config_error = Gauge(
            "kubelet_node_config_error",
            "This metric is true (1) if the node is experiencing a configuration-related error, false (0) "
            "otherwise.",
            registry=r,
        )
        self.storage_operation_duration = Histogram(
            "storage_operation_duration_seconds",
            "Storage operation duration",
            ["volume_plugin", "operation_name", "status", "migrated"],
            buckets=STORAGE_OPERATION_BUCKETS,
            registry=r,
        )
        self.cgroup_manager_duration = Histogram(
            "kubelet_cgroup_manager_duration_seconds",
            "Duration in seconds for cgroup manager operations. Broken down by method.",
            ["operation_type"],
            buckets=CGROUP_MANAGER_BUCKETS,
            registry=r,
        )
        r.register(ProcessCollector())
        r.register(_BoundaryErrorsCollector(self.boundary_errors))
        r.register(self._node)
        self.rest_client_requests = Counter(
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ["code", "method", "host"],
            registry=r,
        )
        self.rest_client_request_duration = Histogram(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
            ["verb", "host"],
            buckets=REST_CLIENT_BUCKETS,
            registry=r,
        )
        self.probes_registry = p = CollectorRegistry()
        p.register(_ProcessStartTime(ProcessCollector()))
        self.prober_probes = Counter(
            "prober_probe_total",
            "Cumulative number of a liveness, readiness or startup probe for a container by result.",
            ["probe_type", "result", "container", "pod", "namespace", "pod_uid"],
            registry=p,
        )
        self.prober_probe_duration = Histogram(
            "prober_probe_duration_seconds",
            "Duration in seconds for a probe response.",
            ["probe_type", "container", "pod", "namespace"],
            buckets=DEF_BUCKETS,
            registry=p,
        )
        for state in CONTAINER_STATES:
            self.running_containers.labels(state).set(0)

    # -- hooks -------------------------------------------------------------------------------------

    def set_node_name(self, name: str) -> None:
        """``kubelet_node_name{node=name} 1`` (set once when the node is built)."""
        if not self.enabled:
            return
        self.node_name.clear()
        self.node_name.labels(name).set(1)

    def track_evictions(self, evictions: Mapping[str, int]) -> None:
        """``kubelet_evictions`` reads ``evictions`` (the eviction manager's counts by signal)."""
        self._node.evictions = evictions

    def track_volumes(self, counts: Callable[[], Mapping[tuple[str, str], int]]) -> None:
        """``volume_manager_total_volumes`` from ``counts()``: (plugin, state) → volumes."""
        self._node.volumes = counts

    def track_volume_stats(self, stats: Callable[[], Iterable[ClaimVolumeStats]]) -> None:
        """``kubelet_volume_stats_*`` from ``stats()``: the claim-backed volumes' last measured usage."""
        self._node.volume_stats = stats

    def track_certificates(
        self, *, client: CertificateSource | None = None, server: CertificateSource | None = None
    ) -> None:
        """The TTL and renewal-error series of the rotating certificate managers."""
        if client is not None:
            self._node.client_certificate = client
        if server is not None:
            self._node.server_certificate = server

    def observe_storage_operation(self, plugin: str, operation: str, success: bool, seconds: float) -> None:
        """One volume operation (:class:`~kubelet_trio.volumemanager.VolumeManager`'s hook)."""
        if not self.enabled:
            return
        status = "success" if success else "fail-unknown"
        self.storage_operation_duration.labels(plugin, operation, status, "false").observe(seconds)

    def request_result(self, code: str, method: str, host: str) -> None:
        """An API request attempt's answer (:class:`~kubelet_trio.client.metrics.RequestMetrics`)."""
        if not self.enabled:
            return
        self.rest_client_requests.labels(code, method, host).inc()

    def request_latency(self, verb: str, host: str, seconds: float) -> None:
        if not self.enabled:
            return
        self.rest_client_request_duration.labels(verb, host).observe(seconds)

    def observe_probe(
        self, kind: ProbeKind, result: ProbeResult, pod: Pod, container: str, seconds: float
    ) -> None:
        """One probe that gave a result (:class:`~kubelet_trio.prober.metrics.ProbeMetrics`); as Go, a
        failure's duration is not observed."""
        if not self.enabled:
            return
        probe_type = PROBE_TYPES[kind.value]
        name, namespace = pod.name, pod.namespace
        self.prober_probes.labels(
            probe_type, PROBE_RESULTS[result.value], container, name, namespace, pod.uid
        ).inc()
        if result.value != "Failure":
            self.prober_probe_duration.labels(probe_type, container, name, namespace).observe(seconds)

    def forget_probe(self, kind: ProbeKind, pod: Pod, container: str) -> None:
        """A probe worker ended: its series go (Go deletes them, so gone pods leave no series)."""
        if not self.enabled:
            return
        probe_type = PROBE_TYPES[kind.value]
        for result in PROBE_RESULTS.values():
            self.prober_probes.remove(probe_type, result, container, pod.name, pod.namespace, pod.uid)
        self.prober_probe_duration.remove(probe_type, container, pod.name, pod.namespace)

    def observe_relist(self, duration: float, interval: float | None) -> None:
        """``GenericPLEG.on_relist``."""
        if not self.enabled:
            return
        self.pleg_relist_duration.observe(duration)
        if interval is not None:
            self.pleg_relist_interval.observe(interval)

    def observe_pod_worker(self, work_type: WorkType, duration: float) -> None:
        """``PodWorkers.on_sync_duration``."""
        if not self.enabled:
            return
        self.pod_worker_duration.labels(work_type.value).observe(duration)

    def observe_runtime_operation(self, operation: str, duration: float, error: bool) -> None:
        if not self.enabled:
            return
        self.runtime_operations.labels(operation).inc()
        self.runtime_operations_duration.labels(operation).observe(duration)
        if error:
            self.runtime_operations_errors.labels(operation).inc()

    def observe_cgroup_operation(self, operation: str, duration: float) -> None:
        if self.enabled:
            self.cgroup_manager_duration.labels(operation).observe(duration)

    # -- computed at scrape time -------------------------------------------------------------------

    def update_running(self, cache: PodCache) -> None:
        """Gauges from the pod cache: pods with a ready sandbox, containers by state."""
        if not self.enabled:
            return
        pods = 0
        states = dict.fromkeys(CONTAINER_STATES, 0)
        for uid in cache.uids():
            status = cache.get(uid)
            if any(s.ready for s in status.sandbox_statuses):
                pods += 1
            for container in status.container_statuses:
                states[container.state.value] += 1
        self.running_pods.set(pods)
        for state, count in states.items():
            self.running_containers.labels(state).set(count)

    def render(self) -> bytes:
        """``/metrics``: the text exposition format 0.0.4."""
        self._check_enabled()
        return render_registry(self.registry)

    def render_probes(self) -> bytes:
        """``/metrics/probes``."""
        self._check_enabled()
        return render_registry(self.probes_registry)

    def _check_enabled(self) -> None:
        if not self.enabled:
            raise RuntimeError("metrics are off on this node (KubeletMetrics(enabled=False))")

    # -- pod start durations -----------------------------------------------------------------------

    def note_statuses(self, statuses: StatusManager, now_wall: dt.datetime) -> None:
        """Observe the start duration of every pod that has become Running since the last call."""
        if not self.enabled:
            return
        now = trio.current_time()
        current = set()
        for entry in statuses.all():
            uid = entry.pod.uid
            current.add(uid)
            first_seen = self._first_seen.setdefault(uid, now)
            if uid in self._started_pods or entry.status.phase != "Running":
                continue
            self._started_pods.add(uid)
            seen = _parse_seen(entry.pod.annotations.get(CONFIG_FIRST_SEEN_ANNOTATION))
            duration = (now_wall - seen).total_seconds() if seen else now - first_seen
            self.pod_start_duration.observe(max(duration, 0.0))
        self._forget(set(self._first_seen) - current)

    def _forget(self, uids: Iterable[str]) -> None:
        for uid in uids:
            self._first_seen.pop(uid, None)
            self._started_pods.discard(uid)

    async def watch_pod_starts(
        self,
        statuses: StatusManager,
        now_wall: Callable[[], dt.datetime],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Follow the status manager (a waitable version, no polling) until cancelled."""
        task_status.started()
        if not self.enabled:
            return
        async for _ in statuses.version.eventual_values():
            self.note_statuses(statuses, now_wall())
