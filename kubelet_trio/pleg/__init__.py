"""Pod lifecycle event generation (Go: ``pkg/kubelet/pleg``)."""

from kubelet_trio.pleg.events import PodLifecycleEvent, PodLifecycleEventType
from kubelet_trio.pleg.generic import GenericPLEG, PodLister, compute_events

__all__ = ["GenericPLEG", "PodLifecycleEvent", "PodLifecycleEventType", "PodLister", "compute_events"]
