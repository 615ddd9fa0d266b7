"""Node-level resource management (Go: ``pkg/kubelet/cm``): what the node offers pods, and the cgroup
tree they run in."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.cm.allocatable import (
        DEFAULT_EVICTION_HARD,
        NodeAllocatable,
        node_allocatable,
        read_node_allocatable,
        read_node_capacity,
    )
    from kubelet_trio.cm.cgroup_manager import CgroupDriver, CgroupError, CgroupManager, CgroupName
    from kubelet_trio.cm.container_manager import (
        CgroupDriverMismatch,
        ContainerManager,
        NodeConfig,
        runtime_cgroup_driver,
    )
    from kubelet_trio.cm.helpers import ResourceConfig, resource_config_for_pod
    from kubelet_trio.cm.node_container_manager import NodeCapacity
    from kubelet_trio.cm.oom_score import apply_oom_score_adj
    from kubelet_trio.cm.oom_watcher import OOMWatcher
    from kubelet_trio.cm.pod_container_manager import PodContainerManager
    from kubelet_trio.cm.qos_container_manager import QOSContainerManager, QOSContainersInfo

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "DEFAULT_EVICTION_HARD": "kubelet_trio.cm.allocatable",
    "NodeAllocatable": "kubelet_trio.cm.allocatable",
    "node_allocatable": "kubelet_trio.cm.allocatable",
    "read_node_allocatable": "kubelet_trio.cm.allocatable",
    "read_node_capacity": "kubelet_trio.cm.allocatable",
    "CgroupDriver": "kubelet_trio.cm.cgroup_manager",
    "CgroupError": "kubelet_trio.cm.cgroup_manager",
    "CgroupManager": "kubelet_trio.cm.cgroup_manager",
    "CgroupName": "kubelet_trio.cm.cgroup_manager",
    "CgroupDriverMismatch": "kubelet_trio.cm.container_manager",
    "ContainerManager": "kubelet_trio.cm.container_manager",
    "NodeConfig": "kubelet_trio.cm.container_manager",
    "runtime_cgroup_driver": "kubelet_trio.cm.container_manager",
    "ResourceConfig": "kubelet_trio.cm.helpers",
    "resource_config_for_pod": "kubelet_trio.cm.helpers",
    "NodeCapacity": "kubelet_trio.cm.node_container_manager",
    "apply_oom_score_adj": "kubelet_trio.cm.oom_score",
    "OOMWatcher": "kubelet_trio.cm.oom_watcher",
    "PodContainerManager": "kubelet_trio.cm.pod_container_manager",
    "QOSContainerManager": "kubelet_trio.cm.qos_container_manager",
    "QOSContainersInfo": "kubelet_trio.cm.qos_container_manager",
}

__all__ = [
    "DEFAULT_EVICTION_HARD",
    "CgroupDriver",
    "CgroupDriverMismatch",
    "CgroupError",
    "CgroupManager",
    "CgroupName",
    "ContainerManager",
    "NodeAllocatable",
    "NodeCapacity",
    "NodeConfig",
    "OOMWatcher",
    "PodContainerManager",
    "QOSContainerManager",
    "QOSContainersInfo",
    "ResourceConfig",
    "apply_oom_score_adj",
    "node_allocatable",
    "read_node_allocatable",
    "read_node_capacity",
    "resource_config_for_pod",
    "runtime_cgroup_driver",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
