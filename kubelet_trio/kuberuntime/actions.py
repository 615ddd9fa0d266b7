"""``computePodActions``: what a sync must do to move the runtime towards the pod spec.

A pure function of the pod, the runtime's :class:`~kubelet_trio.container.types.PodStatus` and the probe
results (Go: ``kuberuntime_manager.go`` ``computePodActions``, ``kuberuntime_container.go``
``findNextInitContainerToRun`` / ``computeInitContainerActions``, ``container/helpers.go``
``ShouldContainerBeRestarted``). Decision order:

1. the sandbox must be (re)created (``pod_sandbox_changed``) → kill everything, start from init #0 or
   all app containers — except a ``Never`` pod that already ran, which is only killed;
2. init containers: the legacy path (no sidecars: one at a time, a failure under ``Never`` kills the
   pod) or the sidecar path (``restartPolicy: Always`` init containers, restarted whatever the pod's
   policy, must be started before the next init container);
3. app containers: restart per ``ShouldContainerBeRestarted``; a running one whose hash changed is killed
   and restarted regardless of policy; a liveness/startup ``Failure`` kills it (restarted unless
   ``Never``);
4. nothing kept and nothing to start → kill the pod (sidecars cannot keep it alive).

Ephemeral containers (added to a running pod for debugging) start once, whatever the initialization
progress, as soon as the sandbox exists; they are never restarted and never keep a pod alive.

In-place resize (given ``actuated``, the resources last applied to each container): a running app
container or sidecar otherwise kept whose allocated resources differ is either restarted (a changed
resource whose ``resizePolicy`` is ``RestartContainer``) or listed in ``containers_to_update`` per
resource (:mod:`kubelet_trio.kuberuntime.resize`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

import attrs

from kubelet_trio.container.hash import hash_container
from kubelet_trio.container.types import ContainerState, ContainerStatus, PodStatus
from kubelet_trio.kuberuntime.resize import ContainerToUpdate, compute_container_resize, update_order_key
from kubelet_trio.kuberuntime.sandbox import pod_sandbox_changed
from kubelet_trio.prober.results import ProbeKind, ProbeResult

if TYPE_CHECKING:
    from kubelet_trio.api import Container, Pod
    from kubelet_trio.api.container import ResourceRequirements

__all__ = [
    "NO_PROBE_RESULTS",
    "REASON_FAILED_POST_START_HOOK",
    "REASON_LIVENESS_PROBE",
    "REASON_STARTUP_PROBE",
    "REASON_UNKNOWN",
    "ContainerToKill",
    "PodActions",
    "ProbeResults",
    "compute_pod_actions",
    "container_changed",
    "find_next_init_container_to_run",
    "has_restartable_init_container",
    "is_init_container_failed",
    "should_container_be_restarted",
]

#: container name -> the resources last applied to it (in-place resize)
Actuated = Callable[[str], "ResourceRequirements | None"]

# containerKillReason
REASON_STARTUP_PROBE = "StartupProbe"
REASON_LIVENESS_PROBE = "LivenessProbe"
REASON_FAILED_POST_START_HOOK = "FailedPostStartHook"
REASON_UNKNOWN = "Unknown"


ProbeResults = Mapping[tuple[ProbeKind, str], ProbeResult]
"""Latest probe result by ``(kind, container id)``; a missing key means the probe has not run yet."""

NO_PROBE_RESULTS: ProbeResults = {}


class ContainerToKill(NamedTuple):
    name: str
    reason: str  # "", LivenessProbe, StartupProbe, Unknown, FailedPostStartHook
    message: str


@attrs.frozen
class PodActions:
    """Go's ``podActions``. Indices refer to ``spec.containers`` / ``spec.initContainers``."""

    kill_pod: bool = False
    create_sandbox: bool = False
    sandbox_id: str = ""
    attempt: int = 0
    # Legacy init path (no sidecars): the one init container to start next.
    next_init_container_to_start: int | None = None
    # Sidecar path: init containers to start, in spec order.
    init_containers_to_start: tuple[int, ...] = ()
    containers_to_start: tuple[int, ...] = ()
    containers_to_kill: Mapping[str, ContainerToKill] = attrs.field(factory=dict)
    # Indices into spec.ephemeralContainers of those never started.
    ephemeral_containers_to_start: tuple[int, ...] = ()
    # In-place resize: per resource ("memory", "cpu"), the running containers to update, in order.
    containers_to_update: Mapping[str, tuple[ContainerToUpdate, ...]] = attrs.field(factory=dict)
    # A container restarts for a resize: the pod cgroup is resized too.
    update_pod_resources: bool = False


