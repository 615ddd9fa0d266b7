"""Pod phase from container statuses (Go: ``getPhase`` in ``pkg/kubelet/kubelet_pods.go``).

The phase is derived on every sync, never stored; the kubelet never reports ``Unknown``. Ignores the
``ContainerRestartRules`` gate (per-container restart rules), like the default kubelet.
"""

from __future__ import annotations

from collections.abc import Iterable

from kubelet_trio.api.pod import FAILED, PENDING, RUNNING, SUCCEEDED, TERMINAL_PHASES, PodSpec
from kubelet_trio.api.status import ContainerState, ContainerStatus

__all__ = [
    "FAILED",
    "PENDING",
    "RUNNING",
    "SUCCEEDED",
    "TERMINAL_PHASES",
    "find_status",
    "get_phase",
    "restart_policy",
]


def restart_policy(spec: PodSpec | None) -> str:
    """The pod's restart policy, ``Always`` when unset (the API default)."""
    return (spec.restart_policy if spec else None) or "Always"


def find_status(statuses: Iterable[ContainerStatus], name: str | None) -> ContainerStatus | None:
    return next((s for s in statuses if s.name == name), None)


def _state(status: ContainerStatus) -> ContainerState:
    return status.state or ContainerState()


def _last_exit_code(status: ContainerStatus) -> int | None:
    """Exit code of ``lastState.terminated``, None without one."""
    last = status.last_state
    if last is None or last.terminated is None:
        return None
    return last.terminated.exit_code or 0


def get_phase(
    spec: PodSpec | None,
    init_statuses: Iterable[ContainerStatus],
    statuses: Iterable[ContainerStatus],
    *,
    pod_is_terminal: bool,
    pod_has_initialized: bool,
    is_static: bool,
) -> str:
    """The phase for ``spec`` given the API container statuses (KUBELET-REFERENCE.md 7.1).

    ``pod_has_initialized``: a regular container of the current sandbox has started (sidecars that
    restart then do not put the pod back to Pending). ``pod_is_terminal``: the pod worker decided the pod
    is done, so containers will not restart whatever the policy (not applied to static pods).
    """
    info = [*statuses, *init_statuses]
    policy = restart_policy(spec)
    init_containers = (spec.init_containers if spec else None) or ()
    containers = (spec.containers if spec else None) or ()

    pending_init = failed_init = pending_sidecars = 0
    for container in init_containers:
        if container.is_sidecar:
            continue
        status = find_status(info, container.name)
        if status is None:
            pending_init += 1
            continue
        state = _state(status)
        if state.running is not None:
            pending_init += 1
        elif state.terminated is not None:
            if state.terminated.exit_code:
                failed_init += 1
        elif state.waiting is not None:
            last = _last_exit_code(status)
            if last is None:
                pending_init += 1
            elif last != 0:
                failed_init += 1
        else:
            pending_init += 1

    unknown = running = waiting = stopped = succeeded = 0
    for container in init_containers:
        if not container.is_sidecar:
            continue
        status = find_status(info, container.name)
        if status is None:
            unknown += 1
            continue
        state = _state(status)
        if state.running is not None:
            if status.started is not True:
                pending_sidecars += 1
            running += 1
        elif state.terminated is not None:
            pass  # a stopped sidecar does not count for the phase
        elif state.waiting is not None:
            if _last_exit_code(status) is None:
                pending_sidecars += 1
                waiting += 1
        else:
            pending_sidecars += 1
            unknown += 1

    for container in containers:
        status = find_status(info, container.name)
        if status is None:
            unknown += 1
            continue
        state = _state(status)
        if state.running is not None:
            running += 1
        elif state.terminated is not None:
            stopped += 1
            if not state.terminated.exit_code:
                succeeded += 1
        elif state.waiting is not None:
            if _last_exit_code(status) is not None:
                stopped += 1
            else:
                waiting += 1
        else:
            unknown += 1

    if failed_init > 0 and policy == "Never":
        return FAILED
    if pending_init > 0 or (pending_sidecars > 0 and not pod_has_initialized) or waiting > 0:
        return PENDING  # one or more containers has not been started
    if running > 0 and unknown == 0:
        return RUNNING  # all started, at least one running
    if running == 0 and stopped > 0 and unknown == 0:
        if pod_is_terminal and not is_static:
            # Nothing will be restarted whatever the policy.
            return SUCCEEDED if stopped == succeeded else FAILED
        if policy == "Always":
            return RUNNING  # all restarting
        if stopped == succeeded:
            return SUCCEEDED
        if policy == "Never":
            return FAILED
        return RUNNING  # OnFailure, at least one failed and restarting
    return PENDING
