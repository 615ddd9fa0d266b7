"""``/metrics/cadvisor``: container usage with cAdvisor's names and labels (Go: the kubelet's cAdvisor
handler in ``pkg/kubelet/server/server.go`` over cAdvisor's ``metrics/prometheus.go``).

Dashboards (kubernetes-mixin's Compute Resources, for one) select containers as cAdvisor labels them:

- ``container``, ``pod``, ``namespace``: the kubelet's CRI labels; ``image``: the image the container
  runs; ``name``: the runtime's id; ``id``: the cgroup.
- Three levels per pod: each running container (``container`` and ``image`` set); the sandbox (pause)
  container (``container=""``, ``name`` its id), which carries the pod's network counters since the
  pod shares its network namespace; and the pod (``container=""``, ``image=""``, ``name=""``): its pod
  cgroup when the containers sit under one (the container manager's, with ``cgroupsPerQOS``), else the
  sum of its containers under the name ``/kubepods/pod<uid>``, the cgroup the Go kubelet would have
  created (embedded nodes and ``--cgroups-per-qos=false`` leave pods in the runtime's default cgroup).

Values come from CRI first (``ListContainerStats`` for CPU, memory and the writable layer;
``ListPodSandboxStats`` for network where the runtime answers it) and, where CRI has no field or no
answer, from the container's cgroups and ``/proc/<pid>/net/dev`` (:mod:`kubelet_trio.stats.cgroups`),
the pid coming from the runtime's verbose status. A runtime with no processes (the simulated one) shows
what CRI gives. Series exist only for what is running now; a failed scrape answers
``container_scrape_error 1`` and nothing else.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence

import attrs

from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.fsio import RunSync
from kubelet_trio.kuberuntime.labels import (
    CONTAINER_NAME_LABEL,
    POD_NAME_LABEL,
    POD_NAMESPACE_LABEL,
    POD_UID_LABEL,
    node_selector,
)
from kubelet_trio.logs import kv
from kubelet_trio.promtext import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily, Metric
from kubelet_trio.stats.cgroups import (
    CgroupUsage,
    InterfaceCounters,
    block_device_name,
    read_cgroup_usage,
    read_process_usage,
)

__all__ = [
    "CadvisorEntry",
    "CadvisorSnapshot",
    "MachineInfo",
    "cadvisor_registry",
    "cadvisor_snapshot",
    "read_machine_info",
]

logger = logging.getLogger(__name__)

LABELS = ("container", "id", "image", "name", "namespace", "pod")
POD_CGROUP_PREFIX = "/kubepods/pod"


@attrs.frozen
class FsUsage:
    device: str
    used_bytes: int
    inodes_used: int | None = None


@attrs.frozen
class CadvisorEntry:
    """One cgroup's series: a container, a pod's sandbox or a pod."""

    container: str
    pod: str
    namespace: str
    image: str
    name: str
    id: str
    start_time_s: float | None = None
    cpu_usage_ns: int | None = None
    memory_working_set: int | None = None
    memory_usage: int | None = None
    memory_rss: int | None = None
    cgroup: CgroupUsage | None = None
    network: tuple[InterfaceCounters, ...] = ()
    fs: tuple[FsUsage, ...] = ()

    @property
    def labels(self) -> list[str]:
        return [self.container, self.id, self.image, self.name, self.namespace, self.pod]


@attrs.frozen
class MachineInfo:
    cpu_cores: int
    memory_bytes: int | None
    boot_id: str = ""
    machine_id: str = ""


@attrs.frozen
class CadvisorSnapshot:
    entries: tuple[CadvisorEntry, ...] = ()
    machine: MachineInfo | None = None
    error: bool = False


def _first_line(path: str) -> str:
    try:
        with open(path) as f:
            return f.readline().strip()
    except OSError:
        return ""


def read_machine_info() -> MachineInfo:
    """CPU count, memory and the ids cAdvisor labels machine metrics with. Blocking."""
    memory: int | None = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    memory = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return MachineInfo(
        cpu_cores=os.cpu_count() or 0,
        memory_bytes=memory,
        boot_id=_first_line("/proc/sys/kernel/random/boot_id"),
        machine_id=_first_line("/etc/machine-id"),
    )


def _pid(info: Mapping[str, str]) -> int:
    try:
        value = json.loads(info.get("info", "{}")).get("pid", 0)
    except (ValueError, AttributeError):
        return 0
    return value if isinstance(value, int) else 0


def _verbose_image(info: Mapping[str, str]) -> str:
    try:
        value = json.loads(info.get("info", "{}")).get("image", "")
    except (ValueError, AttributeError):
        return ""
    return value if isinstance(value, str) else ""


def _value(v: pb.UInt64Value | None) -> int | None:
    return v.value if v is not None else None


def _or(first: int | None, second: int | None) -> int | None:
    return first if first is not None else second


def _sum(values: Sequence[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _cri_network(stats: pb.PodSandboxStats | None) -> tuple[InterfaceCounters, ...]:
    network = stats.linux.network if stats is not None and stats.linux is not None else None
    if network is None:
        return ()
    found = [network.default_interface] if network.default_interface is not None else []
    found += [i for i in network.interfaces if i.name not in {f.name for f in found}]
    return tuple(
        InterfaceCounters(
            i.name,
            rx_bytes=_value(i.rx_bytes),
            rx_errors=_value(i.rx_errors),
            tx_bytes=_value(i.tx_bytes),
            tx_errors=_value(i.tx_errors),
        )
        for i in found
    )


def _pod_cgroup(members: Sequence[CgroupUsage]) -> dict[str, str] | None:
    """The pod cgroup (per controller) when every member sits in the same ``pod<uid>`` parent."""
    parents = {os.path.dirname(m.path.rstrip("/")) for m in members}
    if len(parents) != 1:
        return None
    (parent,) = parents
    if not os.path.basename(parent).startswith("pod"):
        return None
    return {controller: parent for controller in ("cpu", "cpuacct", "memory", "blkio", "")}


def _pod_entry(
    sandbox: pb.PodSandbox, members: Sequence[CadvisorEntry], pod_cgroup: CgroupUsage | None
) -> CadvisorEntry:
    """The pod level; its network stays on the sandbox alone, so a sum by pod counts it once."""
    uid = sandbox.metadata.uid if sandbox.metadata else sandbox.labels.get(POD_UID_LABEL, "")
    if pod_cgroup is not None:
        return CadvisorEntry(
            container="",
            pod=members[0].pod,
            namespace=members[0].namespace,
            image="",
            name="",
            id=pod_cgroup.path,
            start_time_s=sandbox.created_at / 1e9 if sandbox.created_at else None,
            cpu_usage_ns=pod_cgroup.cpu_usage_ns,
            memory_working_set=pod_cgroup.memory_working_set,
            memory_usage=pod_cgroup.memory_usage,
            memory_rss=pod_cgroup.memory_rss,
            cgroup=pod_cgroup,
        )
    cgroups = [m.cgroup for m in members if m.cgroup is not None]
    summed = None
    if cgroups:
        summed = CgroupUsage(
            path=POD_CGROUP_PREFIX + uid,
            memory_cache=_sum([c.memory_cache for c in cgroups]),
            memory_swap=_sum([c.memory_swap for c in cgroups]),
            memory_mapped_file=_sum([c.memory_mapped_file for c in cgroups]),
            cpu_user_ns=_sum([c.cpu_user_ns for c in cgroups]),
            cpu_system_ns=_sum([c.cpu_system_ns for c in cgroups]),
        )
    return CadvisorEntry(
        container="",
        pod=members[0].pod,
        namespace=members[0].namespace,
        image="",
        name="",
        id=POD_CGROUP_PREFIX + uid,
        start_time_s=sandbox.created_at / 1e9 if sandbox.created_at else None,
        cpu_usage_ns=_sum([m.cpu_usage_ns for m in members]),
        memory_working_set=_sum([m.memory_working_set for m in members]),
        memory_usage=_sum([m.memory_usage for m in members]),
        memory_rss=_sum([m.memory_rss for m in members]),
        cgroup=summed,
    )


def _device_of(path: str) -> str:
    """The block device holding ``path`` ("" when unknown). Blocking."""
    try:
        dev = os.stat(path).st_dev
    except OSError:
        return ""
    return block_device_name(f"{os.major(dev)}:{os.minor(dev)}")


def _field(cgroup: CgroupUsage | None, name: str) -> int | None:
    value = getattr(cgroup, name) if cgroup is not None else None
    return value if isinstance(value, int) else None


def _read_pod_cgroup(paths: dict[str, str]) -> CgroupUsage | None:
    return read_cgroup_usage(paths)


async def cadvisor_snapshot(
    runtime: Runtime,
    node_name: str,
    run_sync: RunSync,
    machine: Callable[[], MachineInfo] = read_machine_info,
) -> CadvisorSnapshot:
    """Read every running container and ready sandbox of ``node_name``; a runtime error gives an
    error snapshot (logged), as cAdvisor's ``container_scrape_error``."""
    try:
        return await _snapshot(runtime, node_name, run_sync, machine)
    except (cri_errors.CriError, OSError) as err:
        logger.error("error getting container stats for cadvisor metrics", extra=kv(err=err))
        return CadvisorSnapshot(error=True)


