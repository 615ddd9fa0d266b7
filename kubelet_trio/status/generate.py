"""The API pod status from the runtime's view (Go: ``generateAPIPodStatus``, ``convertStatusToAPIStatus``,
``convertToAPIContainerStatuses`` in ``pkg/kubelet/kubelet_pods.go``; the probe manager's
``UpdatePodStatus``; the status manager's transition times and start time; ``active_deadline.go``).

Pure functions: everything the Go kubelet reads from its managers comes in as arguments (the previous
status, the reason cache, probe results, node IPs, the current time).
"""

from __future__ import annotations

import functools
import ipaddress
import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import attrs

from kubelet_trio.api.container import Container
from kubelet_trio.api.pod import Pod, PodSpec
from kubelet_trio.api.status import (
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    HostIP,
    PodCondition,
    PodIP,
    PodStatus,
)
from kubelet_trio.container.hash import hash_container
from kubelet_trio.container.types import ContainerState as RuntimeState
from kubelet_trio.container.types import ContainerStatus as RuntimeContainerStatus
from kubelet_trio.container.types import PodStatus as RuntimePodStatus
from kubelet_trio.logs import kobj, kv
from kubelet_trio.status.conditions import (
    DISRUPTION_TARGET,
    KUBELET_OWNED_CONDITIONS,
    containers_ready_condition,
    find_condition,
    initialized_condition,
    pod_ready_condition,
    pod_ready_to_start_containers_condition,
    pod_scheduled_condition,
    set_transition_times,
)
from kubelet_trio.status.phase import FAILED, TERMINAL_PHASES, get_phase, restart_policy
from kubelet_trio.status.qos import pod_qos
from kubelet_trio.status.resources import container_status_resources
from kubelet_trio.status.timefmt import (
    SupportsNow,
    Timestamp,
    format_time,
    parse_rfc3339,
    resolve_now,
    rfc3339,
    to_datetime,
)

__all__ = [
    "CONTAINER_CREATING",
    "CONTAINER_STATUS_UNKNOWN",
    "DEADLINE_EXCEEDED_MESSAGE",
    "DEADLINE_EXCEEDED_REASON",
    "POD_INITIALIZING",
    "active_deadline_exceeded",
    "convert_container_statuses",
    "generate_api_pod_status",
    "should_container_be_restarted",
]

logger = logging.getLogger(__name__)

CONTAINER_CREATING = "ContainerCreating"
POD_INITIALIZING = "PodInitializing"
CONTAINER_STATUS_UNKNOWN = "ContainerStatusUnknown"
DEADLINE_EXCEEDED_REASON = "DeadlineExceeded"
DEADLINE_EXCEEDED_MESSAGE = "Pod was active on the node longer than the specified deadline"

_MSG_UNKNOWN_TERMINATED = "The container could not be located when the pod was terminated"
_MSG_UNKNOWN_DELETED = (
    "The container could not be located when the pod was deleted.  The container used to be Running"
)
_MSG_INIT_LOST = (
    "Unable to get init container status from container runtime and pod has been initialized, "
    "treat it as exited normally"
)


def _spec(pod: Pod) -> PodSpec:
    return pod.spec or PodSpec()


def _deleted(pod: Pod) -> bool:
    return bool(pod.metadata and pod.metadata.deletion_timestamp)


def should_container_be_restarted(container: Container, pod: Pod, status: RuntimePodStatus) -> bool:
    """Whether the next sync would (re)start ``container`` (Go ``ShouldContainerBeRestarted``).

    A container-level ``restartPolicy`` (a sidecar's ``Always``) overrides the pod's.
    """
    if _deleted(pod):
        return False
    current = status.find(container.name or "")
    if current is None:
        return True
    if current.state is RuntimeState.RUNNING:
        return False
    if current.state in (RuntimeState.UNKNOWN, RuntimeState.CREATED):
        return True
    policy = container.restart_policy or restart_policy(pod.spec)
    if policy == "Never":
        return False
    return not (policy == "OnFailure" and current.exit_code == 0)


def _terminated_reason(cs: RuntimeContainerStatus) -> str:
    # containerd and CRI-O always report one; a runtime that does not gets the same words.
    return cs.reason or ("Completed" if cs.exit_code == 0 else "Error")


def _instance_image(cs: RuntimeContainerStatus, spec: Container) -> str | None:
    """The image an instance runs: the spec's while its hash (name + image) matches, else its own."""
    if not cs.hash or cs.hash == hash_container(spec) or not cs.image:
        return spec.image
    return cs.image


