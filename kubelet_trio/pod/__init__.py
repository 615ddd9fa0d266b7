"""Pod bookkeeping (Go: ``pkg/kubelet/pod``): the desired pods and the mirror pods of static pods."""

from __future__ import annotations

from kubelet_trio.pod.manager import PodManager
from kubelet_trio.pod.mirror import MirrorPodManager, mirror_pod_for

__all__ = ["MirrorPodManager", "PodManager", "mirror_pod_for"]