async def _snapshot(
    runtime: Runtime, node_name: str, run_sync: RunSync, machine: Callable[[], MachineInfo]
) -> CadvisorSnapshot:
    selector = node_selector(node_name)
    sandboxes = [
        s
        for s in await runtime.list_pod_sandbox(pb.PodSandboxFilter(label_selector=selector))
        if s.state is pb.PodSandboxState.SANDBOX_READY
    ]
    containers = [
        c
        for c in await runtime.list_containers(pb.ContainerFilter(label_selector=selector))
        if c.state is pb.ContainerState.CONTAINER_RUNNING
    ]
    stats = {
        s.attributes.id: s
        for s in await runtime.list_container_stats(pb.ContainerStatsFilter(label_selector=selector))
        if s.attributes is not None
    }
    try:
        sandbox_stats = {
            s.attributes.id: s
            for s in await runtime.list_pod_sandbox_stats(pb.PodSandboxStatsFilter(label_selector=selector))
            if s.attributes is not None
        }
    except cri_errors.CriError:
        sandbox_stats = {}  # containerd without a pod cgroup parent: network from /proc instead
    image_fs_device = ""
    try:
        info = await runtime.image_fs_info()
        if info.image_filesystems and info.image_filesystems[0].fs_id is not None:
            image_fs_device = await run_sync(_device_of, info.image_filesystems[0].fs_id.mountpoint)
    except cri_errors.CriError:
        pass

    entries: list[CadvisorEntry] = []
    by_sandbox: dict[str, list[CadvisorEntry]] = {}
    for container in containers:
        try:
            status = await runtime.container_status(container.id, verbose=True)
        except cri_errors.NotFoundError:
            continue  # gone since the listing
        cgroup, _ = await run_sync(read_process_usage, _pid(status.info))
        s = stats.get(container.id)
        cpu = s.cpu if s is not None else None
        memory = s.memory if s is not None else None
        fs: tuple[FsUsage, ...] = ()
        if s is not None and s.writable_layer is not None and s.writable_layer.used_bytes is not None:
            fs = (
                FsUsage(
                    image_fs_device,
                    s.writable_layer.used_bytes.value,
                    _value(s.writable_layer.inodes_used),
                ),
            )
        spec = status.status.image if status.status is not None else None
        image = (spec.user_specified_image or spec.image) if spec is not None and spec.image else ""
        started = status.status.started_at if status.status is not None else 0
        entry = CadvisorEntry(
            container=container.labels.get(CONTAINER_NAME_LABEL, ""),
            pod=container.labels.get(POD_NAME_LABEL, ""),
            namespace=container.labels.get(POD_NAMESPACE_LABEL, ""),
            image=image or (container.image.image if container.image else "") or container.image_ref,
            name=container.id,
            id=cgroup.path if cgroup is not None else "/" + container.id,
            start_time_s=started / 1e9 if started else None,
            cpu_usage_ns=_or(
                _value(cpu.usage_core_nano_seconds) if cpu else None, _field(cgroup, "cpu_usage_ns")
            ),
            memory_working_set=_or(
                _value(memory.working_set_bytes) if memory else None, _field(cgroup, "memory_working_set")
            ),
            memory_usage=_or(_value(memory.usage_bytes) if memory else None, _field(cgroup, "memory_usage")),
            memory_rss=_or(_value(memory.rss_bytes) if memory else None, _field(cgroup, "memory_rss")),
            cgroup=cgroup,
            fs=fs,
        )
        by_sandbox.setdefault(container.pod_sandbox_id, []).append(entry)

    for sandbox in sandboxes:
        members = by_sandbox.get(sandbox.id, [])
        try:
            sandbox_status = await runtime.pod_sandbox_status(sandbox.id, verbose=True)
        except cri_errors.NotFoundError:
            continue
        cgroup, network = await run_sync(read_process_usage, _pid(sandbox_status.info))
        network = network or _cri_network(sandbox_stats.get(sandbox.id))
        pod = sandbox.metadata.name if sandbox.metadata else sandbox.labels.get(POD_NAME_LABEL, "")
        namespace = (
            sandbox.metadata.namespace if sandbox.metadata else sandbox.labels.get(POD_NAMESPACE_LABEL, "")
        )
        pause = CadvisorEntry(
            container="",
            pod=pod,
            namespace=namespace,
            image=_verbose_image(sandbox_status.info),
            name=sandbox.id,
            id=cgroup.path if cgroup is not None else "/" + sandbox.id,
            start_time_s=sandbox.created_at / 1e9 if sandbox.created_at else None,
            cpu_usage_ns=_field(cgroup, "cpu_usage_ns"),
            memory_working_set=_field(cgroup, "memory_working_set"),
            memory_usage=_field(cgroup, "memory_usage"),
            memory_rss=_field(cgroup, "memory_rss"),
            cgroup=cgroup,
            network=network,
        )
        cgroups = [m.cgroup for m in [pause, *members] if m.cgroup is not None]
        pod_paths = _pod_cgroup(cgroups) if cgroups else None
        pod_cgroup = await run_sync(_read_pod_cgroup, pod_paths) if pod_paths else None
        entries.append(_pod_entry(sandbox, [pause, *members], pod_cgroup))
        entries.append(pause)
        entries.extend(sorted(members, key=lambda e: e.container))
    return CadvisorSnapshot(tuple(entries), await run_sync(machine))


