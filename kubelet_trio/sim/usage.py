"""Deterministic resource usage of simulated containers, for ``ListContainerStats`` and
``ListPodSandboxStats``.

A container's usage comes from :meth:`SimRuntime.set_usage` (tests), else from the sandbox annotation
``sim.kubelet-trio.io/usage.<container name>`` (a container name has no dot, so this never clashes
with the behaviour-script annotation), else it is zero. The annotation lists ``key=quantity`` pairs::

    sim.kubelet-trio.io/usage.web: "cpu=250m memory=64Mi rootfs=10Mi rootfs-inodes=12 processes=3"

``cpu`` is a constant rate while the container runs, so ``usageCoreNanoSeconds`` is exactly
``rate * running time`` on the Trio clock and ``usageNanoCores`` is the rate; ``memory`` is the working
set (also usage and RSS) while running; ``rootfs`` is the writable layer whatever the state;
``processes`` count while running (default 1). A pod adds nothing of its own (no pause overhead).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from kubelet_trio.api.errors import QuantityError
from kubelet_trio.api.quantity import Quantity

__all__ = ["USAGE_ANNOTATION_PREFIX", "ContainerUsage", "UsageError", "parse_usage", "usage_from_annotations"]

USAGE_ANNOTATION_PREFIX = "sim.kubelet-trio.io/usage."


class UsageError(ValueError):
    """A usage annotation does not parse; the message names the annotation and the key."""


@attrs.frozen
class ContainerUsage:
    cpu_millicores: int = 0
    memory_bytes: int = 0
    rootfs_bytes: int = 0
    rootfs_inodes: int = 0
    processes: int = 1

    def cpu_core_nano_seconds(self, running_ns: int) -> int:
        """CPU time after running ``running_ns`` at ``cpu_millicores``."""
        return self.cpu_millicores * max(running_ns, 0) // 1000

    @property
    def nano_cores(self) -> int:
        return self.cpu_millicores * 10**6


_KEYS = {
    "cpu": "cpu_millicores",
    "memory": "memory_bytes",
    "rootfs": "rootfs_bytes",
    "rootfs-inodes": "rootfs_inodes",
    "processes": "processes",
}


def parse_usage(text: str) -> ContainerUsage:
    """``"cpu=250m memory=64Mi ..."`` → :class:`ContainerUsage`; raises :class:`UsageError`."""
    fields: dict[str, int] = {}
    for item in text.split():
        key, sep, raw = item.partition("=")
        if not sep or key not in _KEYS:
            raise UsageError(f"{item!r}: expected one of {', '.join(_KEYS)} as key=quantity")
        try:
            quantity = Quantity(raw)
        except QuantityError as err:
            raise UsageError(f"{key}: {err}") from None
        value = quantity.milli_value() if key == "cpu" else quantity.scaled_value(0)
        if value < 0:
            raise UsageError(f"{key}: must not be negative, got {raw!r}")
        fields[_KEYS[key]] = value
    return ContainerUsage(**fields)


def usage_from_annotations(annotations: Mapping[str, str], container_name: str) -> ContainerUsage | None:
    key = USAGE_ANNOTATION_PREFIX + container_name
    if key not in annotations:
        return None
    try:
        return parse_usage(annotations[key])
    except UsageError as err:
        raise UsageError(f"annotation {key}: {err}") from None