def _restart_policy(pod: Pod) -> str:
    return (pod.spec.restart_policy if pod.spec else None) or "Always"


def _restart_on_failure(pod: Pod) -> bool:
    return _restart_policy(pod) != "Never"


def _containers(pod: Pod) -> tuple[Container, ...]:
    return (pod.spec.containers if pod.spec else None) or ()


def _init_containers(pod: Pod) -> tuple[Container, ...]:
    return (pod.spec.init_containers if pod.spec else None) or ()


def has_restartable_init_container(pod: Pod) -> bool:
    return any(c.is_sidecar for c in _init_containers(pod))


def container_changed(container: Container, status: ContainerStatus) -> bool:
    return status.hash != hash_container(container)


def _find(status: PodStatus, container: Container) -> ContainerStatus | None:
    return status.find(container.name or "")


def should_container_be_restarted(container: Container, pod: Pod, status: PodStatus) -> bool:
    if pod.metadata is not None and pod.metadata.deletion_timestamp is not None:
        return False
    current = _find(status, container)
    if current is None:
        return True  # never run (or all instances GC'd)
    if current.state is ContainerState.RUNNING:
        return False
    if current.state in (ContainerState.UNKNOWN, ContainerState.CREATED):
        return True
    policy = _restart_policy(pod)
    if policy == "Never":
        return False
    return not (policy == "OnFailure" and current.exit_code == 0)


def _container_succeeded(container: Container, status: PodStatus) -> bool:
    current = _find(status, container)
    return current is not None and current.state is ContainerState.EXITED and current.exit_code == 0


def is_init_container_failed(status: ContainerStatus) -> bool:
    if "OOMKilled" in status.reason:
        return True
    if status.state is ContainerState.EXITED and status.exit_code != 0:
        return True
    return status.state is ContainerState.UNKNOWN


def _has_any_regular_container_created(pod: Pod, status: PodStatus) -> bool:
    for container in _containers(pod):
        current = _find(status, container)
        if current is not None and current.state in (
            ContainerState.CREATED,
            ContainerState.RUNNING,
            ContainerState.EXITED,
        ):
            return True
    return False


def find_next_init_container_to_run(
    pod: Pod, status: PodStatus
) -> tuple[ContainerStatus | None, int | None, bool]:
    """Legacy path → ``(last failed status, next init index, done)``."""
    inits = _init_containers(pod)
    if not inits:
        return None, None, True
    for container in _containers(pod):
        current = _find(status, container)
        if current is not None and current.state is ContainerState.RUNNING:
            return None, None, True
    for i in reversed(range(len(inits))):
        current = _find(status, inits[i])
        if current is not None and is_init_container_failed(current):
            return current, i, False
    for i in reversed(range(len(inits))):
        current = _find(status, inits[i])
        if current is None:
            continue
        if current.state is ContainerState.RUNNING:
            return None, None, False
        if current.state is ContainerState.EXITED:
            if i == len(inits) - 1:
                return None, None, True
            return None, i + 1, False
    return None, 0, False


def _unknown_message(kind: str, state: ContainerState) -> str:
    return f'{kind} is in "{state.value}" state, try killing it before restart'


@attrs.define
class _Builder:
    kill_pod: bool
    create_sandbox: bool
    sandbox_id: str
    attempt: int
    next_init: int | None = None
    init_to_start: list[int] = attrs.Factory(list)
    to_start: list[int] = attrs.Factory(list)
    to_kill: dict[str, ContainerToKill] = attrs.Factory(dict)
    ephemeral_to_start: list[int] = attrs.Factory(list)
    to_update: dict[str, list[ContainerToUpdate]] = attrs.Factory(dict)
    update_pod_resources: bool = False

    def build(self) -> PodActions:
        return PodActions(
            kill_pod=self.kill_pod,
            create_sandbox=self.create_sandbox,
            sandbox_id=self.sandbox_id,
            attempt=self.attempt,
            next_init_container_to_start=self.next_init,
            init_containers_to_start=tuple(self.init_to_start),
            containers_to_start=tuple(self.to_start),
            containers_to_kill=dict(self.to_kill),
            ephemeral_containers_to_start=tuple(self.ephemeral_to_start),
            containers_to_update={
                resource: tuple(sorted(updates, key=functools.partial(update_order_key, resource)))
                for resource, updates in self.to_update.items()
            },
            update_pod_resources=self.update_pod_resources,
        )


