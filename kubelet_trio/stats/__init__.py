"""Resource usage of the node, pods and containers (Go: ``pkg/kubelet/stats``, the Summary API types)."""

from __future__ import annotations

from kubelet_trio.stats.host import HostSample, HostSampler, fixed_host_sample, read_host_sample
from kubelet_trio.stats.provider import CriStatsProvider, DiskUsage, PodStatsProvider, disk_usage
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
    ProcessStats,
    RlimitStats,
    Summary,
    VolumeStats,
    summary_json,
)

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
