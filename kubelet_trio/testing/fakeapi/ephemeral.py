"""The ``pods/<name>/ephemeralcontainers`` subresource as the API server implements it (Go:
``registry/core/pod/strategy.go`` ``podEphemeralContainersStrategy``, ``validation.go``
``ValidatePodEphemeralContainersUpdate`` / ``validateEphemeralContainers``).

A PUT or PATCH of the subresource carries a whole Pod, of which only ``spec.ephemeralContainers`` is
taken; everything else stays as stored. Existing ephemeral containers may be neither changed nor removed;
new ones need a name unique among all the pod's containers, an image, a ``targetContainerName`` (if any)
naming a regular or init container, and none of the fields that would make them part of the workload
(ports, probes, lifecycle, resources, subPath mounts). They cannot be set when a pod is created, nor
through the main resource.
"""

from __future__ import annotations

import copy
from typing import Any

from kubelet_trio.api import Pod, default_pod

__all__ = [
    "EphemeralContainersInvalid",
    "check_create",
    "check_main_resource_update",
    "update_ephemeral_containers",
]

Obj = dict[str, Any]

#: Container fields an ephemeral container may not set (the complement of Go's allow-list that matters).
_FORBIDDEN = ("ports", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle", "resources")


class EphemeralContainersInvalid(Exception):
    """The update is refused; the message is the API server's ``Pod "<name>" is invalid: ...``."""


def _ephemeral(pod: Obj) -> list[Obj]:
    return list((pod.get("spec") or {}).get("ephemeralContainers") or [])


def _invalid(name: str, problems: list[str]) -> EphemeralContainersInvalid:
    return EphemeralContainersInvalid(f'Pod "{name}" is invalid: {", ".join(problems)}')


def check_create(pod: Obj) -> None:
    """Pods are created without ephemeral containers."""
    if _ephemeral(pod):
        name = (pod.get("metadata") or {}).get("name", "")
        raise _invalid(name, ["spec.ephemeralContainers: Forbidden: cannot be set on create"])


def check_main_resource_update(current: Obj, wanted: Obj) -> None:
    """The main resource cannot change ephemeral containers (only the subresource can)."""
    if "spec" in wanted and _ephemeral(wanted) != _ephemeral(current):
        name = current["metadata"]["name"]
        raise _invalid(
            name,
            ["spec: Forbidden: pod updates may not change ephemeral containers; use the ephemeralcontainers "
             "subresource"],
        )  # fmt: skip


def _validate_new(index: int, container: Obj, taken: set[str], targets: set[str]) -> list[str]:
    path = f"spec.ephemeralContainers[{index}]"
    problems = []
    name = container.get("name")
    if not name:
        problems.append(f"{path}.name: Required value")
    elif name in taken:
        problems.append(f'{path}.name: Duplicate value: "{name}"')
    if not container.get("image"):
        problems.append(f"{path}.image: Required value")
    for field in _FORBIDDEN:
        if container.get(field) not in (None, {}, []):  # zero values pass (kubectl sends resources: {})
            problems.append(f"{path}.{field}: Forbidden: cannot be set for an Ephemeral Container")
    for i, mount in enumerate(container.get("volumeMounts") or ()):
        for field in ("subPath", "subPathExpr"):
            if mount.get(field):
                problems.append(
                    f"{path}.volumeMounts[{i}].{field}: Forbidden: cannot be set for an Ephemeral Container"
                )
    target = container.get("targetContainerName")
    if target and target not in targets:
        problems.append(f'{path}.targetContainerName: Not found: "{target}"')
    return problems


def update_ephemeral_containers(current: Obj, wanted: Obj) -> Obj:
    """The stored pod with ``wanted``'s ephemeral containers (defaulted); raises
    :class:`EphemeralContainersInvalid` when the change is not allowed."""
    name = current["metadata"]["name"]
    spec = current.get("spec") or {}
    regular = {c.get("name") for key in ("containers", "initContainers") for c in spec.get(key) or ()}
    old = {c.get("name"): c for c in _ephemeral(current)}
    result = copy.deepcopy(current)
    result.setdefault("spec", {})["ephemeralContainers"] = copy.deepcopy(_ephemeral(wanted))
    result = default_pod(Pod.from_dict(result)).to_dict()  # the new containers get their defaults
    new = _ephemeral(result)
    problems: list[str] = []
    by_name = {c.get("name"): c for c in new}
    for old_name, old_container in old.items():
        if old_name not in by_name:
            problems.append(
                f'spec.ephemeralContainers: Forbidden: existing ephemeral containers "{old_name}" may not '
                "be removed"
            )
        elif by_name[old_name] != old_container:
            problems.append(
                f'spec.ephemeralContainers: Forbidden: existing ephemeral containers "{old_name}" may not '
                "be changed"
            )
    taken = set(regular)
    for index, container in enumerate(new):
        if container.get("name") not in old:
            problems.extend(_validate_new(index, container, taken, regular))
        taken.add(container.get("name"))
    if problems:
        raise _invalid(name, problems)
    if not new:
        result["spec"].pop("ephemeralContainers", None)
    return result
