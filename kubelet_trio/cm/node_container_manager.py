"""The node-allocatable cgroup ``kubepods`` and the reserved cgroups (Go:
``pkg/kubelet/cm/node_container_manager_linux.go``).

``kubepods`` holds every pod. Its CPU shares, memory limit and pids limit are the node's capacity or,
with ``enforceNodeAllocatable: [pods]``, capacity less ``kubeReserved`` and ``systemReserved`` (not the
eviction thresholds: eviction acts before the kernel's limit would). Without explicit values the
kernel's default of 1024 shares would starve the pods against system daemons.

With ``kube-reserved`` or ``system-reserved`` in ``enforceNodeAllocatable``, the cgroup the operator
runs those daemons in (``kubeReservedCgroup``, ``systemReservedCgroup``; it must exist, the kubelet does
not make it) is limited to the reservation, so the daemons cannot take what the pods were promised.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

import attrs

from kubelet_trio.api import Quantity
from kubelet_trio.cm.helpers import ResourceConfig, hugepage_limits, milli_cpu_to_shares

__all__ = [
    "ENFORCEMENT_KEYS",
    "FAILED_NODE_ALLOCATABLE_ENFORCEMENT",
    "KUBEPODS_CGROUP",
    "KUBE_RESERVED_ENFORCEMENT_KEY",
    "NODE_ALLOCATABLE_ENFORCED",
    "NONE_ENFORCEMENT_KEY",
    "PODS_ENFORCEMENT_KEY",
    "SYSTEM_RESERVED_ENFORCEMENT_KEY",
    "NodeCapacity",
    "kubepods_resource_config",
    "node_allocatable_absolute",
    "reserved_resource_config",
]

logger = logging.getLogger(__name__)

KUBEPODS_CGROUP = "kubepods"
#: ``enforceNodeAllocatable``'s values, in Go's order of its error text
PODS_ENFORCEMENT_KEY = "pods"
SYSTEM_RESERVED_ENFORCEMENT_KEY = "system-reserved"
KUBE_RESERVED_ENFORCEMENT_KEY = "kube-reserved"
NONE_ENFORCEMENT_KEY = "none"
ENFORCEMENT_KEYS = (
    PODS_ENFORCEMENT_KEY,
    SYSTEM_RESERVED_ENFORCEMENT_KEY,
    KUBE_RESERVED_ENFORCEMENT_KEY,
    NONE_ENFORCEMENT_KEY,
)
#: event reasons on the Node
NODE_ALLOCATABLE_ENFORCED = "NodeAllocatableEnforced"
FAILED_NODE_ALLOCATABLE_ENFORCEMENT = "FailedNodeAllocatableEnforcement"


@attrs.frozen
class NodeCapacity:
    """The machine, as the container manager sizes ``kubepods`` from it."""

    milli_cpu: int
    memory: int  # bytes
    pids: int = 0  # kernel.pid_max; 0 = unknown
    hugepages: Mapping[str, Quantity] = attrs.field(factory=dict)  # "hugepages-2Mi" → total


def node_allocatable_absolute(capacity: NodeCapacity, reserved: Iterable[Mapping[str, str]]) -> NodeCapacity:
    """Capacity less the reservations (Go: ``getNodeAllocatableAbsolute``), never below 0."""
    cpu, memory, pids = capacity.milli_cpu, capacity.memory, capacity.pids
    pages = {name: q.int_value() for name, q in capacity.hugepages.items()}
    for amounts in reserved:
        for name, text in amounts.items():
            quantity = Quantity(text)
            if name == "cpu":
                cpu -= quantity.milli_value()
            elif name == "memory":
                memory -= quantity.int_value()
            elif name == "pid":
                pids -= quantity.int_value()
            elif name in pages:
                pages[name] -= quantity.int_value()
    return NodeCapacity(
        milli_cpu=max(cpu, 0),
        memory=max(memory, 0),
        pids=max(pids, 0),
        hugepages={name: Quantity(str(max(v, 0))) for name, v in pages.items()},
    )


def kubepods_resource_config(
    capacity: NodeCapacity,
    *,
    enforce_pods: bool,
    reserved: Iterable[Mapping[str, str]] = (),
) -> ResourceConfig:
    """``kubepods``' values (Go: ``getCgroupConfig`` of capacity or of allocatable)."""
    amounts = node_allocatable_absolute(capacity, reserved) if enforce_pods else capacity
    return ResourceConfig(
        cpu_shares=milli_cpu_to_shares(amounts.milli_cpu),
        memory=amounts.memory or None,
        pids_limit=amounts.pids or None,
        hugepage_limits=hugepage_limits(amounts.hugepages),
    )


def reserved_resource_config(reserved: Mapping[str, str]) -> ResourceConfig:
    """A reserved cgroup's values from its reservation (Go: ``getCgroupConfig``): shares for ``cpu``,
    the limits for ``memory``, ``pid`` and huge pages; what is not reserved is left as it is."""
    quantities = {name: Quantity(text) for name, text in reserved.items()}
    cpu, memory, pids = quantities.get("cpu"), quantities.get("memory"), quantities.get("pid")
    return ResourceConfig(
        cpu_shares=milli_cpu_to_shares(cpu.milli_value()) if cpu is not None else None,
        memory=memory.int_value() if memory is not None else None,
        pids_limit=pids.int_value() if pids is not None else None,
        hugepage_limits=hugepage_limits(quantities),
    )
