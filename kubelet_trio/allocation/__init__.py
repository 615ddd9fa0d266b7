"""In-place pod resize: allocated resources and resize admission (Go: ``pkg/kubelet/allocation``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.allocation.manager import (
        POD_RESIZE_IN_PROGRESS,
        POD_RESIZE_PENDING,
        REASON_DEFERRED,
        REASON_INFEASIBLE,
        TRIGGER_POD_RESIZED,
        TRIGGER_POD_TERMINATED,
        TRIGGER_POD_UPDATED,
        TRIGGER_PODS_ADDED,
        TRIGGER_PODS_REMOVED,
        AllocationManager,
        allocated_pods_view,
        is_resizable_container,
        on_pod_admitted,
        on_pod_reconciled,
        on_pod_updated,
        on_pods_removed,
        record_resize_error,
        resize_policy,
        standalone_resize_fit,
        track_resize_in_progress,
        update_pod_from_allocation,
    )
    from kubelet_trio.allocation.state import (
        ACTUATED_PODS_STATE_FILE,
        ALLOCATED_PODS_STATE_FILE,
        ResourceState,
        requirements_equal,
    )

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "POD_RESIZE_IN_PROGRESS": "kubelet_trio.allocation.manager",
    "POD_RESIZE_PENDING": "kubelet_trio.allocation.manager",
    "REASON_DEFERRED": "kubelet_trio.allocation.manager",
    "REASON_INFEASIBLE": "kubelet_trio.allocation.manager",
    "TRIGGER_POD_RESIZED": "kubelet_trio.allocation.manager",
    "TRIGGER_POD_TERMINATED": "kubelet_trio.allocation.manager",
    "TRIGGER_POD_UPDATED": "kubelet_trio.allocation.manager",
    "TRIGGER_PODS_ADDED": "kubelet_trio.allocation.manager",
    "TRIGGER_PODS_REMOVED": "kubelet_trio.allocation.manager",
    "AllocationManager": "kubelet_trio.allocation.manager",
    "allocated_pods_view": "kubelet_trio.allocation.manager",
    "is_resizable_container": "kubelet_trio.allocation.manager",
    "on_pod_admitted": "kubelet_trio.allocation.manager",
    "on_pod_reconciled": "kubelet_trio.allocation.manager",
    "on_pod_updated": "kubelet_trio.allocation.manager",
    "on_pods_removed": "kubelet_trio.allocation.manager",
    "record_resize_error": "kubelet_trio.allocation.manager",
    "resize_policy": "kubelet_trio.allocation.manager",
    "standalone_resize_fit": "kubelet_trio.allocation.manager",
    "track_resize_in_progress": "kubelet_trio.allocation.manager",
    "update_pod_from_allocation": "kubelet_trio.allocation.manager",
    "ACTUATED_PODS_STATE_FILE": "kubelet_trio.allocation.state",
    "ALLOCATED_PODS_STATE_FILE": "kubelet_trio.allocation.state",
    "ResourceState": "kubelet_trio.allocation.state",
    "requirements_equal": "kubelet_trio.allocation.state",
}

__all__ = [
    "ACTUATED_PODS_STATE_FILE",
    "ALLOCATED_PODS_STATE_FILE",
    "POD_RESIZE_IN_PROGRESS",
    "POD_RESIZE_PENDING",
    "REASON_DEFERRED",
    "REASON_INFEASIBLE",
    "TRIGGER_PODS_ADDED",
    "TRIGGER_PODS_REMOVED",
    "TRIGGER_POD_RESIZED",
    "TRIGGER_POD_TERMINATED",
    "TRIGGER_POD_UPDATED",
    "AllocationManager",
    "ResourceState",
    "allocated_pods_view",
    "is_resizable_container",
    "on_pod_admitted",
    "on_pod_reconciled",
    "on_pod_updated",
    "on_pods_removed",
    "record_resize_error",
    "requirements_equal",
    "resize_policy",
    "standalone_resize_fit",
    "track_resize_in_progress",
    "update_pod_from_allocation",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