def _compute_init_container_actions(
    pod: Pod, status: PodStatus, probes: ProbeResults, changes: _Builder, actuated: Actuated | None = None
) -> bool:
    """Sidecar path (``computeInitContainerActions``); returns whether the pod is initialized."""
    inits = _init_containers(pod)
    if not inits:
        return True
    last = len(inits) - 1
    # Exited regular containers do not count: after a reboot every container is exited and the new
    # sandbox must not be taken for initialized.
    pod_has_initialized = any(
        (current := _find(status, c)) is not None
        and current.state in (ContainerState.CREATED, ContainerState.RUNNING)
        for c in _containers(pod)
    )
    previously_initialized = pod_has_initialized
    restart_on_failure = _restart_on_failure(pod)

    for i in reversed(range(len(inits))):
        container = inits[i]
        name = container.name or ""
        current = _find(status, container)
        if current is None:
            # Its last status was removed: a sidecar of an initialized pod is restarted.
            if previously_initialized and container.is_sidecar:
                changes.init_to_start.append(i)
            continue
        if previously_initialized and not container.is_sidecar:
            continue  # after initialization only sidecars are kept running

        state = current.state
        if state is ContainerState.CREATED:
            changes.init_to_start.append(i)  # created but never started: start it again
        elif state is ContainerState.RUNNING:
            if container.is_sidecar:
                pod_has_initialized = (
                    _sidecar_running(
                        container, i, i == last, current, probes, previously_initialized, changes, actuated
                    )
                    or pod_has_initialized
                )
        elif state is ContainerState.EXITED:
            if container.is_sidecar:
                changes.init_to_start.append(i)  # always restarted, whatever the pod's policy
            elif is_init_container_failed(current):
                if not restart_on_failure:
                    changes.kill_pod = True
                    changes.init_to_start.clear()
                    return False
                changes.init_to_start.append(i)
            elif i == last:
                pod_has_initialized = True
            else:
                changes.init_to_start.append(i + 1)
        else:  # UNKNOWN
            message = _unknown_message("Init container", state)
            if container.is_sidecar:
                changes.to_kill[current.id] = ContainerToKill(name, REASON_UNKNOWN, message)
                changes.init_to_start.append(i)
            else:
                if not restart_on_failure:
                    changes.kill_pod = True
                    changes.init_to_start.clear()
                    return False
                changes.to_kill[current.id] = ContainerToKill(name, REASON_UNKNOWN, message)
                changes.init_to_start.append(i)

        previously_initialized = True

    if not previously_initialized:
        changes.init_to_start.append(0)  # nothing started yet
    changes.init_to_start.reverse()
    return pod_has_initialized


def _sidecar_running(
    container: Container,
    index: int,
    is_last: bool,
    current: ContainerStatus,
    probes: ProbeResults,
    previously_initialized: bool,
    changes: _Builder,
    actuated: Actuated | None = None,
) -> bool:
    """A running sidecar; returns True when it completes the pod's initialization."""
    name = container.name or ""
    if container.startup_probe is not None:
        startup = probes.get((ProbeKind.STARTUP, current.id))
        if startup is None:
            return False  # not probed yet: wait
        if startup is not ProbeResult.SUCCESS:
            if startup is ProbeResult.FAILURE:
                message = f"Init container {name} failed startup probe"
                changes.to_kill[current.id] = ContainerToKill(name, REASON_STARTUP_PROBE, message)
                changes.init_to_start.append(index)
            return False
    # Started: it counts as initialized.
    initialized = False
    if is_last:
        initialized = True
    elif not previously_initialized:
        changes.init_to_start.append(index + 1)
    if container_changed(container, current):
        message = f"Init container {name} definition changed"
        changes.to_kill[current.id] = ContainerToKill(name, "", message)
        changes.init_to_start.append(index)
        return initialized
    if container.liveness_probe is not None:
        liveness = probes.get((ProbeKind.LIVENESS, current.id))
        if liveness is ProbeResult.FAILURE:
            message = f"Init container {name} failed liveness probe"
            changes.to_kill[current.id] = ContainerToKill(name, REASON_LIVENESS_PROBE, message)
            changes.init_to_start.append(index)
            return initialized
    if actuated is not None and _resize(container, current, actuated, changes):
        changes.init_to_start.append(index)
    return initialized


