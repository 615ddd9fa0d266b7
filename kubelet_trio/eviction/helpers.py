"""The eviction manager's pure decisions (Go: ``pkg/kubelet/eviction/helpers.go``): which thresholds are
met, since when, which node conditions they raise, how pods are ranked, and the eviction message.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence

from kubelet_trio.api import Pod, Quantity
from kubelet_trio.api.container import Container
from kubelet_trio.eviction.api import (
    ALLOCATABLE_MEMORY_AVAILABLE,
    IMAGEFS_AVAILABLE,
    IMAGEFS_INODES_FREE,
    MEMORY_AVAILABLE,
    MEMORY_SIGNALS,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
    PID_AVAILABLE,
    Threshold,
)
from kubelet_trio.eviction.signals import Observation
from kubelet_trio.eviction.usage import PodUsage
from kubelet_trio.lifecycle.predicate import pod_requests

__all__ = [
    "DISK_PRESSURE",
    "MEMORY_PRESSURE",
    "PID_PRESSURE",
    "REASON",
    "SYSTEM_CRITICAL_PRIORITY",
    "FsStats",
    "RankFunc",
    "eviction_message",
    "is_critical_pod",
    "node_conditions",
    "rank_disk_pressure",
    "rank_functions",
    "rank_memory_pressure",
    "rank_pid_pressure",
    "signal_resource",
    "thresholds_met",
]

REASON = "Evicted"
MEMORY_PRESSURE = "MemoryPressure"
DISK_PRESSURE = "DiskPressure"
PID_PRESSURE = "PIDPressure"
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000  # Go: scheduling.SystemCriticalPriority

NODE_LOW_MESSAGE = "The node was low on resource: {}. "
THRESHOLD_MET_MESSAGE = "Threshold quantity: {}, available: {}. "
CONTAINER_MESSAGE = "Container {} was using {}, request is {}, has larger consumption of {}. "
EMPTY_DIR_MESSAGE = 'Usage of EmptyDir volume "{}" exceeds the limit "{}". '
POD_EPHEMERAL_MESSAGE = "Pod ephemeral local storage usage exceeds the total limit of containers {}. "
CONTAINER_EPHEMERAL_MESSAGE = 'Container {} exceeded its local ephemeral storage limit "{}". '

_CONDITION = {
    MEMORY_AVAILABLE: MEMORY_PRESSURE,
    ALLOCATABLE_MEMORY_AVAILABLE: MEMORY_PRESSURE,
    NODEFS_AVAILABLE: DISK_PRESSURE,
    NODEFS_INODES_FREE: DISK_PRESSURE,
    IMAGEFS_AVAILABLE: DISK_PRESSURE,
    IMAGEFS_INODES_FREE: DISK_PRESSURE,
    PID_AVAILABLE: PID_PRESSURE,
}
_RESOURCE = {
    MEMORY_AVAILABLE: "memory",
    ALLOCATABLE_MEMORY_AVAILABLE: "memory",
    NODEFS_AVAILABLE: "ephemeral-storage",
    NODEFS_INODES_FREE: "inodes",
    IMAGEFS_AVAILABLE: "ephemeral-storage",
    IMAGEFS_INODES_FREE: "inodes",
    PID_AVAILABLE: "pids",
}


def signal_resource(signal: str) -> str:
    """The resource a signal measures (``memory``, ``ephemeral-storage``, ``inodes``, ``pids``)."""
    return _RESOURCE[signal]


def format_amount(resource: str, amount: int) -> str:
    """As Go prints the quantity: bytes in BinarySI (``100Mi``), counts in DecimalSI (``5k``)."""
    if resource in ("memory", "ephemeral-storage") and amount >= 1024:
        power = 0
        while amount % 1024 == 0 and power < 6:
            amount //= 1024
            power += 1
        return f"{amount}{('', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei')[power]}"
    return Quantity(str(amount)).canonical()


def threshold_amount(threshold: Threshold, observation: Observation) -> str:
    """The threshold as Go reports it: the configured quantity, or the percentage of capacity."""
    if threshold.value.quantity is not None:
        return threshold.value.quantity.canonical()
    return format_amount(signal_resource(threshold.signal), threshold.value.amount(observation.capacity))


def thresholds_met(
    thresholds: Iterable[Threshold], observations: Mapping[str, Observation], *, enforce_min_reclaim: bool
) -> list[Threshold]:
    """Go ``thresholdsMet``: thresholds whose signal is below the value (plus the minimum reclaim when
    ``enforce_min_reclaim``), grace periods aside."""
    met = []
    for threshold in thresholds:
        observed = observations.get(threshold.signal)
        if observed is None:
            continue
        quantity = threshold.value.amount(observed.capacity)
        if enforce_min_reclaim and threshold.min_reclaim is not None:
            quantity += threshold.min_reclaim.amount(observed.capacity)
        if quantity > observed.available:
            met.append(threshold)
    return met


def node_conditions(thresholds: Iterable[Threshold]) -> list[str]:
    """The node conditions the thresholds raise, each once, in order."""
    out: list[str] = []
    for threshold in thresholds:
        condition = _CONDITION.get(threshold.signal)
        if condition is not None and condition not in out:
            out.append(condition)
    return out


def pod_priority(pod: Pod) -> int:
    return (pod.spec.priority if pod.spec else None) or 0


def is_critical_pod(pod: Pod) -> bool:
    """Go ``IsCriticalPod``: static and mirror pods, and pods of system-critical priority."""
    return pod.is_static or pod.is_mirror or pod_priority(pod) >= SYSTEM_CRITICAL_PRIORITY


# -- ranking ----------------------------------------------------------------------------------------------

#: Which parts of a pod's disk use a ranking measures (Go: fsStatsType).
FsStats = frozenset[str]
ROOT, LOGS, LOCAL_VOLUMES = "root", "logs", "localVolumes"
RankFunc = Callable[[list[Pod], Mapping[str, PodUsage]], None]
_Cmp = Callable[[Pod, Pod], int]


def _cmp_bool(a: bool, b: bool) -> int:
    """True first."""
    return 0 if a == b else (-1 if a else 1)


def _ordered_by(pods: list[Pod], *cmps: _Cmp) -> None:
    def compare(p1: Pod, p2: Pod) -> int:
        for cmp in cmps:
            result = cmp(p1, p2)
            if result:
                return result
        return 0

    pods.sort(key=functools.cmp_to_key(compare))  # stable: ties keep the active pods' order


def _by_priority(p1: Pod, p2: Pod) -> int:
    a, b = pod_priority(p1), pod_priority(p2)
    return (a > b) - (a < b)


def _with_stats(
    stats: Mapping[str, PodUsage], measure: Callable[[Pod, PodUsage], int]
) -> Callable[[Pod], int | None]:
    def get(pod: Pod) -> int | None:
        usage = stats.get(pod.uid)
        return None if usage is None else measure(pod, usage)

    return get


def _exceeds_requests(value: Callable[[Pod], int | None], resource: str) -> _Cmp:
    def cmp(p1: Pod, p2: Pod) -> int:
        u1, u2 = value(p1), value(p2)
        if u1 is None or u2 is None:
            return _cmp_bool(u1 is None, u2 is None)  # no stats: evicted first
        r1, r2 = pod_requests(p1).get(resource, 0), pod_requests(p2).get(resource, 0)
        return _cmp_bool(u1 > r1, u2 > r2)

    return cmp


def _usage_above_requests(value: Callable[[Pod], int | None], resource: str) -> _Cmp:
    def cmp(p1: Pod, p2: Pod) -> int:
        u1, u2 = value(p1), value(p2)
        if u1 is None or u2 is None:
            return _cmp_bool(u1 is None, u2 is None)
        a = u1 - pod_requests(p1).get(resource, 0)
        b = u2 - pod_requests(p2).get(resource, 0)
        return (b > a) - (b < a)  # the larger consumer first

    return cmp


def rank_memory_pressure(pods: list[Pod], stats: Mapping[str, PodUsage]) -> None:
    """Exceeds its memory request first, then lower priority, then more memory above the request."""
    memory = _with_stats(stats, lambda _pod, usage: usage.memory_working_set)
    _ordered_by(
        pods, _exceeds_requests(memory, "memory"), _by_priority, _usage_above_requests(memory, "memory")
    )


def rank_pid_pressure(pods: list[Pod], stats: Mapping[str, PodUsage]) -> None:
    """Lower priority first, then more processes."""
    processes = _with_stats(stats, lambda _pod, usage: usage.processes)

    def by_processes(p1: Pod, p2: Pod) -> int:
        a, b = processes(p1), processes(p2)
        if a is None or b is None:
            return _cmp_bool(a is None, b is None)
        return (b > a) - (b < a)

    _ordered_by(pods, _by_priority, by_processes)


def _disk(usage: PodUsage, measured: FsStats, inodes: bool) -> int:
    total = 0
    if ROOT in measured:
        total += usage.rootfs_inodes if inodes else usage.rootfs_bytes
    if LOGS in measured:
        total += usage.logs_inodes if inodes else usage.logs_bytes
    if LOCAL_VOLUMES in measured:
        total += usage.volume_inodes if inodes else usage.volume_bytes
    return total


def rank_disk_pressure(measured: FsStats, *, inodes: bool) -> RankFunc:
    """Exceeds its ephemeral-storage request first, then lower priority, then more use above it."""
    resource = "inodes" if inodes else "ephemeral-storage"

    def rank(pods: list[Pod], stats: Mapping[str, PodUsage]) -> None:
        disk = _with_stats(stats, lambda _pod, usage: _disk(usage, measured, inodes))
        _ordered_by(
            pods, _exceeds_requests(disk, resource), _by_priority, _usage_above_requests(disk, resource)
        )

    return rank


def rank_functions(dedicated_image_fs: bool) -> dict[str, RankFunc]:
    """Go ``buildSignalToRankFunc`` (without a separate container filesystem): with a dedicated imagefs,
    nodefs pressure measures logs and local volumes and imagefs pressure the writable layers; on one
    filesystem every signal measures everything."""
    ranks: dict[str, RankFunc] = dict.fromkeys(MEMORY_SIGNALS, rank_memory_pressure)
    ranks[PID_AVAILABLE] = rank_pid_pressure
    everything = frozenset({ROOT, LOGS, LOCAL_VOLUMES})
    nodefs = frozenset({LOGS, LOCAL_VOLUMES}) if dedicated_image_fs else everything
    imagefs = frozenset({ROOT}) if dedicated_image_fs else everything
    ranks[NODEFS_AVAILABLE] = rank_disk_pressure(nodefs, inodes=False)
    ranks[NODEFS_INODES_FREE] = rank_disk_pressure(nodefs, inodes=True)
    ranks[IMAGEFS_AVAILABLE] = rank_disk_pressure(imagefs, inodes=False)
    ranks[IMAGEFS_INODES_FREE] = rank_disk_pressure(imagefs, inodes=True)
    return ranks


# -- the message ------------------------------------------------------------------------------------------


def eviction_message(
    resource: str,
    pod: Pod,
    stats: Mapping[str, PodUsage],
    thresholds: Sequence[Threshold],
    observations: Mapping[str, Observation],
) -> str:
    """Go ``evictionMessage``: the starved resource, the threshold and what was available, then each
    container using more of a memory or ephemeral-storage than it requested."""
    message = NODE_LOW_MESSAGE.format(resource)
    for threshold in thresholds:
        observed = observations.get(threshold.signal)
        if signal_resource(threshold.signal) == resource and observed is not None:
            available = format_amount(resource, observed.available)
            message += THRESHOLD_MET_MESSAGE.format(threshold_amount(threshold, observed), available)
            break
    usage = stats.get(pod.uid)
    if usage is None or resource not in ("memory", "ephemeral-storage") or pod.spec is None:
        return message
    containers = (*(pod.spec.containers or ()), *(pod.spec.init_containers or ()))
    for name, used in usage.containers.items():
        spec = next((c for c in containers if c.name == name), None)
        if spec is None:
            continue
        amount = used.memory_working_set if resource == "memory" else used.rootfs_bytes + used.logs_bytes
        requested = ((spec.resources.requests if spec.resources else None) or {}).get(resource)
        request = requested.int_value() if requested is not None else 0
        if amount > request:
            shown = requested.canonical() if requested is not None else "0"
            message += CONTAINER_MESSAGE.format(name, format_amount(resource, amount), shown, resource)
    return message


# -- local storage limits ---------------------------------------------------------------------------------


def _ephemeral_limit(container: Container) -> Quantity | None:
    limits = (container.resources.limits if container.resources else None) or {}
    limit = limits.get("ephemeral-storage")
    return limit if limit is not None and not limit.is_zero() else None


def has_local_storage_limits(pod: Pod) -> bool:
    """The pod limits its local storage: an emptyDir ``sizeLimit`` or an ephemeral-storage limit."""
    spec = pod.spec
    if spec is None:
        return False
    if any(v.empty_dir is not None and v.empty_dir.size_limit is not None for v in spec.volumes or ()):
        return True
    return any(
        _ephemeral_limit(c) is not None for c in (*(spec.containers or ()), *(spec.init_containers or ()))
    )


EMPTY_DIR_LIMIT = "emptydirfs.limit"  # Go's names for these evictions (the kubelet_evictions signal)
POD_EPHEMERAL_LIMIT = "ephemeralpodfs.limit"
CONTAINER_EPHEMERAL_LIMIT = "ephemeralcontainerfs.limit"


def local_storage_violation(pod: Pod, usage: PodUsage, *, dedicated_image_fs: bool) -> tuple[str, str] | None:
    """Go ``localStorageEviction``: why the pod must go for exceeding its own local storage limits (an
    emptyDir over its ``sizeLimit``, the pod over the sum of its containers' ephemeral-storage limits, a
    container's logs, and writable layer without a dedicated imagefs, over its limit) as (the limit's
    signal name, the message), or None."""
    spec = pod.spec
    if spec is None:
        return None
    for volume in spec.volumes or ():
        size = volume.empty_dir.size_limit if volume.empty_dir is not None else None
        used = usage.volumes.get(volume.name or "")
        if size is not None and size.value > 0 and used is not None and used > size.int_value():
            return EMPTY_DIR_LIMIT, EMPTY_DIR_MESSAGE.format(volume.name, size.canonical())
    containers = spec.containers or ()
    limits = [limit.int_value() for c in containers if (limit := _ephemeral_limit(c)) is not None]
    init_limits = [limit.int_value() for c in spec.init_containers or () if (limit := _ephemeral_limit(c))]
    if limits or init_limits:  # Go PodLimits: the app containers' sum, at least the largest init one
        total = max(sum(limits), *init_limits) if init_limits else sum(limits)
        if usage.ephemeral_bytes > total:
            return POD_EPHEMERAL_LIMIT, POD_EPHEMERAL_MESSAGE.format(
                format_amount("ephemeral-storage", total)
            )
    for container in containers:
        limit = _ephemeral_limit(container)
        used_by = usage.containers.get(container.name or "")
        if limit is None or used_by is None:
            continue
        used = used_by.logs_bytes + (0 if dedicated_image_fs else used_by.rootfs_bytes)
        if used > limit.int_value():
            return CONTAINER_EPHEMERAL_LIMIT, CONTAINER_EPHEMERAL_MESSAGE.format(
                container.name, limit.canonical()
            )
    return None
