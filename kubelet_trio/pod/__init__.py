"""Pod bookkeeping beyond the pod manager: mirror pods for static pods (Go: ``pkg/kubelet/pod``)."""

from __future__ import annotations

from kubelet_trio.pod.mirror import MirrorPodManager, mirror_pod_for

__all__ = ["MirrorPodManager", "mirror_pod_for"]
