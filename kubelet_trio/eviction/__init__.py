"""Node-pressure eviction (Go: ``pkg/kubelet/eviction``): watch memory, disk and PID signals, report
pressure on the Node, refuse pods under pressure, and evict pods to keep the node alive."""

from __future__ import annotations

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
