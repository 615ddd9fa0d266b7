"""Node registration, capacity, conditions and status reporting (Go: ``pkg/kubelet/nodestatus``,
``kubelet_node_status.go``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
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

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "NodeAddressError": "kubelet_trio.nodestatus.addresses",
    "choose_node_ip": "kubelet_trio.nodestatus.addresses",
    "resolve_node_ips": "kubelet_trio.nodestatus.addresses",
    "MachineInfo": "kubelet_trio.nodestatus.machine",
    "go_arch": "kubelet_trio.nodestatus.machine",
    "read_machine_info": "kubelet_trio.nodestatus.machine",
    "NodeHost": "kubelet_trio.nodestatus.manager",
    "NodeStatusManager": "kubelet_trio.nodestatus.manager",
    "DEFAULT_EVICTION_HARD": "kubelet_trio.nodestatus.setters",
    "KUBELET_CONDITIONS": "kubelet_trio.nodestatus.setters",
    "NodeStatusConfig": "kubelet_trio.nodestatus.setters",
    "build_status": "kubelet_trio.nodestatus.setters",
    "default_labels": "kubelet_trio.nodestatus.setters",
    "initial_node": "kubelet_trio.nodestatus.setters",
    "node_resources": "kubelet_trio.nodestatus.setters",
    "status_changed": "kubelet_trio.nodestatus.setters",
}

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


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
