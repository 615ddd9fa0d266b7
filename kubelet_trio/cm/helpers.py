"""Pod-level cgroup values from a pod spec (Go: ``pkg/kubelet/cm/helpers_linux.go``
``MilliCPUToShares``, ``MilliCPUToQuota``, ``HugePageLimits``, ``ResourceConfigForPod``, and
``pkg/api/v1/resource`` ``PodRequestsAndLimits``).

The pod cgroup bounds what the pod's containers may use together: the sum of the app containers'
requests and limits, at least the largest init container's (they run one at a time, before the app
containers), plus the RuntimeClass overhead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

import attrs

from kubelet_trio.api import Container, Pod, Quantity
from kubelet_trio.status.qos import BEST_EFFORT, BURSTABLE, GUARANTEED, pod_qos

__all__ = [
    "HUGEPAGES_PREFIX",
    "MAX_SHARES",
    "MILLI_CPU_TO_CPU",
    "MIN_QUOTA_PERIOD",
    "MIN_SHARES",
    "QUOTA_PERIOD",
    "SHARES_PER_CPU",
    "ResourceConfig",
    "container_requests",
    "hugepage_limits",
    "milli_cpu_to_quota",
    "milli_cpu_to_shares",
    "pod_requests_and_limits",
    "resource_config_for_pod",
]

MIN_SHARES = 2
MAX_SHARES = 262144
SHARES_PER_CPU = 1024
MILLI_CPU_TO_CPU = 1000
QUOTA_PERIOD = 100_000  # microseconds (100 ms)
MIN_QUOTA_PERIOD = 1_000  # microseconds (1 ms)
HUGEPAGES_PREFIX = "hugepages-"


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


@attrs.frozen
class ResourceConfig:
    """What a cgroup manager writes to one cgroup; None leaves the kernel's (or the last) value.

    ``cpu_quota`` -1 means unlimited; ``pids_limit`` -1 likewise. ``hugepage_limits`` maps a page size
    in bytes to a limit in bytes; given (even empty), every page size of the machine it leaves out is
    limited to 0, so a pod that asked for no huge pages gets none."""

    cpu_shares: int | None = None
    cpu_quota: int | None = None
    cpu_period: int | None = None
    memory: int | None = None
    pids_limit: int | None = None
    hugepage_limits: Mapping[int, int] | None = None
    hugepages_unbounded: bool = False  # every page size unlimited (the QoS tiers)


def hugepage_limits(resources: Mapping[str, Quantity] | None) -> dict[int, int]:
    """Page size (bytes) → bytes, from ``hugepages-<size>`` entries of a resource list."""
    limits: dict[int, int] = {}
    for name, quantity in (resources or {}).items():
        if name.startswith(HUGEPAGES_PREFIX):
            size = Quantity(name.removeprefix(HUGEPAGES_PREFIX)).int_value()
            limits[size] = limits.get(size, 0) + quantity.int_value()
    return limits


def container_requests(container: Container) -> dict[str, Quantity]:
    """The container's requests, a limit standing in for a missing request (the API server's
    defaulting, so an undefaulted static pod is sized as the API would show it)."""
    res = container.resources
    if res is None:
        return {}
    return {**(res.limits or {}), **(res.requests or {})}


def _container_limits(container: Container) -> dict[str, Quantity]:
    return dict(container.resources.limits or {}) if container.resources else {}


def _add(total: dict[str, Decimal], resources: Mapping[str, Quantity]) -> None:
    for name, quantity in resources.items():
        total[name] = total.get(name, Decimal(0)) + quantity.value


def _max(total: dict[str, Decimal], resources: Mapping[str, Quantity]) -> None:
    for name, quantity in resources.items():
        total[name] = max(total.get(name, quantity.value), quantity.value)


def _overhead(pod: Pod) -> dict[str, Quantity]:
    raw: Any = pod.spec.extra.get("overhead") if pod.spec else None
    if not isinstance(raw, Mapping):
        return {}
    return {str(name): Quantity.from_json(value) for name, value in raw.items()}


def _quantities(amounts: Mapping[str, Decimal]) -> dict[str, Quantity]:
    return {name: Quantity(format(value, "f")) for name, value in amounts.items()}


def pod_requests_and_limits(pod: Pod) -> tuple[dict[str, Quantity], dict[str, Quantity]]:
    """Requests and limits of the whole pod: the app containers' sum, at least each init container's,
    plus the overhead (added to every request, and to a limit only where the containers set one)."""
    spec = pod.spec
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    for container in (spec.containers if spec else None) or ():
        _add(requests, container_requests(container))
        _add(limits, _container_limits(container))
    for container in (spec.init_containers if spec else None) or ():
        _max(requests, container_requests(container))
        _max(limits, _container_limits(container))
    overhead = _overhead(pod)
    _add(requests, overhead)
    for name, quantity in overhead.items():
        if name in limits:
            limits[name] += quantity.value
    return _quantities(requests), _quantities(limits)


def _milli(resources: Mapping[str, Quantity], name: str) -> int:
    quantity = resources.get(name)
    return quantity.milli_value() if quantity is not None else 0


def _all_declare(containers: Iterable[Container], name: str) -> bool:
    return all(not _container_limits(c).get(name, Quantity("0")).is_zero() for c in containers)


def resource_config_for_pod(
    pod: Pod, *, enforce_cpu_limits: bool = True, cpu_period: int = QUOTA_PERIOD
) -> ResourceConfig:
    """The pod cgroup's values by QoS class: Guaranteed gets shares, quota and the memory limit;
    Burstable shares, and quota / memory limit only when every app container sets that limit;
    BestEffort the minimum shares. Huge pages are limited to the app containers' requests."""
    requests, limits = pod_requests_and_limits(pod)
    shares = milli_cpu_to_shares(_milli(requests, "cpu"))
    quota = milli_cpu_to_quota(_milli(limits, "cpu"), cpu_period) if enforce_cpu_limits else -1
    memory_limit = limits.get("memory")
    memory = memory_limit.int_value() if memory_limit is not None else 0
    containers = (pod.spec.containers if pod.spec else None) or ()
    pages: dict[int, int] = {}
    for container in containers:
        for size, amount in hugepage_limits(container_requests(container)).items():
            pages[size] = pages.get(size, 0) + amount
    qos = pod_qos(pod)
    if qos == GUARANTEED:
        return ResourceConfig(
            cpu_shares=shares, cpu_quota=quota, cpu_period=cpu_period, memory=memory, hugepage_limits=pages
        )
    if qos == BURSTABLE:
        cpu_declared = _all_declare(containers, "cpu")
        return ResourceConfig(
            cpu_shares=shares,
            cpu_quota=quota if cpu_declared else None,
            cpu_period=cpu_period if cpu_declared else None,
            memory=memory if _all_declare(containers, "memory") else None,
            hugepage_limits=pages,
        )
    assert qos == BEST_EFFORT
    return ResourceConfig(cpu_shares=MIN_SHARES, hugepage_limits=pages)
