"""Runtime-agnostic view of pods and containers (Go: ``pkg/kubelet/container``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.container.types import (
        ContainerState,
        ContainerStatus,
        PodStatus,
        RuntimeContainer,
        RuntimePod,
        SandboxStatus,
    )

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "ContainerState": "kubelet_trio.container.types",
    "ContainerStatus": "kubelet_trio.container.types",
    "PodStatus": "kubelet_trio.container.types",
    "RuntimeContainer": "kubelet_trio.container.types",
    "RuntimePod": "kubelet_trio.container.types",
    "SandboxStatus": "kubelet_trio.container.types",
}

__all__ = [
    "ContainerState",
    "ContainerStatus",
    "PodStatus",
    "RuntimeContainer",
    "RuntimePod",
    "SandboxStatus",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
