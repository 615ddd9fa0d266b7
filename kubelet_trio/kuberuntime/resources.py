"""Container resources: CRI ``LinuxContainerResources`` from requests and limits, the OOM score by QoS
class, and resource values for the downward API (Go: ``kuberuntime_container_linux.go``
``calculateLinuxResources``, ``cm/helpers_linux.go`` ``MilliCPUToShares``/``MilliCPUToQuota``,
``qos/policy.go`` ``GetContainerOOMScoreAdjust``, ``pkg/api/v1/resource`` ``ExtractContainerResourceValue``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from kubelet_trio.api import Container, Pod, Quantity
from kubelet_trio.cm.helpers import (
    MAX_SHARES,
    MIN_QUOTA_PERIOD,
    MIN_SHARES,
    QUOTA_PERIOD,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
)
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.status.qos import BEST_EFFORT, GUARANTEED, pod_qos

__all__ = [
    "BESTEFFORT_OOM_SCORE_ADJ",
    "GUARANTEED_OOM_SCORE_ADJ",
    "MAX_SHARES",
    "MIN_QUOTA_PERIOD",
    "MIN_SHARES",
    "QUOTA_PERIOD",
    "container_oom_score_adj",
    "linux_container_resources",
    "milli_cpu_to_quota",
    "milli_cpu_to_shares",
]

logger = logging.getLogger(__name__)

GUARANTEED_OOM_SCORE_ADJ = -997
BESTEFFORT_OOM_SCORE_ADJ = 1000
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
NODE_CRITICAL_PRIORITY_CLASS = "system-node-critical"


def _quantity(resources: Mapping[str, Quantity] | None, name: str) -> Quantity | None:
    return (resources or {}).get(name)


def _is_node_critical(pod: Pod) -> bool:
    spec = pod.spec
    if spec is None or spec.priority_class_name != NODE_CRITICAL_PRIORITY_CLASS:
        return False
    return (
        pod.is_static
        or pod.is_mirror
        or (spec.priority is not None and spec.priority >= SYSTEM_CRITICAL_PRIORITY)
    )


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
