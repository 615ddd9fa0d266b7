"""Node-level resource management (Go: ``pkg/kubelet/cm``): what the node offers pods."""

from kubelet_trio.cm.allocatable import (
    DEFAULT_EVICTION_HARD,
    NodeAllocatable,
    node_allocatable,
    read_node_allocatable,
    read_node_capacity,
)

__all__ = [
    "DEFAULT_EVICTION_HARD",
    "NodeAllocatable",
    "node_allocatable",
    "read_node_allocatable",
    "read_node_capacity",
]
