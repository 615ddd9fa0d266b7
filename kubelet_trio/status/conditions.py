"""Kubelet-owned pod conditions (Go: ``pkg/kubelet/status/generate.go``, ``kuberuntime/util``).

Each generator returns a condition without ``lastTransitionTime``; :func:`set_transition_times` fills it
in against the previous status (the time changes only when the status value does).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

from kubelet_trio.api.pod import Pod, PodSpec
from kubelet_trio.api.status import ContainerStatus, PodCondition
from kubelet_trio.container.types import PodStatus as RuntimePodStatus
from kubelet_trio.status.phase import FAILED, SUCCEEDED, find_status

__all__ = [
    "CONTAINERS_NOT_INITIALIZED",
    "CONTAINERS_NOT_READY",
    "CONTAINERS_READY",
    "DISRUPTION_TARGET",
    "INITIALIZED",
    "KUBELET_OWNED_CONDITIONS",
    "POD_COMPLETED",
    "POD_FAILED",
    "POD_READY_TO_START_CONTAINERS",
    "POD_SCHEDULED",
    "READINESS_GATES_NOT_READY",
    "READY",
    "UNKNOWN_CONTAINER_STATUSES",
    "containers_ready_condition",
    "find_condition",
    "initialized_condition",
    "need_to_reconcile_pod_readiness",
    "pod_ready_condition",
    "pod_ready_to_start_containers_condition",
    "pod_sandbox_changed",
    "pod_scheduled_condition",
    "set_transition_times",
]

# Condition types.
POD_SCHEDULED = "PodScheduled"
POD_READY_TO_START_CONTAINERS = "PodReadyToStartContainers"
INITIALIZED = "Initialized"
CONTAINERS_READY = "ContainersReady"
READY = "Ready"
DISRUPTION_TARGET = "DisruptionTarget"
#: Conditions the kubelet generates (``PodConditionByKubelet``); others are copied from the API.
KUBELET_OWNED_CONDITIONS = frozenset(
    {
        POD_SCHEDULED,
        READY,
        INITIALIZED,
        CONTAINERS_READY,
        POD_READY_TO_START_CONTAINERS,
        "PodResizePending",
        "PodResizeInProgress",
    }
)

# Reasons.
UNKNOWN_CONTAINER_STATUSES = "UnknownContainerStatuses"
POD_COMPLETED = "PodCompleted"
POD_FAILED = "PodFailed"
CONTAINERS_NOT_READY = "ContainersNotReady"
CONTAINERS_NOT_INITIALIZED = "ContainersNotInitialized"
READINESS_GATES_NOT_READY = "ReadinessGatesNotReady"

TRUE = "True"
FALSE = "False"


def _go_list(names: Iterable[str]) -> str:
    """Go's ``%s`` of a ``[]string``: ``[a b]``."""
    return "[" + " ".join(names) + "]"


def find_condition(conditions: Iterable[PodCondition] | None, type_: str | None) -> PodCondition | None:
    return next((c for c in conditions or () if c.type == type_), None)


def containers_ready_condition(
    spec: PodSpec | None, statuses: Sequence[ContainerStatus] | None, phase: str
) -> PodCondition:
    """True when every sidecar and regular container is ready."""
    if statuses is None:
        return PodCondition(type=CONTAINERS_READY, status=FALSE, reason=UNKNOWN_CONTAINER_STATUSES)
    unknown: list[str] = []
    unready: list[str] = []
    sidecars = [c for c in (spec.init_containers if spec else None) or () if c.is_sidecar]
    for container in (*sidecars, *((spec.containers if spec else None) or ())):
        status = find_status(statuses, container.name)
        if status is None:
            unknown.append(container.name or "")
        elif not status.ready:
            unready.append(container.name or "")
    if (phase == SUCCEEDED and not unknown) or phase == FAILED:
        reason = POD_COMPLETED if phase == SUCCEEDED else POD_FAILED
        return PodCondition(type=CONTAINERS_READY, status=FALSE, reason=reason)
    messages = []
    if unknown:
        messages.append(f"containers with unknown status: {_go_list(unknown)}")
    if unready:
        messages.append(f"containers with unready status: {_go_list(unready)}")
    if messages:
        return PodCondition(
            type=CONTAINERS_READY, status=FALSE, reason=CONTAINERS_NOT_READY, message=", ".join(messages)
        )
    return PodCondition(type=CONTAINERS_READY, status=TRUE)


