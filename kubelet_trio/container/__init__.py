"""Runtime-agnostic view of pods and containers (Go: ``pkg/kubelet/container``)."""

from kubelet_trio.container.types import (
    ContainerState,
    ContainerStatus,
    PodStatus,
    RuntimeContainer,
    RuntimePod,
    SandboxStatus,
)

__all__ = [
    "ContainerState",
    "ContainerStatus",
    "PodStatus",
    "RuntimeContainer",
    "RuntimePod",
    "SandboxStatus",
]
