"""Node-level resource management (Go: ``pkg/kubelet/cm``): what the node offers pods, and the cgroup
tree they run in."""

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