def _convert_one(
    cs: RuntimeContainerStatus, old: ContainerStatus | None, image: str | None
) -> ContainerStatus:
    """One runtime instance -> API status (``convertContainerStatus``), built once (no evolve: this runs
    for every container at every status generation)."""
    state = ContainerState(waiting=ContainerStateWaiting())  # CREATED, and UNKNOWN otherwise: waiting{}
    restart_count = cs.restart_count
    started: bool | None = None
    old_state = old.state if old is not None else None
    if cs.state is RuntimeState.RUNNING:
        state = ContainerState(running=ContainerStateRunning(started_at=rfc3339(cs.started_at)))
        if old is not None and old.started is not None and old.container_id == cs.container_id:
            started = old.started
    elif cs.state is RuntimeState.EXITED:
        state = ContainerState(
            terminated=ContainerStateTerminated(
                exit_code=cs.exit_code,
                reason=_terminated_reason(cs),
                message=cs.message or None,
                started_at=rfc3339(cs.started_at),
                finished_at=rfc3339(cs.finished_at),
                container_id=cs.container_id,
            )
        )
    elif cs.state is RuntimeState.UNKNOWN and old is not None and old_state is not None and old_state.running:
        # It was running and the runtime lost it: show it as terminated, not as "never ran".
        state = ContainerState(
            terminated=ContainerStateTerminated(
                exit_code=137, reason=CONTAINER_STATUS_UNKNOWN, message=_MSG_UNKNOWN_TERMINATED
            )
        )
        restart_count = (old.restart_count or 0) + 1
    return ContainerStatus(
        name=cs.name,
        state=state,
        last_state=ContainerState(),
        ready=False,
        restart_count=restart_count,
        image=image,
        image_id=cs.image_ref,
        container_id=cs.container_id,
        started=started,
    )


def _is_waiting_with(status: ContainerStatus, reason: str) -> bool:
    return (
        status.state is not None
        and status.state.waiting is not None
        and status.state.waiting.reason == reason
    )


def convert_container_statuses(
    pod: Pod,
    runtime_status: RuntimePodStatus,
    previous: Sequence[ContainerStatus] | None,
    containers: Sequence[Container],
    *,
    has_init_containers: bool,
    is_init: bool,
    reasons: Mapping[str, tuple[str, str]],
    with_resources: bool = False,
) -> tuple[ContainerStatus, ...]:
    """API statuses of ``containers`` (KUBELET-REFERENCE.md 7.3), before probe results (ready/started).

    Init statuses come back in spec order, regular ones sorted by name.
    """
    if not containers:
        return ()  # most pods have no init or ephemeral containers: skip the runtime statuses' walks
    old_statuses = {s.name: s for s in previous or ()}
    default_reason = POD_INITIALIZING if has_init_containers else CONTAINER_CREATING
    default_state = ContainerState(waiting=ContainerStateWaiting(reason=default_reason))

    statuses: dict[str, ContainerStatus] = {}
    for container in containers:
        name = container.name or ""
        status = ContainerStatus(
            name=name,
            state=default_state,
            last_state=ContainerState(),
            ready=False,
            restart_count=0,
            image=container.image,
            image_id="",
        )
        old = old_statuses.get(name)
        if old is not None:
            if old.state is not None and old.state.terminated is not None:
                status = old  # a terminated status stays as it was until the runtime says otherwise
            else:
                status = attrs.evolve(
                    status,
                    restart_count=old.restart_count or 0,
                    last_state=old.last_state or ContainerState(),
                )
        statuses[name] = status

    # A container that was running and is gone from the runtime: infer a termination so that the pod
    # does not fall back to Pending (and is not mistaken for one that never ran).
    runtime_names = {cs.name for cs in runtime_status.container_statuses}
    for container in containers:
        name = container.name or ""
        old = old_statuses.get(name)
        if name in runtime_names or old is None or old.state is None:
            continue
        if old.state.terminated is not None or old.state.running is None:
            continue
        status = statuses[name]
        if not _is_waiting_with(status, default_reason):
            continue
        if status.last_state is not None and status.last_state.terminated is not None:
            continue
        terminated = ContainerStateTerminated(
            exit_code=137, reason=CONTAINER_STATUS_UNKNOWN, message=_MSG_UNKNOWN_DELETED
        )
        restarts = (status.restart_count or 0) + (0 if _deleted(pod) else 1)
        statuses[name] = attrs.evolve(
            status, last_state=ContainerState(terminated=terminated), restart_count=restarts
        )

    # Newest instance -> state, the one before -> lastState.
    specs = {c.name or "": c for c in containers}
    seen: Counter[str] = Counter()
    for cs in sorted(runtime_status.container_statuses, key=lambda s: s.created_at, reverse=True):
        if cs.name not in statuses or seen[cs.name] >= 2:
            continue
        converted = _convert_one(cs, old_statuses.get(cs.name), _instance_image(cs, specs[cs.name]))
        if seen[cs.name] == 0:
            if with_resources and (not is_init or specs[cs.name].is_sidecar):
                # Go: InPlacePodVerticalScaling; the spec is the allocated one
                resources, allocated = container_status_resources(
                    specs[cs.name], converted, cs, old_statuses.get(cs.name)
                )
                converted = attrs.evolve(converted, resources=resources, allocated_resources=allocated)
            statuses[cs.name] = converted
        else:
            statuses[cs.name] = attrs.evolve(statuses[cs.name], last_state=converted.state)
        seen[cs.name] += 1

    regular_names = {c.name for c in _spec(pod).containers or ()}
    any_regular_created = any(cs.name in regular_names for cs in runtime_status.container_statuses)
    for container in containers:
        name = container.name or ""
        if is_init:
            current = runtime_status.find(name)
            if current is not None and current.state is RuntimeState.EXITED and current.exit_code == 0:
                continue  # an init container that succeeded is never flipped back to waiting
            state = statuses[name].state
            if (
                current is None
                and any_regular_created
                and not container.is_sidecar
                and state
                and state.waiting
            ):
                # Its instance was removed but the pod got past it: it succeeded.
                done = ContainerStateTerminated(exit_code=0, reason="Completed", message=_MSG_INIT_LOST)
                statuses[name] = attrs.evolve(statuses[name], state=ContainerState(terminated=done))
                continue
        if not should_container_be_restarted(container, pod, runtime_status):
            continue
        reason = reasons.get(name)
        if reason is None:
            continue  # keep the terminated state until the restart happens
        status = statuses[name]
        if status.state is not None and status.state.terminated is not None:
            status = attrs.evolve(status, last_state=status.state)
        waiting = ContainerStateWaiting(reason=reason[0], message=reason[1] or None)
        statuses[name] = attrs.evolve(status, state=ContainerState(waiting=waiting))

    if is_init:
        return tuple(statuses[c.name or ""] for c in containers)
    return tuple(statuses[name] for name in sorted(statuses))


