"""A container's ``resources`` and ``allocatedResources`` in its API status (Go: ``kubelet_pods.go``
``convertContainerStatusResources``, ``kuberuntime_container.go`` ``sharesToMilliCPU``/``quotaToMilliCPU``).

``allocatedResources`` is the allocated requests. ``resources`` starts from the allocated requirements;
for a running container the runtime's values replace CPU and memory limits (when the container has limits)
and the CPU and memory requests (when it has requests): CPU from the cgroup shares and CFS quota, the
memory limit from the cgroup, the memory request (which no cgroup holds) as last actuated. A CPU value
at or below the kernel's minimum on both sides keeps the allocated one; a value the runtime does not
report keeps the previous status's while the same instance runs.
"""

from __future__ import annotations

import math
from typing import Any

from kubelet_trio.api import Quantity
from kubelet_trio.api.container import Container
from kubelet_trio.api.status import ContainerStatus
from kubelet_trio.container.types import ContainerState as RuntimeState
from kubelet_trio.container.types import ContainerStatus as RuntimeContainerStatus

__all__ = ["MIN_MILLI_CPU_LIMIT", "binary_quantity", "container_status_resources", "milli_quantity"]

MIN_SHARES = 2
SHARES_PER_CPU = 1024
MIN_MILLI_CPU_LIMIT = 10  # Go cm.MinMilliCPULimit: MinQuotaPeriod (1000 µs) over the 100 ms period
_BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def milli_quantity(milli: int) -> str:
    """Go ``NewMilliQuantity(milli, DecimalSI)`` as the API shows it."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def binary_quantity(value: int) -> str:
    """Go ``NewQuantity(value, BinarySI)`` as the API shows it."""
    suffix = 0
    while value and value % 1024 == 0 and suffix < len(_BINARY) - 1:
        value //= 1024
        suffix += 1
    return f"{value}{_BINARY[suffix]}"


def _shares_to_milli(shares: int) -> int:
    return math.ceil(shares * 1000 / SHARES_PER_CPU) if shares >= MIN_SHARES else 0


def _quota_to_milli(quota: int, period: int) -> int:
    return 0 if quota == -1 or period <= 0 else quota * 1000 // period


def _milli(values: dict[str, Any], name: str) -> int:
    raw = values.get(name)
    return Quantity.from_json(raw).milli_value() if raw is not None else 0


def _requests(container: Container) -> dict[str, Any] | None:
    res = container.resources
    requests = (res.requests if res else None) or {}
    return {k: v.canonical() for k, v in requests.items()} or None


def container_status_resources(
    container: Container,
    status: ContainerStatus,
    runtime: RuntimeContainerStatus,
    old: ContainerStatus | None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(``resources``, ``allocatedResources``) of ``container`` (allocated) for its newest instance."""
    res = container.resources
    limits: dict[str, Any] | None = {
        k: v.canonical() for k, v in ((res.limits if res else None) or {}).items()
    }
    requests: dict[str, Any] | None = _requests(container)
    limits = limits or None
    allocated = _requests(container)
    if runtime.state is not RuntimeState.RUNNING:
        return _requirements(limits, requests), allocated
    same = (
        old is not None
        and old.state is not None
        and old.state.running is not None
        and old.container_id == status.container_id
    )
    old_resources = (old.resources if same and old is not None else None) or {}

    def keep(values: dict[str, Any], group: str, name: str) -> None:
        previous = (old_resources.get(group) or {}).get(name)
        if previous is not None:
            values[name] = previous

    actual = runtime.resources
    if limits is not None:
        cpu_limit = (
            _quota_to_milli(actual.cpu_quota, actual.cpu_period) if actual and actual.cpu_period else 0
        )
        if cpu_limit:
            if cpu_limit > MIN_MILLI_CPU_LIMIT or _milli(limits, "cpu") > MIN_MILLI_CPU_LIMIT:
                limits["cpu"] = milli_quantity(cpu_limit)
        else:
            keep(limits, "limits", "cpu")
        if actual is not None and actual.memory_limit > 0:
            limits["memory"] = binary_quantity(actual.memory_limit)
        else:
            keep(limits, "limits", "memory")
    if requests is not None:
        cpu_request = _shares_to_milli(actual.cpu_shares) if actual is not None else 0
        if cpu_request:
            if cpu_request > MIN_SHARES or _milli(requests, "cpu") > MIN_SHARES:
                requests["cpu"] = milli_quantity(cpu_request)
        else:
            keep(requests, "requests", "cpu")
        if actual is not None and actual.memory_request is not None:
            requests["memory"] = binary_quantity(actual.memory_request)
        else:
            keep(requests, "requests", "memory")
    return _requirements(limits, requests), allocated


def _requirements(limits: dict[str, Any] | None, requests: dict[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if limits:
        out["limits"] = limits
    if requests:
        out["requests"] = requests
    return out
