"""Field and resource values a pod can read about itself (Go: ``pkg/fieldpath``,
``pkg/api/v1/resource`` ``ExtractContainerResourceValue``): shared by the container environment and the
downward API volume.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kubelet_trio.api import Container, Pod, Quantity, ResourceFieldSelector
from kubelet_trio.cm.allocatable import NodeAllocatable
from kubelet_trio.logs import go_quote
from kubelet_trio.objects import EnvError

__all__ = ["container_resource_value", "extract_field_path", "format_map"]


def format_map(values: Mapping[str, str] | None) -> str:
    """``fieldpath.FormatMap``: ``key="value"`` lines sorted by key, no trailing newline."""
    present = values or {}
    return "\n".join(f"{key}={go_quote(present[key])}" for key in sorted(present))


_SUBSCRIPT = re.compile(r"^(?P<path>.+?)\['(?P<key>.*)'\]$", re.DOTALL)


def _split_subscript(path: str) -> tuple[str, str | None]:
    """``SplitMaybeSubscriptedPath``: ``metadata.labels['k']`` → ``("metadata.labels", "k")``."""
    if not path.endswith("']"):
        return path, None
    head, sep, key = path[:-2].partition("['")
    if not sep or not head:
        return path, None
    return head, key


def extract_field_path(pod: Pod, field_path: str) -> str:
    """``fieldpath.ExtractFieldPathAsString`` for the metadata paths of a pod."""
    meta = pod.metadata
    labels = (meta.labels if meta else None) or {}
    annotations = (meta.annotations if meta else None) or {}
    path, key = _split_subscript(field_path)
    if key is not None:
        if path == "metadata.annotations":
            return annotations.get(key, "")
        if path == "metadata.labels":
            return labels.get(key, "")
        raise EnvError(f"fieldPath {go_quote(field_path)} does not support subscript")
    if field_path == "metadata.annotations":
        return format_map(annotations)
    if field_path == "metadata.labels":
        return format_map(labels)
    if field_path == "metadata.name":
        return pod.name
    if field_path == "metadata.namespace":
        return pod.namespace
    if field_path == "metadata.uid":
        return pod.uid
    raise EnvError(f"unsupported fieldPath: {field_path}")


def _quantity(resources: Mapping[str, Quantity] | None, name: str) -> Quantity | None:
    return (resources or {}).get(name)


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
