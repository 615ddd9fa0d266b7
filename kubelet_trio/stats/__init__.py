"""Resource usage of the node, pods and containers (Go: ``pkg/kubelet/stats``, the Summary API types)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.stats.host import HostSample, HostSampler, fixed_host_sample, read_host_sample
    from kubelet_trio.stats.provider import CriStatsProvider, DiskUsage, disk_usage
    from kubelet_trio.stats.types import (
        ContainerStats,
        CPUStats,
        FsStats,
        InterfaceStats,
        MemoryStats,
        NetworkStats,
        NodeStats,
        PodReference,
        PodStats,
        PodStatsProvider,
        ProcessStats,
        RlimitStats,
        Summary,
        VolumeStats,
        summary_json,
    )

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "HostSample": "kubelet_trio.stats.host",
    "HostSampler": "kubelet_trio.stats.host",
    "fixed_host_sample": "kubelet_trio.stats.host",
    "read_host_sample": "kubelet_trio.stats.host",
    "CriStatsProvider": "kubelet_trio.stats.provider",
    "DiskUsage": "kubelet_trio.stats.provider",
    "disk_usage": "kubelet_trio.stats.provider",
    "ContainerStats": "kubelet_trio.stats.types",
    "CPUStats": "kubelet_trio.stats.types",
    "FsStats": "kubelet_trio.stats.types",
    "InterfaceStats": "kubelet_trio.stats.types",
    "MemoryStats": "kubelet_trio.stats.types",
    "NetworkStats": "kubelet_trio.stats.types",
    "NodeStats": "kubelet_trio.stats.types",
    "PodReference": "kubelet_trio.stats.types",
    "PodStats": "kubelet_trio.stats.types",
    "PodStatsProvider": "kubelet_trio.stats.types",
    "ProcessStats": "kubelet_trio.stats.types",
    "RlimitStats": "kubelet_trio.stats.types",
    "Summary": "kubelet_trio.stats.types",
    "VolumeStats": "kubelet_trio.stats.types",
    "summary_json": "kubelet_trio.stats.types",
}

__all__ = [
    "CPUStats",
    "ContainerStats",
    "CriStatsProvider",
    "DiskUsage",
    "FsStats",
    "HostSample",
    "HostSampler",
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
    "disk_usage",
    "fixed_host_sample",
    "read_host_sample",
    "summary_json",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