def _resize(container: Container, current: ContainerStatus, actuated: Actuated, changes: _Builder) -> bool:
    """Go ``computePodResizeAction`` for a running container: True when it must restart for it."""
    decision = compute_container_resize(container, current.id, actuated(container.name or ""))
    if decision is None:
        return False
    if decision.restart_message is not None:
        changes.to_kill[current.id] = ContainerToKill(current.name, "", decision.restart_message)
        changes.update_pod_resources = True
        return True
    for resource, update in decision.updates.items():
        changes.to_update.setdefault(resource, []).append(update)
    return False


def compute_pod_actions(
    pod: Pod,
    status: PodStatus,
    probe_results: ProbeResults = NO_PROBE_RESULTS,
    actuated: Actuated | None = None,
) -> PodActions:
    create, attempt, sandbox_id = pod_sandbox_changed(pod, status)
    changes = _Builder(kill_pod=create, create_sandbox=create, sandbox_id=sandbox_id, attempt=attempt)
    containers = _containers(pod)
    inits = _init_containers(pod)
    sidecar_path = has_restartable_init_container(pod)
    restart_on_failure = _restart_on_failure(pod)

    if create:
        if not restart_on_failure and attempt != 0 and status.container_statuses:
            # A Never pod that already ran: only kill it, never re-run it in a new sandbox.
            changes.create_sandbox = False
            return changes.build()
        to_start = [
            i
            for i, c in enumerate(containers)
            if not (_restart_policy(pod) == "OnFailure" and _container_succeeded(c, status))
        ]
        if not to_start:
            if sidecar_path:
                initialized = _has_any_regular_container_created(pod, status)
            else:
                initialized = find_next_init_container_to_run(pod, status)[2]
            if initialized:
                changes.create_sandbox = False
                return changes.build()
        if inits:
            if sidecar_path:
                changes.init_to_start = [0]
            else:
                changes.next_init = 0
            return changes.build()
        changes.to_start = to_start
        return changes.build()

    # Ephemeral containers run once: started when no instance exists, whatever the init progress.
    changes.ephemeral_to_start = [
        i
        for i, c in enumerate((pod.spec.ephemeral_containers if pod.spec else None) or ())
        if status.find(c.name or "") is None
    ]

    if not sidecar_path:
        last_status, next_index, done = find_next_init_container_to_run(pod, status)
        if not done:
            if next_index is not None:
                failed = last_status is not None and is_init_container_failed(last_status)
                if failed and not restart_on_failure:
                    changes.kill_pod = True
                else:
                    if last_status is not None and last_status.state is ContainerState.UNKNOWN:
                        changes.to_kill[last_status.id] = ContainerToKill(
                            inits[next_index].name or "",
                            REASON_UNKNOWN,
                            _unknown_message("Init container", last_status.state),
                        )
                    changes.next_init = next_index
            return changes.build()
    else:
        initialized = _compute_init_container_actions(pod, status, probe_results, changes, actuated)
        if changes.kill_pod or not initialized:
            return changes.build()

    keep = 0
    for index, container in enumerate(containers):
        name = container.name or ""
        current = _find(status, container)
        if current is None or current.state is not ContainerState.RUNNING:
            if should_container_be_restarted(container, pod, status):
                changes.to_start.append(index)
                if current is not None and current.state is ContainerState.UNKNOWN:
                    changes.to_kill[current.id] = ContainerToKill(
                        current.name, REASON_UNKNOWN, _unknown_message("Container", current.state)
                    )
            continue
        restart = restart_on_failure
        if container_changed(container, current):
            message, reason = f"Container {name} definition changed", ""
            restart = True  # the spec changed: restart whatever the policy
        elif probe_results.get((ProbeKind.LIVENESS, current.id)) is ProbeResult.FAILURE:
            message, reason = f"Container {name} failed liveness probe", REASON_LIVENESS_PROBE
        elif probe_results.get((ProbeKind.STARTUP, current.id)) is ProbeResult.FAILURE:
            message, reason = f"Container {name} failed startup probe", REASON_STARTUP_PROBE
        else:
            if actuated is not None and _resize(container, current, actuated, changes):
                changes.to_start.append(index)  # Go: not kept, so it does not keep the pod alive
                continue
            keep += 1
            continue
        if restart:
            message = f"{message}, will be restarted"
            changes.to_start.append(index)
        changes.to_kill[current.id] = ContainerToKill(current.name, reason, message)

    if keep == 0 and not changes.to_start:
        changes.kill_pod = True
        if sidecar_path:
            changes.init_to_start = []  # sidecars must not keep the pod alive
    return changes.build()