def _probe_key(container_id: str | None, results: Mapping[str, bool] | None) -> bool | None:
    """The result for ``container_id`` keyed either ``<type>://<id>`` or by the bare ID."""
    if not results or not container_id:
        return None
    if container_id in results:
        return results[container_id]
    return results.get(container_id.partition("://")[2])


def _apply_probe_results(
    containers: Sequence[Container],
    statuses: tuple[ContainerStatus, ...],
    *,
    is_init: bool,
    readiness: Mapping[str, bool] | None,
    started: Mapping[str, bool] | None,
) -> tuple[ContainerStatus, ...]:
    """``started`` and ``ready`` as the probe manager sets them (``UpdatePodStatus``)."""
    specs = {c.name: c for c in containers}
    result = []
    for status in statuses:
        container = specs.get(status.name) or Container(name=status.name)
        running = status.state is not None and status.state.running is not None
        if not running:
            is_started = False
        elif (value := _probe_key(status.container_id, started)) is not None:
            is_started = value
        elif status.started:
            is_started = True  # a started container stays started (same container ID)
        else:
            is_started = container.startup_probe is None  # a startup probe that has not passed yet
        if is_init and not container.is_sidecar:
            terminated = status.state.terminated if status.state else None
            ready = terminated is not None and not terminated.exit_code
        elif not is_started or not running:
            ready = False
        elif (value := _probe_key(status.container_id, readiness)) is not None:
            ready = value
        else:
            ready = container.readiness_probe is None  # no readiness probe: ready once started
        result.append(attrs.evolve(status, started=is_started, ready=ready))
    return tuple(result)


def _has_any_active_regular_container_started(spec: PodSpec, status: RuntimePodStatus) -> bool:
    """A regular container exists in the current sandbox (created after the newest sandbox)."""
    names = {c.name for c in spec.containers or ()}
    since = status.sandbox_statuses[0].created_at if status.sandbox_statuses else 0
    return any(cs.name in names and cs.created_at >= since for cs in status.container_statuses)


@functools.lru_cache(maxsize=4096)  # every status generation parses the same few addresses again
def _parsed_ip(ip: str) -> tuple[int, str] | None:
    """(family, canonical text) of an address, None when it is not one."""
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return None
    return address.version, str(address)


def _ip_family(ip: str) -> int | None:
    parsed = _parsed_ip(ip)
    return parsed[0] if parsed else None


