"""Pod lifecycle event generation (Go: ``pkg/kubelet/pleg``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.pleg.events import PodLifecycleEvent, PodLifecycleEventType
    from kubelet_trio.pleg.generic import GenericPLEG, PodLister, compute_events

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "PodLifecycleEvent": "kubelet_trio.pleg.events",
    "PodLifecycleEventType": "kubelet_trio.pleg.events",
    "GenericPLEG": "kubelet_trio.pleg.generic",
    "PodLister": "kubelet_trio.pleg.generic",
    "compute_events": "kubelet_trio.pleg.generic",
}

__all__ = ["GenericPLEG", "PodLifecycleEvent", "PodLifecycleEventType", "PodLister", "compute_events"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
