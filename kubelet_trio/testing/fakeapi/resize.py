"""The ``pods/<name>/resize`` subresource as the API server implements it (Go:
``registry/core/pod/strategy.go`` ``podResizeStrategy``, ``validation.go`` ``ValidatePodResize``, and the
admission check of a resize against the node's allocatable), with kube-apiserver 1.36's answers.

A PUT or PATCH of the subresource carries a whole Pod, of which only each container's ``resources`` and
``resizePolicy`` are taken (app containers, and restartable init containers); everything else stays as
stored (a changed image is dropped silently), and the write bumps ``metadata.generation``. Refused (422,
the messages kube-apiserver 1.36 gives): containers added, removed, renamed or reordered; a change of
anything but CPU and memory, ``resizePolicy`` included (``spec: Forbidden: only cpu and memory resources
are mutable``); a change of a non-restartable init container's resources; a resize that changes the pod's
QoS class; a request above its limit; a removed request or limit. A terminal pod may be resized (1.36
accepts it). Refused (403, admission) when the pod is bound: its node missing, not Linux, or with less
allocatable CPU or memory than the pod's requests (:func:`admit_resize`).

Left out: pod-level resources, the swap and static-policy rules (the kubelet's own admission judges
those), ``resizePolicy`` value validation. kube-apiserver 1.36 answers a non-restartable init container's
resize on a node that declares no ``InPlacePodVerticalScalingInitContainers`` feature with a 403
(``pod update requires features ...``); here it is the 422 of the validation it would meet next.
"""

from __future__ import annotations

import copy
from typing import Any

from kubelet_trio.api import Pod, Quantity
from kubelet_trio.lifecycle.predicate import pod_requests
from kubelet_trio.status.qos import compute_pod_qos

__all__ = ["PodResizeInvalid", "admit_resize", "resize_pod"]

Obj = dict[str, Any]
_MUTABLE = ("cpu", "memory")


class PodResizeInvalid(Exception):
    """The resize is refused; the message is the API server's ``Pod "<name>" is invalid: ...``."""


def _containers(pod: Obj, key: str) -> list[Obj]:
    return list((pod.get("spec") or {}).get(key) or [])


def _invalid(name: str, problems: list[str]) -> PodResizeInvalid:
    """Go's ``field.ErrorList`` aggregate: one error as is, several in brackets."""
    text = problems[0] if len(problems) == 1 else f"[{', '.join(problems)}]"
    return PodResizeInvalid(f'Pod "{name}" is invalid: {text}')


def resize_pod(current: Obj, wanted: Obj) -> Obj:
    """The stored pod with ``wanted``'s container resources; raises :class:`PodResizeInvalid` when the
    resize is not allowed."""
    name = current["metadata"]["name"]
    problems: list[str] = []
    immutable = False  # something other than cpu and memory changed
    result = copy.deepcopy(current)
    for key in ("containers", "initContainers"):
        old, new = _containers(current, key), _containers(wanted, key)
        if len(old) != len(new):
            problems.append(f"spec.{key}: Forbidden: containers may not be added or removed on resize")
            continue
        renamed = [i for i, (o, n) in enumerate(zip(old, new, strict=True)) if o.get("name") != n.get("name")]
        if renamed:
            problems.extend(
                f"spec.{key}[{i}].name: Forbidden: containers may not be renamed or reordered on resize"
                for i in renamed
            )
            continue
        for index, (container, want) in enumerate(zip(old, new, strict=True)):
            path = f"spec.{key}[{index}]"
            old_res = container.get("resources") or {}
            new_res = want.get("resources") or {}
            if (want.get("resizePolicy") or None) != (container.get("resizePolicy") or None):
                immutable = True
            if old_res == new_res:
                continue
            if key == "initContainers" and container.get("restartPolicy") != "Always":
                problems.append(
                    f"{path}.resources: Forbidden: resources for non-sidecar init containers are immutable"
                )
                continue
            checked, other = _check(path, old_res, new_res)
            problems.extend(checked)
            immutable = immutable or other
            target = result["spec"][key][index]
            if new_res:
                target["resources"] = copy.deepcopy(new_res)
            else:
                target.pop("resources", None)
    if immutable:
        problems.append("spec: Forbidden: only cpu and memory resources are mutable")
    before = compute_pod_qos(Pod.from_dict(current).spec)
    if not problems and compute_pod_qos(Pod.from_dict(result).spec) != before:
        problems.append(
            f'spec: Invalid value: "{before}": Pod QOS Class may not change as a result of resizing'
        )
    if problems:
        raise _invalid(name, problems)
    return result


def admit_resize(pod: Obj, node: Obj | None) -> str | None:
    """Why the admission refuses a resize of a pod bound to ``node`` (None: admitted), as 1.36 says it
    after ``pods "<name>" is forbidden: ``; only asked when the resize changed the generation."""
    node_name = (pod.get("spec") or {}).get("nodeName")
    if not node_name:
        return None
    if node is None:
        return f'node "{node_name}" not found'
    os_label = ((node.get("metadata") or {}).get("labels") or {}).get("kubernetes.io/os")
    if os_label not in (None, "linux"):
        return f'pod resize is only supported on linux nodes, node "{node_name}" is "{os_label}"'
    requests = pod_requests(Pod.from_dict(pod))
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    short: list[str] = []
    for resource in ("cpu", "memory"):
        have = Quantity.from_json(allocatable.get(resource, "0"))
        amount = have.milli_value() if resource == "cpu" else have.int_value()
        if requests.get(resource, 0) > amount:
            short.append(f"{resource}, requested: {requests.get(resource, 0)}, allocatable: {amount}")
    return f"node didn't have enough allocatable resources: {'; '.join(short)}" if short else None


def _check(path: str, old: Obj, new: Obj) -> tuple[list[str], bool]:
    """The problems of one container's new resources, and whether a resource other than cpu and memory
    changed."""
    problems: list[str] = []
    other = False
    for group in ("requests", "limits"):
        before = old.get(group) or {}
        after = new.get(group) or {}
        if any(r in before and r not in after for r in _MUTABLE):
            problems.append(f"{path}.resources.{group}: Forbidden: resource {group} cannot be removed")
        other = other or any(
            before.get(r) != after.get(r) for r in set(before) | set(after) if r not in _MUTABLE
        )
    requests, limits = new.get("requests") or {}, new.get("limits") or {}
    for resource, request in requests.items():
        if resource in limits and Quantity.from_json(request) > Quantity.from_json(limits[resource]):
            problems.append(
                f'{path}.resources.requests: Invalid value: "{request}": must be less than or equal to '
                f"{resource} limit of {limits[resource]}"
            )
    return problems, other
