"""Node-pressure eviction (Go: ``pkg/kubelet/eviction``): watch memory, disk and PID signals, report
pressure on the Node, refuse pods under pressure, and evict pods to keep the node alive."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.eviction.api import (
        ALL_SIGNALS,
        ALLOCATABLE_MEMORY_AVAILABLE,
        IMAGEFS_AVAILABLE,
        IMAGEFS_INODES_FREE,
        MEMORY_AVAILABLE,
        NODEFS_AVAILABLE,
        NODEFS_INODES_FREE,
        PID_AVAILABLE,
        EvictionConfigError,
        Threshold,
        ThresholdValue,
        parse_thresholds,
    )
    from kubelet_trio.eviction.helpers import DISK_PRESSURE, MEMORY_PRESSURE, PID_PRESSURE, REASON
    from kubelet_trio.eviction.manager import (
        ContainerGC,
        EvictionConfig,
        EvictionManager,
        ImageGC,
        PodKiller,
    )
    from kubelet_trio.eviction.signals import (
        HostSignals,
        Observation,
        Observations,
        SignalSource,
        SimulatedSignals,
    )
    from kubelet_trio.eviction.usage import (
        ContainerUsage,
        PodUsage,
        PodUsageProvider,
        SimulatedPodUsage,
        StatsPodUsage,
    )

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "ALL_SIGNALS": "kubelet_trio.eviction.api",
    "ALLOCATABLE_MEMORY_AVAILABLE": "kubelet_trio.eviction.api",
    "IMAGEFS_AVAILABLE": "kubelet_trio.eviction.api",
    "IMAGEFS_INODES_FREE": "kubelet_trio.eviction.api",
    "MEMORY_AVAILABLE": "kubelet_trio.eviction.api",
    "NODEFS_AVAILABLE": "kubelet_trio.eviction.api",
    "NODEFS_INODES_FREE": "kubelet_trio.eviction.api",
    "PID_AVAILABLE": "kubelet_trio.eviction.api",
    "EvictionConfigError": "kubelet_trio.eviction.api",
    "Threshold": "kubelet_trio.eviction.api",
    "ThresholdValue": "kubelet_trio.eviction.api",
    "parse_thresholds": "kubelet_trio.eviction.api",
    "DISK_PRESSURE": "kubelet_trio.eviction.helpers",
    "MEMORY_PRESSURE": "kubelet_trio.eviction.helpers",
    "PID_PRESSURE": "kubelet_trio.eviction.helpers",
    "REASON": "kubelet_trio.eviction.helpers",
    "ContainerGC": "kubelet_trio.eviction.manager",
    "EvictionConfig": "kubelet_trio.eviction.manager",
    "EvictionManager": "kubelet_trio.eviction.manager",
    "ImageGC": "kubelet_trio.eviction.manager",
    "PodKiller": "kubelet_trio.eviction.manager",
    "HostSignals": "kubelet_trio.eviction.signals",
    "Observation": "kubelet_trio.eviction.signals",
    "Observations": "kubelet_trio.eviction.signals",
    "SignalSource": "kubelet_trio.eviction.signals",
    "SimulatedSignals": "kubelet_trio.eviction.signals",
    "ContainerUsage": "kubelet_trio.eviction.usage",
    "PodUsage": "kubelet_trio.eviction.usage",
    "PodUsageProvider": "kubelet_trio.eviction.usage",
    "SimulatedPodUsage": "kubelet_trio.eviction.usage",
    "StatsPodUsage": "kubelet_trio.eviction.usage",
}

__all__ = [
    "ALLOCATABLE_MEMORY_AVAILABLE",
    "ALL_SIGNALS",
    "DISK_PRESSURE",
    "IMAGEFS_AVAILABLE",
    "IMAGEFS_INODES_FREE",
    "MEMORY_AVAILABLE",
    "MEMORY_PRESSURE",
    "NODEFS_AVAILABLE",
    "NODEFS_INODES_FREE",
    "PID_AVAILABLE",
    "PID_PRESSURE",
    "REASON",
    "ContainerGC",
    "ContainerUsage",
    "EvictionConfig",
    "EvictionConfigError",
    "EvictionManager",
    "HostSignals",
    "ImageGC",
    "Observation",
    "Observations",
    "PodKiller",
    "PodUsage",
    "PodUsageProvider",
    "SignalSource",
    "SimulatedPodUsage",
    "SimulatedSignals",
    "StatsPodUsage",
    "Threshold",
    "ThresholdValue",
    "parse_thresholds",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