# -- exposition -------------------------------------------------------------------------------------


def _seconds(ns: int) -> float:
    return ns / 1e9


@attrs.frozen
class _CadvisorCollector:
    snapshot: CadvisorSnapshot

    def collect(self) -> Iterator[Metric]:
        s = self.snapshot
        yield GaugeMetricFamily(
            "container_scrape_error",
            "1 if there was an error while getting container metrics, 0 otherwise",
            1.0 if s.error else 0.0,
        )
        if s.machine is not None:
            yield from _machine(s.machine)
        yield from _containers(s.entries)


def _machine(machine: MachineInfo) -> Iterator[Metric]:
    labels = ["boot_id", "machine_id", "system_uuid"]
    values = [machine.boot_id, machine.machine_id, ""]
    cores = GaugeMetricFamily("machine_cpu_cores", "Number of logical CPU cores.", labels=labels)
    cores.add_metric(values, machine.cpu_cores)
    yield cores
    if machine.memory_bytes is not None:
        memory = GaugeMetricFamily(
            "machine_memory_bytes", "Amount of memory installed on the machine.", labels=labels
        )
        memory.add_metric(values, machine.memory_bytes)
        yield memory


#: name, type, help, value of an entry (None: no sample)
_Simple = tuple[str, str, str, Callable[[CadvisorEntry], float | None]]


