"""Container resources: CRI ``LinuxContainerResources`` from requests and limits, the OOM score by QoS
class, and resource values for the downward API (Go: ``kuberuntime_container_linux.go``
``calculateLinuxResources``, ``cm/helpers_linux.go`` ``MilliCPUToShares``/``MilliCPUToQuota``,
``qos/policy.go`` ``GetContainerOOMScoreAdjust``, ``pkg/api/v1/resource`` ``ExtractContainerResourceValue``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping

import attrs

from kubelet_trio import defaults
from kubelet_trio.api import Container, Pod, Quantity, ResourceFieldSelector
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.logs import kv
from kubelet_trio.status.qos import BEST_EFFORT, GUARANTEED, pod_qos

__all__ = [
    "BESTEFFORT_OOM_SCORE_ADJ",
    "DEFAULT_EVICTION_HARD",
    "GUARANTEED_OOM_SCORE_ADJ",
    "MAX_SHARES",
    "MIN_QUOTA_PERIOD",
    "MIN_SHARES",
    "QUOTA_PERIOD",
    "NodeAllocatable",
    "container_oom_score_adj",
    "container_resource_value",
    "linux_container_resources",
    "milli_cpu_to_quota",
    "milli_cpu_to_shares",
    "node_allocatable",
    "read_node_allocatable",
    "read_node_capacity",
]

logger = logging.getLogger(__name__)

MIN_SHARES = 2
MAX_SHARES = 262144
SHARES_PER_CPU = 1024
MILLI_CPU_TO_CPU = 1000
QUOTA_PERIOD = 100_000  # microseconds (100 ms)
MIN_QUOTA_PERIOD = 1_000  # microseconds (1 ms)
GUARANTEED_OOM_SCORE_ADJ = -997
BESTEFFORT_OOM_SCORE_ADJ = 1000
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
NODE_CRITICAL_PRIORITY_CLASS = "system-node-critical"


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


def milli_cpu_to_shares(milli_cpu: int) -> int:
    """CFS shares: 1024 per CPU, at least 2 (the kernel's minimum, also for "no request")."""
    if milli_cpu == 0:
        return MIN_SHARES
    shares = (milli_cpu * SHARES_PER_CPU) // MILLI_CPU_TO_CPU
    return max(MIN_SHARES, min(shares, MAX_SHARES))


def milli_cpu_to_quota(milli_cpu: int, period: int = QUOTA_PERIOD) -> int:
    """CFS quota (µs per ``period``) for a CPU limit; 0 = no limit; at least 1 ms."""
    if milli_cpu == 0:
        return 0
    return max((milli_cpu * period) // MILLI_CPU_TO_CPU, MIN_QUOTA_PERIOD)


def _quantity(resources: Mapping[str, Quantity] | None, name: str) -> Quantity | None:
    return (resources or {}).get(name)


def _is_node_critical(pod: Pod) -> bool:
    spec = pod.spec
    if spec is None or spec.priority_class_name != NODE_CRITICAL_PRIORITY_CLASS:
        return False
    static = pod.annotations.get("kubernetes.io/config.source", "api") != "api"
    mirror = "kubernetes.io/config.mirror" in pod.annotations
    return static or mirror or (spec.priority is not None and spec.priority >= SYSTEM_CRITICAL_PRIORITY)


def container_oom_score_adj(pod: Pod, container: Container, memory_capacity: int) -> int:
    """``GetContainerOOMScoreAdjust``: -997 for Guaranteed (and node-critical) pods, 1000 for
    BestEffort, and for Burstable ``1000 - 1000 * request / capacity`` kept within [3, 999]."""
    if _is_node_critical(pod):
        return GUARANTEED_OOM_SCORE_ADJ
    qos = pod_qos(pod)
    if qos == GUARANTEED:
        return GUARANTEED_OOM_SCORE_ADJ
    if qos == BEST_EFFORT:
        return BESTEFFORT_OOM_SCORE_ADJ
    request = _quantity(container.resources.requests if container.resources else None, "memory")
    memory_request = request.int_value() if request is not None else 0
    if memory_capacity <= 0:
        return BESTEFFORT_OOM_SCORE_ADJ - 1
    adj = 1000 - (1000 * memory_request) // memory_capacity
    if adj < 1000 + GUARANTEED_OOM_SCORE_ADJ:
        return 1000 + GUARANTEED_OOM_SCORE_ADJ
    if adj == BESTEFFORT_OOM_SCORE_ADJ:
        return adj - 1
    return adj


def linux_container_resources(
    pod: Pod, container: Container, memory_capacity: int = 0
) -> pb.LinuxContainerResources:
    """``generateLinuxContainerResources``: shares from the CPU request (or the limit when no request),
    CFS quota over a 100 ms period from the CPU limit, the memory limit, and the OOM score."""
    res = container.resources
    requests = res.requests if res else None
    limits = res.limits if res else None
    cpu_request = _quantity(requests, "cpu")
    cpu_limit = _quantity(limits, "cpu")
    memory_limit = _quantity(limits, "memory")
    limit_milli = cpu_limit.milli_value() if cpu_limit is not None else 0
    if cpu_request is None and limit_milli:
        shares = milli_cpu_to_shares(limit_milli)
    else:
        shares = milli_cpu_to_shares(cpu_request.milli_value() if cpu_request is not None else 0)
    resources = pb.LinuxContainerResources(
        cpu_shares=shares,
        cpu_period=QUOTA_PERIOD,
        cpu_quota=milli_cpu_to_quota(limit_milli),
        oom_score_adj=container_oom_score_adj(pod, container, memory_capacity),
    )
    if memory_limit is not None and memory_limit.int_value():
        resources.memory_limit_in_bytes = memory_limit.int_value()
    return resources


# --- the downward API's resource values ---------------------------------------------------------


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def _find_container(pod: Pod, name: str) -> Container:
    for container in pod.spec.all_containers() if pod.spec else ():
        if container.name == name:
            return container
    raise ValueError(f"container {name} not found")


def container_resource_value(
    selector: ResourceFieldSelector,
    pod: Pod,
    container: Container | None,
    allocatable: NodeAllocatable | None = None,
) -> str:
    """``ExtractContainerResourceValue`` with ``defaultPodLimitsForDownwardAPI``: a missing limit reads as
    the node's allocatable; CPU is ceil(milli / divisor milli), the others ceil(value / divisor).

    ``selector.container_name`` picks the container (volumes must name one; env defaults to its own).
    Raises ValueError for an unknown resource or container.
    """
    if selector.container_name:
        container = _find_container(pod, selector.container_name)
    if container is None:
        raise ValueError("resourceFieldRef needs a containerName")
    divisor = selector.divisor
    if divisor is None or divisor.is_zero():
        divisor = Quantity("1")
    res = container.resources
    resource = selector.resource or ""
    kind, _, name = resource.partition(".")
    if kind not in ("limits", "requests") or not name:
        raise ValueError(f"unsupported container resource : {resource}")
    source = (res.limits if kind == "limits" else res.requests) if res else None
    value = _quantity(source, name)
    if value is None and kind == "limits" and allocatable is not None:
        default = {
            "cpu": Quantity(f"{allocatable.milli_cpu}m"),
            "memory": Quantity(str(allocatable.memory)),
            "ephemeral-storage": Quantity(str(allocatable.ephemeral_storage)),
        }.get(name)
        value = default
    if name == "cpu":
        milli = value.milli_value() if value is not None else 0
        return str(_ceil_div(milli, max(divisor.milli_value(), 1)))
    if name in ("memory", "ephemeral-storage") or name.startswith("hugepages-"):
        amount = value.int_value() if value is not None else 0
        return str(_ceil_div(amount, max(divisor.int_value(), 1)))
    raise ValueError(f"unsupported container resource : {resource}")
