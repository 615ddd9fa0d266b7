"""API pod status generation: phase, conditions, container statuses (Go: ``pkg/kubelet/status``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.status.conditions import KUBELET_OWNED_CONDITIONS, pod_sandbox_changed
    from kubelet_trio.status.generate import (
        DEADLINE_EXCEEDED_MESSAGE,
        DEADLINE_EXCEEDED_REASON,
        active_deadline_exceeded,
        convert_container_statuses,
        generate_api_pod_status,
        should_container_be_restarted,
    )
    from kubelet_trio.status.phase import FAILED, PENDING, RUNNING, SUCCEEDED, get_phase
    from kubelet_trio.status.qos import compute_pod_qos, pod_qos
    from kubelet_trio.status.timefmt import SupportsNow, Timestamp, format_time, parse_rfc3339, rfc3339

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "KUBELET_OWNED_CONDITIONS": "kubelet_trio.status.conditions",
    "pod_sandbox_changed": "kubelet_trio.status.conditions",
    "DEADLINE_EXCEEDED_MESSAGE": "kubelet_trio.status.generate",
    "DEADLINE_EXCEEDED_REASON": "kubelet_trio.status.generate",
    "active_deadline_exceeded": "kubelet_trio.status.generate",
    "convert_container_statuses": "kubelet_trio.status.generate",
    "generate_api_pod_status": "kubelet_trio.status.generate",
    "should_container_be_restarted": "kubelet_trio.status.generate",
    "FAILED": "kubelet_trio.status.phase",
    "PENDING": "kubelet_trio.status.phase",
    "RUNNING": "kubelet_trio.status.phase",
    "SUCCEEDED": "kubelet_trio.status.phase",
    "get_phase": "kubelet_trio.status.phase",
    "compute_pod_qos": "kubelet_trio.status.qos",
    "pod_qos": "kubelet_trio.status.qos",
    "SupportsNow": "kubelet_trio.status.timefmt",
    "Timestamp": "kubelet_trio.status.timefmt",
    "format_time": "kubelet_trio.status.timefmt",
    "parse_rfc3339": "kubelet_trio.status.timefmt",
    "rfc3339": "kubelet_trio.status.timefmt",
}

__all__ = [
    "DEADLINE_EXCEEDED_MESSAGE",
    "DEADLINE_EXCEEDED_REASON",
    "FAILED",
    "KUBELET_OWNED_CONDITIONS",
    "PENDING",
    "RUNNING",
    "SUCCEEDED",
    "SupportsNow",
    "Timestamp",
    "active_deadline_exceeded",
    "compute_pod_qos",
    "convert_container_statuses",
    "format_time",
    "generate_api_pod_status",
    "get_phase",
    "parse_rfc3339",
    "pod_qos",
    "pod_sandbox_changed",
    "rfc3339",
    "should_container_be_restarted",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