def _cg(field: str, scale: float = 1.0) -> Callable[[CadvisorEntry], float | None]:
    def get(e: CadvisorEntry) -> float | None:
        value = getattr(e.cgroup, field, None) if e.cgroup is not None else None
        return value * scale if value is not None else None

    return get


def _attr(field: str, scale: float = 1.0) -> Callable[[CadvisorEntry], float | None]:
    def get(e: CadvisorEntry) -> float | None:
        value = getattr(e, field)
        return value * scale if value is not None else None

    return get


def _throttling(field: str, scale: float = 1.0) -> Callable[[CadvisorEntry], float | None]:
    """CFS series exist for a container with a CPU quota (as cAdvisor)."""
    inner = _cg(field, scale)

    def get(e: CadvisorEntry) -> float | None:
        return inner(e) if e.cgroup is not None and e.cgroup.cpu_quota_us else None

    return get


_SIMPLE: tuple[_Simple, ...] = (
    ("container_cpu_user_seconds_total", "counter", "Cumulative user cpu time consumed in seconds.",
     _cg("cpu_user_ns", 1e-9)),
    ("container_cpu_system_seconds_total", "counter", "Cumulative system cpu time consumed in seconds.",
     _cg("cpu_system_ns", 1e-9)),
    ("container_cpu_cfs_periods_total", "counter", "Number of elapsed enforcement period intervals.",
     _throttling("cfs_periods")),
    ("container_cpu_cfs_throttled_periods_total", "counter", "Number of throttled period intervals.",
     _throttling("cfs_throttled_periods")),
    ("container_cpu_cfs_throttled_seconds_total", "counter",
     "Total time duration the container has been throttled.", _throttling("cfs_throttled_ns", 1e-9)),
    ("container_memory_usage_bytes", "gauge",
     "Current memory usage in bytes, including all memory regardless of when it was accessed",
     _attr("memory_usage")),
    ("container_memory_working_set_bytes", "gauge", "Current working set in bytes.",
     _attr("memory_working_set")),
    ("container_memory_rss", "gauge", "Size of RSS in bytes.", _attr("memory_rss")),
    ("container_memory_cache", "gauge", "Number of bytes of page cache memory.", _cg("memory_cache")),
    ("container_memory_swap", "gauge", "Container swap usage in bytes.", _cg("memory_swap")),
    ("container_memory_mapped_file", "gauge", "Size of memory mapped files in bytes.",
     _cg("memory_mapped_file")),
    ("container_memory_max_usage_bytes", "gauge", "Maximum memory usage recorded in bytes",
     _cg("memory_max_usage")),
    # cAdvisor's is container_memory_failcnt; _total is prometheus-client's, which this output always had
    ("container_memory_failcnt_total", "counter", "Number of memory usage hits limits",
     _cg("memory_failcnt")),
    ("container_spec_cpu_shares", "gauge", "CPU share of the container.", _cg("cpu_shares")),
    ("container_spec_cpu_period", "gauge", "CPU period of the container.",
     _throttling("cpu_period_us")),
    ("container_spec_cpu_quota", "gauge", "CPU quota of the container.", _throttling("cpu_quota_us")),
    ("container_spec_memory_limit_bytes", "gauge", "Memory limit for the container.",
     lambda e: (e.cgroup.memory_limit or 0) if e.cgroup is not None else None),
    ("container_start_time_seconds", "gauge", "Start time of the container since unix epoch in seconds.",
     _attr("start_time_s")),
)  # fmt: skip

