"""Pod QoS class (Go: ``pkg/apis/core/v1/helper/qos/qos.go``)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from kubelet_trio.api.pod import Pod, PodSpec
from kubelet_trio.api.quantity import Quantity

__all__ = ["BEST_EFFORT", "BURSTABLE", "GUARANTEED", "compute_pod_qos", "pod_qos"]

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"

_QOS_RESOURCES = ("cpu", "memory")


def _add_positive(total: dict[str, Decimal], resources: Mapping[str, Quantity] | None) -> set[str]:
    found: set[str] = set()
    for name, quantity in (resources or {}).items():
        if name in _QOS_RESOURCES and quantity.value > 0:
            found.add(name)
            total[name] = total.get(name, Decimal(0)) + quantity.value
    return found


def compute_pod_qos(spec: PodSpec | None) -> str:
    """The QoS class from the containers' and init containers' cpu/memory requests and limits.

    A limit without a request counts as a request of the same value (the API server's defaulting), so
    undefaulted manifests classify the same way as the API would show them.
    """
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    for container in spec.all_containers() if spec else ():
        res = container.resources
        container_limits = dict(res.limits or {}) if res else {}
        container_requests = {**container_limits, **(res.requests or {})} if res else {}
        _add_positive(requests, container_requests)
        if not {"cpu", "memory"} <= _add_positive(limits, container_limits):
            guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    if guaranteed and requests.keys() == limits.keys() and all(limits[k] == v for k, v in requests.items()):
        return GUARANTEED
    return BURSTABLE


def pod_qos(pod: Pod) -> str:
    """``status.qosClass`` once set (it is immutable), else computed (Go: ``GetPodQOS``)."""
    if pod.status is not None and pod.status.qos_class:
        return pod.status.qos_class
    return compute_pod_qos(pod.spec)
