"""Node registration, capacity, conditions and status reporting (Go: ``pkg/kubelet/nodestatus``,
``kubelet_node_status.go``)."""

from __future__ import annotations

from kubelet_trio.nodestatus.addresses import NodeAddressError, choose_node_ip, resolve_node_ips
from kubelet_trio.nodestatus.machine import MachineInfo, go_arch, read_machine_info
from kubelet_trio.nodestatus.manager import NodeHost, NodeStatusManager
from kubelet_trio.nodestatus.setters import (
    DEFAULT_EVICTION_HARD,
    KUBELET_CONDITIONS,
    NodeStatusConfig,
    build_status,
    default_labels,
    initial_node,
    node_resources,
    status_changed,
)

__all__ = [
    "DEFAULT_EVICTION_HARD",
    "KUBELET_CONDITIONS",
    "MachineInfo",
    "NodeAddressError",
    "NodeHost",
    "NodeStatusConfig",
    "NodeStatusManager",
    "build_status",
    "choose_node_ip",
    "default_labels",
    "go_arch",
    "initial_node",
    "node_resources",
    "read_machine_info",
    "resolve_node_ips",
    "status_changed",
]