def _sort_pod_ips(ips: Sequence[str], node_ips: Sequence[str]) -> list[str]:
    """At most one IP per family, the node's family first (``sortPodIPs``)."""
    primary = _ip_family(node_ips[0]) if node_ips else None
    primary = primary or 4
    secondary = 6 if primary == 4 else 4
    result = []
    for family in (primary, secondary):
        for ip in ips:
            parsed = _parsed_ip(ip)
            if parsed is not None and parsed[0] == family:
                result.append(parsed[1])
                break
    return result


def active_deadline_exceeded(pod: Pod, status: PodStatus | None, now: Timestamp) -> bool:
    """``spec.activeDeadlineSeconds`` has passed since ``status.startTime`` (``pod.status`` if None)."""
    deadline = _spec(pod).active_deadline_seconds
    if deadline is None:
        return False
    status = status if status is not None else pod.status
    if status is None or not status.start_time:
        return False
    elapsed = to_datetime(now) - parse_rfc3339(status.start_time)
    return elapsed.total_seconds() >= deadline


def _deadline_exceeded(pod: Pod, status: PodStatus, now: Timestamp) -> PodStatus | None:
    """``status`` as Failed/``DeadlineExceeded`` when the active deadline has passed, else None."""
    if not active_deadline_exceeded(pod, status, now):
        return None
    return attrs.evolve(
        status, phase=FAILED, reason=DEADLINE_EXCEEDED_REASON, message=DEADLINE_EXCEEDED_MESSAGE
    )


