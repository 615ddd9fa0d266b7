"""The in-process status manager: the latest API status of every pod, versioned and waitable.

Go: ``pkg/kubelet/status/status_manager.go`` (its cache half; publishing to the API server is a later
layer that reads from here). Phases are monotonic: a pod that reached Succeeded or Failed never leaves it.
Anyone can wait for a status to satisfy a predicate (run-once, tests, the HTTP server) instead of polling.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import attrs
import trio_util

from kubelet_trio.api import Pod
from kubelet_trio.api.pod import TERMINAL_PHASES
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


def _terminate_container(status: ContainerStatus) -> ContainerStatus:
    """A container not known to be terminated when its pod ends is reported as gone (Go TerminatePod)."""
    state = status.state
    if state is not None and state.terminated is not None:
        return status
    terminated = ContainerStateTerminated(
        exit_code=137,
        reason="ContainerStatusUnknown",
        message="The container could not be located when the pod was terminated",
    )
    return attrs.evolve(status, state=ContainerState(terminated=terminated), ready=False)


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
        """Final status once a pod's containers are gone: nothing left running or waiting."""
        entry = self._statuses.get(pod.uid)
        if entry is None:
            return
        status = entry.status
        status = attrs.evolve(
            status,
            container_statuses=tuple(map(_terminate_container, status.container_statuses or ())) or None,
            init_container_statuses=tuple(map(_terminate_container, status.init_container_statuses or ()))
            or None,
        )
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


async def wait_for_phase(manager: StatusManager, uid: str, *phases: str) -> PodStatus:
    return await manager.wait_for(uid, lambda s: s.phase in phases)


__all__ = ["StatusManager", "VersionedStatus", "wait_for_phase"]
