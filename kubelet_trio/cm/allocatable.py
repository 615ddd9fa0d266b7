"""Node capacity and allocatable (Go: ``cm/node_container_manager_linux.go``
``GetNodeAllocatableReservation``, ``cm/container_manager_linux.go`` capacity from the machine).

Allocatable is capacity less ``kubeReserved``, ``systemReserved`` and the hard eviction thresholds; the
Node reports it, the downward API uses it as the default limit and memory-backed volumes as their size.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping

import attrs

from kubelet_trio import defaults
from kubelet_trio.api import Quantity
from kubelet_trio.logs import kv

__all__ = [
    "DEFAULT_EVICTION_HARD",
    "NodeAllocatable",
    "node_allocatable",
    "read_node_allocatable",
    "read_node_capacity",
]

logger = logging.getLogger(__name__)

#: The Go kubelet's default hard eviction thresholds (``evictionHard``); allocatable leaves them out.
DEFAULT_EVICTION_HARD: Mapping[str, str] = defaults.EVICTION_HARD


@attrs.frozen
class NodeAllocatable:
    """What the node offers pods (capacity less kube/system reserved and hard eviction thresholds, as in
    the Node's ``status.allocatable``): the default limits the downward API reports for containers
    without limits, and the size of memory-backed volumes. ``memory_capacity`` (the machine's memory)
    scales the OOM score of burstable containers; 0 means ``memory``."""

    milli_cpu: int
    memory: int  # bytes
    ephemeral_storage: int = 0  # bytes; 0 = unknown
    memory_capacity: int = 0  # bytes

    @property
    def oom_memory_capacity(self) -> int:
        return self.memory_capacity or self.memory


def _eviction_reserve(threshold: str | None, capacity: int) -> int:
    """Bytes a hard eviction threshold (a quantity or a percentage of capacity) keeps from pods."""
    if not threshold:
        return 0
    if threshold.endswith("%"):
        return int(capacity * float(threshold[:-1]) / 100)
    return Quantity(threshold).int_value()


def node_allocatable(
    capacity: NodeAllocatable,
    *,
    reserved: Iterable[Mapping[str, str]] = (),
    eviction_hard: Mapping[str, str] = DEFAULT_EVICTION_HARD,
) -> NodeAllocatable:
    """Go's allocatable (``GetNodeAllocatableReservation``): ``capacity`` less every ``reserved`` map
    (``kubeReserved``, ``systemReserved``) and the ``memory.available`` / ``nodefs.available`` hard
    eviction thresholds; never below 0."""
    cpu, memory, storage = capacity.milli_cpu, capacity.memory, capacity.ephemeral_storage
    for amounts in reserved:
        if "cpu" in amounts:
            cpu -= Quantity(amounts["cpu"]).milli_value()
        if "memory" in amounts:
            memory -= Quantity(amounts["memory"]).int_value()
        if "ephemeral-storage" in amounts:
            storage -= Quantity(amounts["ephemeral-storage"]).int_value()
    memory -= _eviction_reserve(eviction_hard.get("memory.available"), capacity.memory)
    storage -= _eviction_reserve(eviction_hard.get("nodefs.available"), capacity.ephemeral_storage)
    return NodeAllocatable(
        milli_cpu=max(cpu, 0),
        memory=max(memory, 0),
        ephemeral_storage=max(storage, 0),
        memory_capacity=capacity.memory,
    )


def _fs_capacity(path: str) -> int:
    """Size of the filesystem holding ``path`` or, before it exists, its nearest existing parent."""
    current = os.path.abspath(path)
    while not os.path.exists(current) and os.path.dirname(current) != current:
        current = os.path.dirname(current)
    try:
        stat = os.statvfs(current)
    except OSError:
        return 0
    return stat.f_blocks * stat.f_frsize


def read_node_capacity(root_dir: str = "/") -> NodeAllocatable:
    """The machine's CPUs, memory (``/proc/meminfo`` MemTotal) and the size of the filesystem holding
    ``root_dir``; blocking, small."""
    memory = 0
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    memory = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError) as err:
        logger.warning("cannot read /proc/meminfo", extra=kv(err=err))
    return NodeAllocatable(
        milli_cpu=(os.cpu_count() or 1) * 1000,
        memory=memory,
        ephemeral_storage=_fs_capacity(root_dir),
        memory_capacity=memory,
    )


def read_node_allocatable(
    root_dir: str = "/",
    *,
    reserved: Iterable[Mapping[str, str]] = (),
    eviction_hard: Mapping[str, str] = DEFAULT_EVICTION_HARD,
) -> NodeAllocatable:
    """:func:`node_allocatable` of this machine (what the Node reports as ``status.allocatable``)."""
    return node_allocatable(read_node_capacity(root_dir), reserved=reserved, eviction_hard=eviction_hard)
