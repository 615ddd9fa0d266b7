"""The ``pods/<name>/resize`` subresource as the API server implements it (Go:
``registry/core/pod/strategy.go`` ``podResizeStrategy``, ``validation.go`` ``ValidatePodResize``).

A PUT or PATCH of the subresource carries a whole Pod, of which only each container's ``resources`` and
``resizePolicy`` are taken (app containers, and restartable init containers); everything else stays as
stored, and the write bumps ``metadata.generation``. Refused (422): a terminal pod; a change of anything
but CPU and memory; a change of a non-restartable init container's resources; a resize that changes the
pod's QoS class; a request above its limit; a removed memory or CPU limit or request.

Left out: the node-capacity check, pod-level resources, the swap and static-policy rules (the kubelet's
own admission judges those), ``resizePolicy`` validation beyond taking it.
"""

from __future__ import annotations

import copy
from typing import Any

from kubelet_trio.api import Pod, Quantity
from kubelet_trio.status.qos import pod_qos

__all__ = ["PodResizeInvalid", "resize_pod"]

Obj = dict[str, Any]
_MUTABLE = ("cpu", "memory")


class PodResizeInvalid(Exception):
    """The resize is refused; the message is the API server's ``Pod "<name>" is invalid: ...``."""


def _containers(pod: Obj, key: str) -> list[Obj]:
    return list((pod.get("spec") or {}).get(key) or [])


def resize_pod(current: Obj, wanted: Obj) -> Obj:
    """The stored pod with ``wanted``'s container resources and resize policies; raises
    :class:`PodResizeInvalid` when the resize is not allowed."""
    name = current["metadata"]["name"]
    problems: list[str] = []
    phase = (current.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        raise PodResizeInvalid(f'Pod "{name}" is invalid: spec: Forbidden: pod is in a terminal phase')
    result = copy.deepcopy(current)
    for key in ("containers", "initContainers"):
        old = _containers(current, key)
        new = {c.get("name"): c for c in _containers(wanted, key)}
        if [c.get("name") for c in old] != [c.get("name") for c in _containers(wanted, key)]:
            problems.append(f"spec.{key}: Forbidden: containers may not be added or removed")
            continue
        for index, container in enumerate(old):
            path = f"spec.{key}[{index}]"
            want = new[container.get("name")]
            old_res = container.get("resources") or {}
            new_res = want.get("resources") or {}
            if old_res == new_res and container.get("resizePolicy") == want.get("resizePolicy"):
                continue
            if key == "initContainers" and container.get("restartPolicy") != "Always":
                problems.append(
                    f"{path}.resources: Forbidden: resources for non-sidecar init containers are immutable"
                )
                continue
            problems.extend(_check(path, old_res, new_res))
            target = result["spec"][key][index]
            if new_res:
                target["resources"] = copy.deepcopy(new_res)
            else:
                target.pop("resources", None)
            if want.get("resizePolicy") is not None:
                target["resizePolicy"] = copy.deepcopy(want["resizePolicy"])
    if not problems and pod_qos(Pod.from_dict(result)) != pod_qos(Pod.from_dict(current)):
        problems.append("spec: Forbidden: Pod QOS Class may not change as a result of resizing")
    if problems:
        raise PodResizeInvalid(f'Pod "{name}" is invalid: {", ".join(problems)}')
    return result


def _check(path: str, old: Obj, new: Obj) -> list[str]:
    problems: list[str] = []
    for group in ("requests", "limits"):
        before = old.get(group) or {}
        after = new.get(group) or {}
        for resource in set(before) | set(after):
            if resource in _MUTABLE:
                if resource in before and resource not in after:
                    problems.append(
                        f"{path}.resources.{group}[{resource}]: Forbidden: resource may not be removed"
                    )
                continue
            if before.get(resource) != after.get(resource):
                problems.append(f"{path}.resources: Forbidden: only cpu and memory resources are mutable")
    requests, limits = new.get("requests") or {}, new.get("limits") or {}
    for resource, request in requests.items():
        if resource in limits and Quantity.from_json(request) > Quantity.from_json(limits[resource]):
            problems.append(
                f'{path}.resources.requests[{resource}]: Invalid value: "{request}": must be less than or '
                f"equal to {resource} limit of {limits[resource]}"
            )
    return problems
