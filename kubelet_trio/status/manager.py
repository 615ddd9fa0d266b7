"""The in-process status manager: the latest API status of every pod, versioned and waitable.

Go: ``pkg/kubelet/status/status_manager.go`` (its cache half; publishing to the API server is a later
layer that reads from here). Phases are monotonic: a pod that reached Succeeded or Failed never leaves it.
Anyone can wait for a status to satisfy a predicate (run-once, tests, the HTTP server) instead of polling.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

import attrs
import trio_util

from kubelet_trio.api import Pod
from kubelet_trio.api.pod import TERMINAL_PHASES, PodSpec
from kubelet_trio.api.status import (
    ContainerState,
    ContainerStateTerminated,
    ContainerStatus,
    PodStatus,
)
from kubelet_trio.logs import kobj, kv

logger = logging.getLogger(__name__)


@attrs.frozen
class VersionedStatus:
    pod: Pod
    status: PodStatus
    version: int


#: The state Go's ``TerminatePod`` gives a container whose end it never saw.
_UNKNOWN_AT_TERMINATION = ContainerState(
    terminated=ContainerStateTerminated(
        exit_code=137,
        reason="ContainerStatusUnknown",
        message="The container could not be located when the pod was terminated",
    )
)


def _is_terminated(status: ContainerStatus) -> bool:
    return status.state is not None and status.state.terminated is not None


def _left_waiting(status: ContainerStatus) -> bool:
    """Evidence of a start: not waiting now (an empty state counts, as Go's ``State.Waiting == nil``), or
    an earlier instance that terminated."""
    waiting = status.state is not None and status.state.waiting is not None
    previous = status.last_state is not None and status.last_state.terminated is not None
    return not waiting or previous


def _exited_zero(state: ContainerState | None) -> bool:
    return state is not None and state.terminated is not None and state.terminated.exit_code == 0


def has_pod_initialized(pod: Pod) -> bool:
    """Whether ``pod.status`` shows the pod got past its init containers (Go ``hasPodInitialized``).

    Like Go it reads the pod object's own status (what the pod worker last received), not the cache.
    The sidecar rule (a restartable last init container counts once running and started) is v1.28+.
    """
    spec = pod.spec or PodSpec()
    init_specs = spec.init_containers or ()
    if not init_specs:
        return True
    status = pod.status or PodStatus()
    if any(_left_waiting(s) for s in status.container_statuses or ()):
        return True
    init_statuses = status.init_container_statuses or ()
    if not init_statuses:
        return False
    last = len(init_statuses) - 1
    # Go ``GetContainerByIndex``: the spec and status at that index must name the same container
    if last >= len(init_specs) or init_specs[last].name != init_statuses[last].name:
        return False
    last_status = init_statuses[last]
    if init_specs[last].is_sidecar:
        state = last_status.state
        return state is not None and state.running is not None and last_status.started is True
    return _exited_zero(last_status.last_state) or _exited_zero(last_status.state)


def initialized_init_containers(statuses: Sequence[ContainerStatus]) -> tuple[ContainerStatus, ...]:
    """The init statuses up to the last one with evidence of a start (Go ``initializedContainers``): the
    suffix that never started is left out; with no evidence at all, the first one is kept."""
    for index in range(len(statuses) - 1, -1, -1):
        if _left_waiting(statuses[index]):
            return tuple(statuses[: index + 1])
    return tuple(statuses[:1])


def _unknown_unless_terminated(status: ContainerStatus) -> ContainerStatus:
    if _is_terminated(status):
        return status
    return attrs.evolve(status, state=_UNKNOWN_AT_TERMINATION)  # Go replaces the state only


def terminated_container_statuses(pod: Pod, status: PodStatus) -> PodStatus:
    """``status`` with the containers Go's ``TerminatePod`` (v1.33) reports as gone.

    - Regular containers not terminated become ``ContainerStatusUnknown`` (exit 137), but only once the
      pod has initialized (:func:`has_pod_initialized`): a pod whose init container failed keeps its
      never-started containers waiting (``PodInitializing``), the failed init container tells why.
    - Init containers: those up to the last one that was ever started (:func:`initialized_init_containers`)
      become ``ContainerStatusUnknown`` unless terminated; the ones after it keep waiting.
    """
    containers = status.container_statuses
    if containers and has_pod_initialized(pod):
        containers = tuple(map(_unknown_unless_terminated, containers))
    inits = status.init_container_statuses
    if inits:
        started = len(initialized_init_containers(inits))
        inits = (*map(_unknown_unless_terminated, inits[:started]), *inits[started:])
    return attrs.evolve(status, container_statuses=containers, init_container_statuses=inits)


@attrs.define(eq=False)
class StatusManager:
    _statuses: dict[str, VersionedStatus] = attrs.Factory(dict)
    version: trio_util.AsyncValue[int] = attrs.Factory(lambda: trio_util.AsyncValue(0))

    def get(self, uid: str) -> PodStatus | None:
        entry = self._statuses.get(uid)
        return entry.status if entry is not None else None

    def get_pod(self, uid: str) -> Pod | None:
        """The pod with its latest status filled in."""
        entry = self._statuses.get(uid)
        return attrs.evolve(entry.pod, status=entry.status) if entry is not None else None

    def all(self) -> list[VersionedStatus]:
        return list(self._statuses.values())

    def set_pod_status(self, pod: Pod, status: PodStatus) -> None:
        old = self._statuses.get(pod.uid)
        if old is not None and old.status.phase in TERMINAL_PHASES and status.phase != old.status.phase:
            logger.warning(
                "refusing illegal phase transition",
                extra=kv(pod=kobj(pod), uid=pod.uid, **{"from": old.status.phase}, to=status.phase),
            )
            status = attrs.evolve(status, phase=old.status.phase)
        if old is not None and old.status == status:
            # Only the pod object changed (e.g. the API copy of its status after our own write): keep it,
            # but nothing new is to be published, so the version stays.
            if old.pod is not pod:
                self._statuses[pod.uid] = VersionedStatus(pod, status, old.version)
            return
        if old is None or old.status.phase != status.phase:
            logger.info("pod phase", extra=kv(pod=kobj(pod), uid=pod.uid, phase=status.phase))
        self._statuses[pod.uid] = VersionedStatus(pod, status, (old.version + 1) if old else 1)
        self.version.value += 1

    def terminate_pod(self, pod: Pod) -> None:
        """Final status once a pod's containers are gone (Go ``TerminatePod``): containers never seen to
        end are reported as gone (:func:`terminated_container_statuses`) and the phase becomes terminal
        (Failed unless already Succeeded or Failed; static pods keep theirs)."""
        entry = self._statuses.get(pod.uid)
        if entry is None:
            return
        status = terminated_container_statuses(pod, entry.status)
        if status.phase not in TERMINAL_PHASES and not pod.is_static:
            status = attrs.evolve(status, phase="Failed")
        self.set_pod_status(pod, status)

    def remove_orphaned(self, keep: Iterable[str]) -> None:
        wanted = set(keep)
        for uid in [u for u in self._statuses if u not in wanted]:
            del self._statuses[uid]
            self.version.value += 1

    async def wait_for(self, uid: str, predicate: Callable[[PodStatus], bool]) -> PodStatus:
        """Wait until the pod's status satisfies ``predicate``; the caller bounds it with a timeout."""
        while True:
            status = self.get(uid)
            if status is not None and predicate(status):
                return status
            await self.version.wait_transition()


__all__ = [
    "StatusManager",
    "VersionedStatus",
    "has_pod_initialized",
    "initialized_init_containers",
    "terminated_container_statuses",
]