def pod_ready_condition(
    spec: PodSpec | None,
    conditions: Sequence[PodCondition],
    statuses: Sequence[ContainerStatus] | None,
    phase: str,
) -> PodCondition:
    """``ContainersReady`` and every readiness gate's condition (looked up in ``conditions``) True."""
    containers_ready = containers_ready_condition(spec, statuses, phase)
    if containers_ready.status != TRUE:
        return attrs.evolve(containers_ready, type=READY)
    messages = []
    for gate in (spec.readiness_gates if spec else None) or ():
        condition = find_condition(conditions, gate.condition_type)
        if condition is None:
            messages.append(
                f'corresponding condition of pod readiness gate "{gate.condition_type}" does not exist.'
            )
        elif condition.status != TRUE:
            gate_name = f'"{gate.condition_type}"'
            messages.append(
                f'the status of pod readiness gate {gate_name} is not "True", but {condition.status}'
            )
    if messages:
        return PodCondition(
            type=READY, status=FALSE, reason=READINESS_GATES_NOT_READY, message=", ".join(messages)
        )
    return PodCondition(type=READY, status=TRUE)


def need_to_reconcile_pod_readiness(pod: Pod) -> bool:
    """Go ``NeedToReconcilePodReadiness``: the pod has readiness gates and its ``Ready`` condition, as
    written, disagrees with the one its own conditions and container statuses give (or is missing)."""
    spec = pod.spec
    if spec is None or not spec.readiness_gates:
        return False
    status = pod.status
    if status is None:
        return True
    conditions = status.conditions or ()
    expected = pod_ready_condition(spec, conditions, status.container_statuses, status.phase or "")
    current = find_condition(conditions, READY)
    return current is None or current.status != expected.status


def _has_any_regular_container_started(spec: PodSpec | None, statuses: Sequence[ContainerStatus]) -> bool:
    names = {c.name for c in (spec.containers if spec else None) or ()}
    for status in statuses:
        state = status.state
        if status.name in names and state is not None and (state.running or state.terminated):
            return True
    return False


def initialized_condition(
    spec: PodSpec | None, statuses: Sequence[ContainerStatus] | None, phase: str
) -> PodCondition:
    """True once every regular init container succeeded and every sidecar started."""
    init_containers = (spec.init_containers if spec else None) or ()
    if statuses is None and init_containers:
        return PodCondition(type=INITIALIZED, status=FALSE, reason=UNKNOWN_CONTAINER_STATUSES)
    statuses = statuses or ()
    unknown: list[str] = []
    incomplete: list[str] = []
    for container in init_containers:
        status = find_status(statuses, container.name)
        if status is None:
            unknown.append(container.name or "")
        elif (status.started is not True) if container.is_sidecar else not status.ready:
            incomplete.append(container.name or "")
    if phase == SUCCEEDED and not unknown:
        return PodCondition(type=INITIALIZED, status=TRUE, reason=POD_COMPLETED)
    # A regular container has run: the pod was initialized before (sidecars may be restarting now).
    if _has_any_regular_container_started(spec, statuses):
        return PodCondition(type=INITIALIZED, status=TRUE)
    messages = []
    if unknown:
        messages.append(f"containers with unknown status: {_go_list(unknown)}")
    if incomplete:
        messages.append(f"containers with incomplete status: {_go_list(incomplete)}")
    if messages:
        return PodCondition(
            type=INITIALIZED, status=FALSE, reason=CONTAINERS_NOT_INITIALIZED, message=", ".join(messages)
        )
    return PodCondition(type=INITIALIZED, status=TRUE)


def pod_sandbox_changed(pod: Pod, status: RuntimePodStatus) -> bool:
    """Whether a new sandbox is needed (Go ``PodSandboxChanged``): none, several ready, the newest not
    ready, a network-mode change, or no IP for a pod-network sandbox."""
    if not status.sandbox_statuses:
        return True
    if sum(1 for s in status.sandbox_statuses if s.ready) > 1:
        return True
    newest = status.sandbox_statuses[0]
    if not newest.ready:
        return True
    host_network = bool(pod.spec and pod.spec.host_network)
    if newest.host_network != host_network:
        return True
    return not host_network and not newest.ip


def pod_ready_to_start_containers_condition(pod: Pod, status: RuntimePodStatus) -> PodCondition:
    """True when the newest sandbox is ready with its network set up (no new sandbox is needed)."""
    value = FALSE if pod_sandbox_changed(pod, status) else TRUE
    return PodCondition(type=POD_READY_TO_START_CONTAINERS, status=value)


def pod_scheduled_condition() -> PodCondition:
    return PodCondition(type=POD_SCHEDULED, status=TRUE)


def set_transition_times(
    conditions: Sequence[PodCondition], old_conditions: Iterable[PodCondition] | None, now: str
) -> tuple[PodCondition, ...]:
    """Fill ``lastTransitionTime`` of kubelet-owned conditions: the old one while the status value is
    unchanged, else ``now`` (status manager ``updateLastTransitionTime``). Others are left as they are."""
    old_conditions = tuple(old_conditions or ())
    result = []
    for condition in conditions:
        if condition.type in KUBELET_OWNED_CONDITIONS:
            old = find_condition(old_conditions, condition.type)
            if old is not None and old.status == condition.status and old.last_transition_time:
                condition = attrs.evolve(condition, last_transition_time=old.last_transition_time)
            else:
                condition = attrs.evolve(condition, last_transition_time=now)
        result.append(condition)
    return tuple(result)
