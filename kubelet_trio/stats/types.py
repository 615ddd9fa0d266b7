"""The Summary API's values (Go: ``k8s.io/kubelet/pkg/apis/stats/v1alpha1``), as frozen snapshots.

Times are wall-clock nanoseconds (:class:`~kubelet_trio.clock.WallClock`); :func:`summary_json` renders
them the way the Go kubelet serves ``/stats/summary`` (RFC 3339 times, camelCase keys, the odd
``ephemeral-storage`` / ``process_stats`` spellings included, absent values left out).
"""

from __future__ import annotations

from typing import Any, Protocol

import attrs

from kubelet_trio.api.timefmt import rfc3339

__all__ = [
    "CPUStats",
    "ContainerStats",
    "FsStats",
    "InterfaceStats",
    "MemoryStats",
    "NetworkStats",
    "NodeStats",
    "PodReference",
    "PodStats",
    "PodStatsProvider",
    "ProcessStats",
    "RlimitStats",
    "Summary",
    "VolumeStats",
    "summary_json",
]


@attrs.frozen
class CPUStats:
    time_ns: int
    usage_nano_cores: int | None = None
    usage_core_nano_seconds: int | None = None


@attrs.frozen
class MemoryStats:
    time_ns: int
    available_bytes: int | None = None
    usage_bytes: int | None = None
    working_set_bytes: int | None = None
    rss_bytes: int | None = None
    page_faults: int | None = None
    major_page_faults: int | None = None


@attrs.frozen
class FsStats:
    time_ns: int
    available_bytes: int | None = None
    capacity_bytes: int | None = None
    used_bytes: int | None = None
    inodes_free: int | None = None
    inodes: int | None = None
    inodes_used: int | None = None


@attrs.frozen
class InterfaceStats:
    name: str
    rx_bytes: int | None = None
    rx_errors: int | None = None
    tx_bytes: int | None = None
    tx_errors: int | None = None


@attrs.frozen
class NetworkStats:
    """The default interface's counters plus every interface (the default one included, as Go)."""

    time_ns: int
    default: InterfaceStats | None = None
    interfaces: tuple[InterfaceStats, ...] = ()


@attrs.frozen
class ProcessStats:
    process_count: int | None = None


@attrs.frozen
class RlimitStats:
    time_ns: int
    max_pid: int | None = None
    num_of_running_processes: int | None = None


@attrs.frozen
class VolumeStats:
    """Usage of one of a pod's volumes: an emptyDir on disk, or a claim's (with ``pvc_ref``)."""

    name: str
    fs: FsStats
    pvc_ref: tuple[str, str] | None = None  # (namespace, name) of the claim a persistent volume is from


@attrs.frozen
class PodReference:
    name: str
    namespace: str
    uid: str


@attrs.frozen
class ContainerStats:
    name: str
    start_time_ns: int | None = None
    cpu: CPUStats | None = None
    memory: MemoryStats | None = None
    rootfs: FsStats | None = None  # the writable layer
    logs: FsStats | None = None  # the container's log directory


@attrs.frozen
class PodStats:
    """One pod: its containers, pod-level CPU and memory (the pod cgroup when the runtime reports it,
    else the sum of its containers), network, processes, local volumes and ephemeral storage (container
    writable layers + logs + local volumes: what disk-pressure eviction ranks by)."""

    pod_ref: PodReference
    start_time_ns: int | None = None
    containers: tuple[ContainerStats, ...] = ()
    cpu: CPUStats | None = None
    memory: MemoryStats | None = None
    network: NetworkStats | None = None
    volume_stats: tuple[VolumeStats, ...] = ()
    ephemeral_storage: FsStats | None = None
    process_stats: ProcessStats | None = None


class PodStatsProvider(Protocol):
    """What the eviction manager needs: every pod's usage, ephemeral storage included. Here with the
    values rather than with the provider, so that eviction does not import the stats provider."""

    async def pod_stats(self) -> list[PodStats]: ...


@attrs.frozen
class NodeStats:
    node_name: str
    start_time_ns: int | None = None
    cpu: CPUStats | None = None
    memory: MemoryStats | None = None
    fs: FsStats | None = None  # the kubelet's root directory (nodefs)
    image_fs: FsStats | None = None  # the runtime's image filesystem (imagefs)
    rlimit: RlimitStats | None = None
    #: cgroups the node reports besides pods (``pods``: kubepods, every pod together), CPU and memory only
    system_containers: tuple[ContainerStats, ...] = ()


