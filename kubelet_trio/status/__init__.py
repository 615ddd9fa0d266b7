"""API pod status generation: phase, conditions, container statuses (Go: ``pkg/kubelet/status``)."""

from kubelet_trio.status.conditions import KUBELET_OWNED_CONDITIONS, pod_sandbox_changed
from kubelet_trio.status.generate import (
    DEADLINE_EXCEEDED_MESSAGE,
    DEADLINE_EXCEEDED_REASON,
    active_deadline_exceeded,
    apply_active_deadline,
    convert_container_statuses,
    generate_api_pod_status,
    should_container_be_restarted,
)
from kubelet_trio.status.phase import FAILED, PENDING, RUNNING, SUCCEEDED, get_phase
from kubelet_trio.status.qos import compute_pod_qos, pod_qos
from kubelet_trio.status.timefmt import SupportsNow, Timestamp, format_time, parse_rfc3339, rfc3339

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
    "apply_active_deadline",
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