_NETWORK: tuple[tuple[str, str, str], ...] = (
    ("container_network_receive_bytes_total", "Cumulative count of bytes received", "rx_bytes"),
    ("container_network_receive_packets_total", "Cumulative count of packets received", "rx_packets"),
    ("container_network_receive_packets_dropped_total",
     "Cumulative count of packets dropped while receiving", "rx_dropped"),
    ("container_network_receive_errors_total",
     "Cumulative count of errors encountered while receiving", "rx_errors"),
    ("container_network_transmit_bytes_total", "Cumulative count of bytes transmitted", "tx_bytes"),
    ("container_network_transmit_packets_total", "Cumulative count of packets transmitted", "tx_packets"),
    ("container_network_transmit_packets_dropped_total",
     "Cumulative count of packets dropped while transmitting", "tx_dropped"),
    ("container_network_transmit_errors_total",
     "Cumulative count of errors encountered while transmitting", "tx_errors"),
)  # fmt: skip

_BLOCK_IO: tuple[tuple[str, str, str], ...] = (
    ("container_fs_reads_bytes_total", "Cumulative count of bytes read", "read_bytes"),
    ("container_fs_writes_bytes_total", "Cumulative count of bytes written", "write_bytes"),
    ("container_fs_reads_total", "Cumulative count of reads completed", "reads"),
    ("container_fs_writes_total", "Cumulative count of writes completed", "writes"),
)


def _family(
    name: str, kind: str, documentation: str, labels: Sequence[str]
) -> CounterMetricFamily | GaugeMetricFamily:
    if kind == "counter":
        return CounterMetricFamily(name, documentation, labels=labels)
    return GaugeMetricFamily(name, documentation, labels=labels)


def _containers(entries: Sequence[CadvisorEntry]) -> Iterator[Metric]:
    cpu = CounterMetricFamily(
        "container_cpu_usage_seconds_total",
        "Cumulative cpu time consumed in seconds.",
        labels=[*LABELS, "cpu"],
    )
    for e in entries:
        if e.cpu_usage_ns is not None:
            cpu.add_metric([*e.labels, "total"], _seconds(e.cpu_usage_ns))
    yield cpu
    for name, kind, documentation, get in _SIMPLE:
        family = _family(name, kind, documentation, LABELS)
        for e in entries:
            value = get(e)
            if value is not None:
                family.add_metric(e.labels, value)
        yield family
    for name, documentation, field in _NETWORK:
        family = CounterMetricFamily(name, documentation, labels=[*LABELS, "interface"])
        for e in entries:
            for interface in e.network:
                value = getattr(interface, field)
                if value is not None:  # CRI has no packet counts
                    family.add_metric([*e.labels, interface.name], value)
        yield family
    for name, documentation, field in _BLOCK_IO:
        family = CounterMetricFamily(name, documentation, labels=[*LABELS, "device"])
        for e in entries:
            for io in e.cgroup.block_io if e.cgroup is not None else ():
                family.add_metric([*e.labels, io.device], getattr(io, field))
        yield family
    usage = GaugeMetricFamily(
        "container_fs_usage_bytes",
        "Number of bytes that are consumed by the container on this filesystem.",
        labels=[*LABELS, "device"],
    )
    for e in entries:
        for fs in e.fs:
            usage.add_metric([*e.labels, fs.device], fs.used_bytes)
    yield usage


def cadvisor_registry(snapshot: CadvisorSnapshot) -> CollectorRegistry:
    """A registry answering with ``snapshot``."""
    registry = CollectorRegistry()
    registry.register(_CadvisorCollector(snapshot))
    return registry
