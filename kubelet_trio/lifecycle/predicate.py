"""Pod admission: may this node run this pod, given the pods it already runs? (``lifecycle/predicate.go``
``PredicateAdmitHandler``, the scheduler's ``AdmissionCheck``).

Checked in Go's order, the first failure deciding the reason: the OS (``kubernetes.io/os`` selector,
``spec.os``), then resources against the node's *allocatable* minus the requests of the other active pods
(pod count first, then cpu, memory, ephemeral-storage: ``OutOfpods``, ``OutOfcpu``, ...), then node
selector and required node affinity (``NodeAffinity``), ``spec.nodeName`` (``NodeName``), host ports
(``NodePorts``) and untolerated NoExecute taints (``TaintToleration``; static pods are exempt). A
rejected pod is Failed for good with ``message = "Pod was rejected: <message>"``; it is never retried.
Requests include ``spec.overhead`` (set from the pod's RuntimeClass by the API server), for the pod being
admitted and for the pods already running, as the scheduler's fit does.

A kubelet without an API server has no Node object to fit against. It still counts pods, as Go's
standalone kubelet does against its initial Node (allocatable pods = ``maxPods``): :func:`admit_pod_count`
rejects a pod beyond ``maxPods`` with ``OutOfpods``. And it has no RuntimeClasses (``node.k8s.io``) to
resolve a ``runtimeClassName`` with, so :func:`admit_standalone` rejects such a pod
(``RuntimeClassNotSupported``) instead of running it silently under the runtime's default handler.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from kubelet_trio.api import Pod, PodSpec, Quantity
from kubelet_trio.api.container import Container

__all__ = [
    "RUNTIME_CLASS_NOT_SUPPORTED",
    "AdmitResult",
    "NodeView",
    "PredicateAdmitHandler",
    "admit_pod_count",
    "admit_standalone",
    "fits",
    "pod_requests",
]

RESOURCES = ("cpu", "memory", "ephemeral-storage")
RUNTIME_CLASS_NOT_SUPPORTED = "RuntimeClassNotSupported"


@attrs.frozen
class AdmitResult:
    reason: str
    message: str


@attrs.frozen
class NodeView:
    """What admission reads of the Node."""

    name: str
    allocatable: Mapping[str, str]
    labels: Mapping[str, str] = attrs.Factory(dict)
    taints: Sequence[Mapping[str, Any]] = ()
    os: str = "linux"

    @classmethod
    def from_node(cls, node: Mapping[str, Any]) -> NodeView:
        meta = node.get("metadata") or {}
        labels = dict(meta.get("labels") or {})
        return cls(
            name=str(meta.get("name") or ""),
            allocatable=dict((node.get("status") or {}).get("allocatable") or {}),
            labels=labels,
            taints=tuple((node.get("spec") or {}).get("taints") or ()),
            os=labels.get("kubernetes.io/os", "linux"),
        )


def _amount(resource: str, quantity: Quantity) -> int:
    return quantity.milli_value() if resource == "cpu" else quantity.int_value()


def _container_requests(container: Container) -> dict[str, int]:
    res = container.resources
    requests = dict((res.requests if res else None) or {})
    for name, limit in ((res.limits if res else None) or {}).items():
        requests.setdefault(name, limit)  # a limit alone is the request (API defaulting)
    return {name: _amount(name, q) for name, q in requests.items() if name in RESOURCES}


#: Requests of the live pod specs, by ``id``. Admitting a pod sums the requests of every active pod, so
#: without it a node's admissions cost the square of its pod count; a spec is immutable, and replaced (a
#: new object) when the pod's spec changes. An entry holds its spec weakly and goes with it: a node whose
#: pods come and go keeps only the specs still in use.
_REQUESTS: dict[int, tuple[weakref.ref[PodSpec], dict[str, int]]] = {}


def _forget(key: int, ref: weakref.ref[PodSpec]) -> None:
    entry = _REQUESTS.get(key)
    if entry is not None and entry[0] is ref:  # not a newer spec that reuses the id
        del _REQUESTS[key]


def pod_requests(pod: Pod) -> Mapping[str, int]:
    """max(sum over app containers, max over init containers) + overhead; cpu in millicores, bytes else."""
    spec = pod.spec
    if spec is None:
        return _spec_requests(None)
    key = id(spec)
    cached = _REQUESTS.get(key)
    if cached is not None and cached[0]() is spec:
        return cached[1]
    total = _spec_requests(spec)
    _REQUESTS[key] = (weakref.ref(spec, functools.partial(_forget, key)), total)
    return total


def _spec_requests(spec: PodSpec | None) -> dict[str, int]:
    total: dict[str, int] = {}
    for container in (spec.containers if spec else None) or ():
        for name, value in _container_requests(container).items():
            total[name] = total.get(name, 0) + value
    for container in (spec.init_containers if spec else None) or ():
        for name, value in _container_requests(container).items():
            total[name] = max(total.get(name, 0), value)
    overhead = (spec.extra.get("overhead") if spec else None) or {}
    for name, value in overhead.items():
        if name in RESOURCES:
            total[name] = total.get(name, 0) + _amount(name, Quantity(str(value)))
    return total


def _allocatable(node: NodeView, resource: str) -> int | None:
    value = node.allocatable.get(resource)
    return None if value is None else _amount(resource, Quantity(str(value)))


def admit_pod_count(max_pods: int, others: Sequence[Pod]) -> AdmitResult | None:
    """The pod count of the fit: one pod more than the ``others`` (the active pods) must stay within
    ``max_pods``, else ``OutOfpods``. Pods without requests count too."""
    if len(others) + 1 > max_pods:
        return _insufficient("pods", 1, len(others), max_pods)
    return None


def fits(pod: Pod, others: Sequence[Pod], node: NodeView) -> AdmitResult | None:
    """The resource fit alone: pod count, then cpu, memory, ephemeral-storage."""
    pods_allowed = _allocatable(node, "pods")
    if pods_allowed is not None and (too_many := admit_pod_count(pods_allowed, others)) is not None:
        return too_many
    wanted = pod_requests(pod)
    used: dict[str, int] = {}
    for other in others:
        for name, value in pod_requests(other).items():
            used[name] = used.get(name, 0) + value
    for resource in RESOURCES:
        request = wanted.get(resource, 0)
        capacity = _allocatable(node, resource)
        if request and capacity is not None and request > capacity - used.get(resource, 0):
            return _insufficient(resource, request, used.get(resource, 0), capacity)
    return None


def _insufficient(resource: str, requested: int, used: int, capacity: int) -> AdmitResult:
    return AdmitResult(
        f"OutOf{resource}",
        f"Node didn't have enough resource: {resource}, requested: {requested}, used: {used}, "
        f"capacity: {capacity}",
    )


def _match_expression(expr: Mapping[str, Any], values: Mapping[str, str]) -> bool:
    key, op = expr.get("key", ""), expr.get("operator", "")
    wanted = list(expr.get("values") or ())
    present = key in values
    if op == "In":
        return present and values[key] in wanted
    if op == "NotIn":
        return not present or values[key] not in wanted
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and wanted:
        try:
            actual, bound = int(values[key]), int(wanted[0])
        except ValueError:
            return False
        return actual > bound if op == "Gt" else actual < bound
    return False


def _matches_affinity(pod: Pod, node: NodeView) -> bool:
    spec = pod.spec
    selector = (spec.node_selector if spec else None) or {}
    if any(node.labels.get(k) != v for k, v in selector.items()):
        return False
    affinity = spec.affinity if spec else None
    required = (
        ((affinity or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    ) or {}
    terms = required.get("nodeSelectorTerms") or ()
    if not terms:
        return True
    fields = {"metadata.name": node.name}
    for term in terms:
        expressions = term.get("matchExpressions") or ()
        field_expressions = term.get("matchFields") or ()
        if not expressions and not field_expressions:
            continue  # an empty term matches nothing
        if all(_match_expression(e, node.labels) for e in expressions) and all(
            _match_expression(e, fields) for e in field_expressions
        ):
            return True
    return False


def _host_ports(pod: Pod) -> list[tuple[str, str, int]]:
    out = []
    for container in pod.spec.all_containers() if pod.spec else ():
        for port in container.ports or ():
            if port.host_port:
                out.append((port.host_ip or "0.0.0.0", port.protocol or "TCP", port.host_port))
    return out


def _ports_conflict(pod: Pod, others: Sequence[Pod]) -> bool:
    used = [p for other in others for p in _host_ports(other)]
    for ip, protocol, port in _host_ports(pod):
        for used_ip, used_protocol, used_port in used:
            same_ip = ip == used_ip or "0.0.0.0" in (ip, used_ip)
            if port == used_port and protocol == used_protocol and same_ip:
                return True
    return False


def _tolerates(tolerations: Sequence[Any], taint: Mapping[str, Any]) -> bool:
    for toleration in tolerations:
        effect = toleration.effect
        if effect and effect != taint.get("effect"):
            continue
        if toleration.operator == "Exists":
            if not toleration.key or toleration.key == taint.get("key"):
                return True
        elif toleration.key == taint.get("key") and (toleration.value or "") == (taint.get("value") or ""):
            return True
    return False


@attrs.define(eq=False)
class PredicateAdmitHandler:
    """``handler(pod, other_active_pods)`` → None to admit, or why not. ``node`` gives the current view."""

    node: Callable[[], NodeView | None]

    def __call__(self, pod: Pod, others: Sequence[Pod]) -> AdmitResult | None:
        node = self.node()
        if node is None:
            return AdmitResult("InvalidNodeInfo", "Kubelet cannot get node info.")
        spec = pod.spec
        selector_os = ((spec.node_selector if spec else None) or {}).get("kubernetes.io/os")
        if selector_os and selector_os != node.os:
            return AdmitResult(
                "PodOSSelectorNodeLabelDoesNotMatch",
                f"Failed to admit pod as the `kubernetes.io/os` label doesn't match node label ({node.os})",
            )
        pod_os = ((spec.extra.get("os") if spec else None) or {}).get("name")
        if pod_os and pod_os != node.os:
            return AdmitResult(
                "PodOSNotSupported", f"Failed to admit pod as the OS field doesn't match node OS ({node.os})"
            )
        rejection = fits(pod, others, node)
        if rejection is not None:
            return rejection
        if not _matches_affinity(pod, node):
            return AdmitResult(
                "NodeAffinity",
                "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
            )
        if spec and spec.node_name and spec.node_name != node.name:
            return AdmitResult(
                "NodeName", "Predicate NodeName failed: node(s) didn't match the requested node name"
            )
        if _ports_conflict(pod, others):
            return AdmitResult(
                "NodePorts",
                "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports",
            )
        if not pod.is_static:
            tolerations = (spec.tolerations if spec else None) or ()
            for taint in node.taints:
                if taint.get("effect") == "NoExecute" and not _tolerates(tolerations, taint):
                    shown = f"{{{taint.get('key')}: {taint.get('value', '')}}}"
                    return AdmitResult(
                        "TaintToleration",
                        f"Predicate TaintToleration failed: node(s) had untolerated taint {shown}",
                    )
        return None


def admit_standalone(pod: Pod, others: Sequence[Pod]) -> AdmitResult | None:
    """Admission on a kubelet without an API server: only a ``runtimeClassName`` is refused (Go would
    run the pod with the default handler, which is exactly what its author asked not to happen)."""
    name = pod.spec.runtime_class_name if pod.spec else None
    if not name:
        return None
    return AdmitResult(
        RUNTIME_CLASS_NOT_SUPPORTED,
        f'spec.runtimeClassName "{name}" cannot be resolved: this kubelet runs without an API server, '
        "and RuntimeClasses (node.k8s.io/v1) come from one",
    )