def generate_api_pod_status(
    pod: Pod,
    runtime_status: RuntimePodStatus,
    *,
    old_status: PodStatus | None,
    now: Timestamp | Callable[[], Timestamp] | None = None,
    clock: SupportsNow | None = None,
    node_ips: tuple[str, ...] = (),
    reasons: Mapping[str, tuple[str, str]] | None = None,
    readiness: Mapping[str, bool] | None = None,
    started: Mapping[str, bool] | None = None,
    pod_is_terminal: bool = False,
    is_static: bool | None = None,
    resize_conditions: Sequence[PodCondition] | None = None,
) -> PodStatus:
    """The pod's status as the API server would show it after the kubelet's next status update.

    ``old_status``: the status manager's last status for the pod (``pod.status`` when None).
    ``now``: the current wall time (aware datetime, CRI ns, RFC 3339 string, or a zero-argument provider of
    one); or ``clock``: anything with ``now() -> datetime`` (``WallClock``). One of the two is required.
    ``reasons``: container name -> (waiting reason, message) from the last sync (the reason cache).
    ``readiness`` / ``started``: readiness and startup probe results by container ID (``containerd://…``
    or bare); a container without a result is ready once running and started unless it has a readiness
    probe, and started once running unless it has a startup probe.
    ``is_static``: defaults to the ``kubernetes.io/config.source`` annotation.
    ``resize_conditions``: the pod's PodResizePending/PodResizeInProgress conditions (in-place resize; the
    pod then carries its allocated resources); given, container statuses show ``resources`` and
    ``allocatedResources``. None: neither.
    """
    with_resources = resize_conditions is not None
    spec = _spec(pod)
    api_status = pod.status or PodStatus()
    old = old_status if old_status is not None else api_status
    moment = resolve_now(now, clock)
    now_text = format_time(moment)
    reasons = reasons or {}
    if is_static is None:
        is_static = pod.is_static

    init_containers = spec.init_containers or ()
    has_init = bool(init_containers)
    statuses = convert_container_statuses(
        pod,
        runtime_status,
        old.container_statuses,
        spec.containers or (),
        has_init_containers=has_init,
        is_init=False,
        reasons=reasons,
        with_resources=with_resources,
    )
    init_statuses = convert_container_statuses(
        pod,
        runtime_status,
        old.init_container_statuses,
        init_containers,
        has_init_containers=has_init,
        is_init=True,
        reasons=reasons,
        with_resources=with_resources,
    )
    # Ephemeral containers: converted like regular ones, never probed (no ready/started from probes).
    ephemeral_statuses = convert_container_statuses(
        pod,
        runtime_status,
        old.ephemeral_container_statuses,
        spec.ephemeral_containers or (),
        has_init_containers=has_init,
        is_init=False,
        reasons=reasons,
        with_resources=with_resources,
    )
    statuses = _apply_probe_results(
        spec.containers or (), statuses, is_init=False, readiness=readiness, started=started
    )
    init_statuses = _apply_probe_results(
        init_containers, init_statuses, is_init=True, readiness=readiness, started=started
    )

    phase = get_phase(
        spec,
        init_statuses,
        statuses,
        pod_is_terminal=pod_is_terminal,
        pod_has_initialized=_has_any_active_regular_container_started(spec, runtime_status),
        is_static=is_static,
    )
    # Phases are monotonic: a terminal phase seen before is kept - also over another terminal phase
    # computed now (a pod failed for its deadline whose container then exits 0 on SIGTERM stays
    # Failed), and with it the reason and message it was given.
    already_terminal = old.phase in TERMINAL_PHASES or api_status.phase in TERMINAL_PHASES
    if old.phase in TERMINAL_PHASES:
        phase = old.phase
    elif api_status.phase in TERMINAL_PHASES and phase not in TERMINAL_PHASES:
        phase = api_status.phase
    reason: str | None = None
    message: str | None = None
    if phase == old.phase:  # the reason and message belong to the phase
        reason = old.reason or api_status.reason
        message = old.message or api_status.message

    start_time = old.start_time or api_status.start_time or now_text
    status = PodStatus(phase=phase, reason=reason, message=message, start_time=start_time)
    if not already_terminal:
        # Go's active deadline handler overrides the computed phase, terminal or not.
        status = _deadline_exceeded(pod, status, moment) or status
    if api_status.phase in TERMINAL_PHASES and status.phase != api_status.phase:
        logger.error(
            "pod attempted illegal phase transition",
            extra=kv(pod=kobj(pod), pod_uid=pod.uid, original_phase=api_status.phase, new_phase=status.phase),
        )
        status = attrs.evolve(status, phase=api_status.phase)
    phase = status.phase or ""

    # Conditions: the API's non-kubelet ones (readiness gates...), DisruptionTarget from the previous
    # status, then the kubelet's own, in Go's order.
    conditions: list[PodCondition] = [
        c for c in api_status.conditions or () if c.type not in KUBELET_OWNED_CONDITIONS
    ]
    disruption = find_condition(old.conditions, DISRUPTION_TARGET)
    if disruption is not None:
        conditions = [c for c in conditions if c.type != DISRUPTION_TARGET] + [disruption]
    all_statuses = (*init_statuses, *statuses)
    conditions.append(pod_ready_to_start_containers_condition(pod, runtime_status))
    conditions.append(initialized_condition(spec, all_statuses, phase))
    conditions.append(pod_ready_condition(spec, conditions, all_statuses, phase))
    conditions.append(containers_ready_condition(spec, all_statuses, phase))
    conditions.append(pod_scheduled_condition())
    # Go's PodObservedGenerationTracking (GA in 1.35): the status and the kubelet's own conditions name
    # the pod generation they were computed from.
    generation = pod.metadata.generation if pod.metadata else None
    if generation is not None:
        conditions = [
            attrs.evolve(c, observed_generation=generation) if c.type in KUBELET_OWNED_CONDITIONS else c
            for c in conditions
        ]

    # IPs: the pod's from the runtime (one per family, node family first); host-network pods get the
    # node's; hostIP(s) from the node. Once no sandbox is ready the runtime reports none: the last known
    # ones stay (a finished pod keeps its podIP, as Go's PLEG and SyncTerminatingPod keep them).
    pod_ips = _sort_pod_ips(runtime_status.ips, node_ips)
    if not pod_ips and not any(s.ready for s in runtime_status.sandbox_statuses):
        pod_ips = [ip.ip for ip in old.pod_ips or () if ip.ip] or ([old.pod_ip] if old.pod_ip else [])
    if spec.host_network and not pod_ips and node_ips:
        pod_ips = [node_ips[0]]
        if len(node_ips) > 1 and _ip_family(node_ips[1]) != _ip_family(node_ips[0]):
            pod_ips.append(node_ips[1])
    host_ips = tuple(HostIP(ip=ip) for ip in node_ips[:2])

    timed = set_transition_times(conditions, old.conditions, now_text)
    if resize_conditions and not pod_is_terminal and phase not in TERMINAL_PHASES:
        # they keep their own times and generation (Go: the status manager's resize conditions)
        timed = (*timed, *resize_conditions)
    return attrs.evolve(
        status,
        conditions=timed,
        host_ip=node_ips[0] if node_ips else None,
        host_ips=host_ips or None,
        pod_ip=pod_ips[0] if pod_ips else None,
        pod_ips=tuple(PodIP(ip=ip) for ip in pod_ips) or None,
        init_container_statuses=init_statuses or None,
        container_statuses=statuses,
        ephemeral_container_statuses=ephemeral_statuses or None,
        qos_class=pod_qos(pod),
        observed_generation=generation,
    )
