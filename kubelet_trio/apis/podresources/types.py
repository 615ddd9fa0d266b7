"""What the pod resources server reads (Go: ``types.go``): the node's pods and the devices they hold."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from kubelet_trio.api import Pod

__all__ = ["DevicesProvider", "PodsProvider"]

#: The pods the kubelet was given (Go: the pod manager's ``GetPods``, rejected and finished ones included).
PodsProvider = Callable[[], Sequence[Pod]]


class DevicesProvider(Protocol):
    """The device manager, as the pod resources server sees it."""

    def update_allocated_devices(self) -> None:
        """Release the devices of pods that are no longer active (Go ``UpdateAllocatedDevices``)."""

    def container_devices(self, uid: str, container: str) -> Mapping[str, Sequence[str]]:
        """resource → the device IDs one container holds."""

    def allocatable_devices(self) -> Mapping[str, Sequence[str]]:
        """resource → the healthy device IDs."""
