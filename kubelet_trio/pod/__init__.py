"""Pod bookkeeping (Go: ``pkg/kubelet/pod``): the desired pods and the mirror pods of static pods."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.pod.manager import PodManager
    from kubelet_trio.pod.mirror import MirrorPodManager, mirror_pod_for

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "PodManager": "kubelet_trio.pod.manager",
    "MirrorPodManager": "kubelet_trio.pod.mirror",
    "mirror_pod_for": "kubelet_trio.pod.mirror",
}

__all__ = ["MirrorPodManager", "PodManager", "mirror_pod_for"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