@attrs.frozen
class Summary:
    node: NodeStats
    pods: tuple[PodStats, ...] = ()


# -- JSON (the v1alpha1 wire shape) ---------------------------------------------------------------


def _compact(fields: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not None}


def _time(ns: int | None) -> str | None:
    return rfc3339(ns) if ns is not None else None


def _cpu(s: CPUStats | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return _compact(
        {
            "time": _time(s.time_ns),
            "usageNanoCores": s.usage_nano_cores,
            "usageCoreNanoSeconds": s.usage_core_nano_seconds,
        }
    )


def _memory(s: MemoryStats | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return _compact(
        {
            "time": _time(s.time_ns),
            "availableBytes": s.available_bytes,
            "usageBytes": s.usage_bytes,
            "workingSetBytes": s.working_set_bytes,
            "rssBytes": s.rss_bytes,
            "pageFaults": s.page_faults,
            "majorPageFaults": s.major_page_faults,
        }
    )


def _fs_fields(s: FsStats) -> dict[str, Any]:
    return _compact(
        {
            "time": _time(s.time_ns),
            "availableBytes": s.available_bytes,
            "capacityBytes": s.capacity_bytes,
            "usedBytes": s.used_bytes,
            "inodesFree": s.inodes_free,
            "inodes": s.inodes,
            "inodesUsed": s.inodes_used,
        }
    )


def _fs(s: FsStats | None) -> dict[str, Any] | None:
    return _fs_fields(s) if s is not None else None


def _interface(s: InterfaceStats) -> dict[str, Any]:
    return _compact(
        {
            "name": s.name,
            "rxBytes": s.rx_bytes,
            "rxErrors": s.rx_errors,
            "txBytes": s.tx_bytes,
            "txErrors": s.tx_errors,
        }
    )


def _network(s: NetworkStats | None) -> dict[str, Any] | None:
    if s is None:
        return None
    out: dict[str, Any] = {"time": _time(s.time_ns)}
    if s.default is not None:
        out.update(_interface(s.default))
    if s.interfaces:
        out["interfaces"] = [_interface(i) for i in s.interfaces]
    return out


def _container(s: ContainerStats) -> dict[str, Any]:
    return _compact(
        {
            "name": s.name,
            "startTime": _time(s.start_time_ns),
            "cpu": _cpu(s.cpu),
            "memory": _memory(s.memory),
            "rootfs": _fs(s.rootfs),
            "logs": _fs(s.logs),
        }
    )


def _volume(s: VolumeStats) -> dict[str, Any]:
    fields: dict[str, Any] = {**_fs_fields(s.fs), "name": s.name}
    if s.pvc_ref is not None:
        fields["pvcRef"] = {"name": s.pvc_ref[1], "namespace": s.pvc_ref[0]}
    return fields


def _pod(s: PodStats) -> dict[str, Any]:
    return _compact(
        {
            "podRef": {"name": s.pod_ref.name, "namespace": s.pod_ref.namespace, "uid": s.pod_ref.uid},
            "startTime": _time(s.start_time_ns),
            "containers": [_container(c) for c in s.containers],
            "cpu": _cpu(s.cpu),
            "memory": _memory(s.memory),
            "network": _network(s.network),
            "volume": [_volume(v) for v in s.volume_stats] or None,
            "ephemeral-storage": _fs(s.ephemeral_storage),
            "process_stats": (
                _compact({"process_count": s.process_stats.process_count}) if s.process_stats else None
            ),
        }
    )


def _node(s: NodeStats) -> dict[str, Any]:
    rlimit = None
    if s.rlimit is not None:
        rlimit = _compact(
            {
                "time": _time(s.rlimit.time_ns),
                "maxpid": s.rlimit.max_pid,
                "curproc": s.rlimit.num_of_running_processes,
            }
        )
    return _compact(
        {
            "nodeName": s.node_name,
            "startTime": _time(s.start_time_ns),
            "cpu": _cpu(s.cpu),
            "memory": _memory(s.memory),
            "fs": _fs(s.fs),
            "runtime": {"imageFs": _fs_fields(s.image_fs)} if s.image_fs is not None else None,
            "rlimit": rlimit,
            "systemContainers": [_container(c) for c in s.system_containers] or None,
        }
    )


def summary_json(summary: Summary) -> dict[str, Any]:
    """``/stats/summary``'s body."""
    return {"node": _node(summary.node), "pods": [_pod(p) for p in summary.pods]}
