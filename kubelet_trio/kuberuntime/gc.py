"""Container garbage collection for one node's pods (Go: ``kuberuntime_gc.go``).

- :meth:`ContainerGC.garbage_collect`: the periodic collection under a :class:`GCPolicy`, as Go's
  ``GarbageCollect``. Dead containers created more than ``min_age`` ago form evict units (pod UID,
  container name). Once every source is ready, the units of pods whose content should be removed go
  whole; then each unit keeps its newest ``max_per_pod_container``; then, when ``max_containers`` is not
  negative and there are more, every unit keeps ``max_containers / units`` (at least 1) and the oldest
  remaining dead containers across all units go until ``max_containers`` are left. Unknown-state
  containers are stopped before removal. Sandboxes that are not ready and hold no containers go, except
  the newest of a pod that is still wanted; log directories of removed pods go (all sources ready).
- :meth:`ContainerGC.remove_dead_containers`: per container name of a pod, keep the newest
  ``max(keep, 1)`` dead instances (the newest is what restart counts and crash-loop backoff read) and
  remove the older ones, log files first; all of them for a pod whose content should be removed.
- :meth:`ContainerGC.collect_orphans`: runtime pods that are no longer desired and are fully stopped
  (no running container, no ready sandbox) lose their containers, sandboxes and log directory. Pods
  that still run are left to the kubelet's kill path.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import TYPE_CHECKING, Protocol

import attrs

from kubelet_trio import defaults
from kubelet_trio.container.types import ContainerState, ContainerStatus, PodStatus, RuntimePod
from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.kuberuntime.logs import pod_logs_directory, remove_pod_logs
from kubelet_trio.logs import kobj, kv

if TYPE_CHECKING:
    from kubelet_trio.cri.runtime import Runtime
    from kubelet_trio.kuberuntime.container import ContainerLifecycle

__all__ = [
    "DEFAULT_MAX_CONTAINERS",
    "DEFAULT_MAX_PER_POD_CONTAINER",
    "DEFAULT_MIN_AGE",
    "ContainerGC",
    "GCPolicy",
    "GCResult",
    "PodStateProvider",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_PER_POD_CONTAINER = defaults.MAXIMUM_DEAD_CONTAINERS_PER_CONTAINER
DEFAULT_MAX_CONTAINERS = defaults.MAXIMUM_DEAD_CONTAINERS  # negative: no limit
DEFAULT_MIN_AGE = defaults.MINIMUM_CONTAINER_TTL_DURATION
_DEAD = (ContainerState.EXITED, ContainerState.UNKNOWN)
_ALIVE = (ContainerState.RUNNING, ContainerState.UNKNOWN)


@attrs.frozen
class GCPolicy:
    """Go ``kubecontainer.GCPolicy``: how long a dead container is kept at least, and how many."""

    min_age: float = DEFAULT_MIN_AGE  # seconds since creation
    max_per_pod_container: int = DEFAULT_MAX_PER_POD_CONTAINER  # negative: no limit
    max_containers: int = DEFAULT_MAX_CONTAINERS  # negative: no limit


class PodStateProvider(Protocol):
    """What the pod workers know (Go: ``podStateProvider``)."""

    def should_pod_content_be_removed(self, uid: str) -> bool:
        """The pod is gone for good (deleted and terminated, evicted, or never known): remove all of it."""
        ...

    def should_pod_runtime_be_removed(self, uid: str) -> bool:
        """The pod is terminated (its containers may go when reclaiming for eviction)."""
        ...


@attrs.frozen
class GCResult:
    containers: tuple[str, ...] = ()
    sandboxes: tuple[str, ...] = ()
    log_dirs: tuple[str, ...] = ()


@attrs.frozen
class _Dead:
    id: str
    uid: str
    name: str
    created_at: int
    unknown: bool


def _newest_first(items: list[_Dead]) -> list[_Dead]:
    return sorted(items, key=lambda c: c.created_at, reverse=True)


@attrs.define(eq=False, kw_only=True)
class ContainerGC:
    runtime: Runtime
    lifecycle: ContainerLifecycle
    pod_logs_dir: str

    async def remove_dead_containers(
        self,
        status: PodStatus,
        keep_per_container: int = DEFAULT_MAX_PER_POD_CONTAINER,
        *,
        remove_all: bool = False,
    ) -> list[str]:
        """Remove all but the newest ``max(keep_per_container, 1)`` dead instances per container name;
        with ``remove_all`` (a deleted pod its worker has terminated, or an evicted one) every one.

        Unknown-state instances are stopped before removal. Returns the removed container ids.
        """
        keep = 0 if remove_all else max(keep_per_container, 1)
        dead: dict[str, list[ContainerStatus]] = {}
        for instance in status.container_statuses:  # newest first
            if instance.state in _DEAD:
                dead.setdefault(instance.name, []).append(instance)
        removed: list[str] = []
        for name, instances in dead.items():
            for instance in instances[keep:]:
                ctx = {"pod": kobj(status), "uid": status.uid, "container": name, "id": instance.id}
                try:
                    if instance.state is ContainerState.UNKNOWN:
                        await self.runtime.stop_container(instance.id, 0)
                    await self.lifecycle.remove_container(instance.id)
                except cri_errors.CriError as err:
                    logger.warning("failed to remove dead container", extra=kv(**ctx, err=err))
                    continue
                logger.info("removed dead container", extra=kv(**ctx))
                removed.append(instance.id)
        return removed

    async def collect_orphans(self, pods: Collection[RuntimePod], desired_uids: Collection[str]) -> list[str]:
        """Remove the stopped runtime pods whose UID is not desired; return their UIDs."""
        collected: list[str] = []
        for pod in pods:
            if pod.uid in desired_uids:
                continue
            ctx = {"pod": kobj(pod), "uid": pod.uid}
            if any(c.state in _ALIVE for c in pod.containers) or any(
                s.state is ContainerState.RUNNING for s in pod.sandboxes
            ):
                logger.debug("orphaned pod still running, not collected", extra=kv(**ctx))
                continue
            try:
                for container in pod.containers:
                    await self.lifecycle.remove_container(container.id)
                for sandbox in pod.sandboxes:
                    await self.runtime.remove_pod_sandbox(sandbox.id)
                if pod.name and pod.namespace:
                    await self.lifecycle.run_sync(
                        remove_pod_logs,
                        pod_logs_directory(self.pod_logs_dir, pod.namespace, pod.name, pod.uid),
                    )
            except (cri_errors.CriError, OSError) as err:
                logger.warning("failed to collect orphaned pod", extra=kv(**ctx, err=err))
                continue
            logger.info("collected orphaned pod", extra=kv(**ctx))
            collected.append(pod.uid)
        return collected

    # -- the periodic collection (Go: GarbageCollect) -----------------------------------------------

    async def garbage_collect(
        self,
        policy: GCPolicy,
        pods: Sequence[RuntimePod],
        *,
        sandboxes_with_containers: Callable[[], Awaitable[Collection[str]]],
        state: PodStateProvider,
        all_sources_ready: bool,
        now_ns: int,
        evict_non_deleted_pods: bool = False,
    ) -> GCResult:
        """One collection over the runtime's ``pods`` (see the module docstring); returns what went.

        ``sandboxes_with_containers``: lists the ids of sandboxes any container (of any state) still refers
        to; asked after the containers are collected.
        ``evict_non_deleted_pods`` (eviction's reclaim): terminated pods lose their containers and
        sandboxes too, not only deleted ones.
        """

        def removable(uid: str) -> bool:
            return state.should_pod_content_be_removed(uid) or (
                evict_non_deleted_pods and state.should_pod_runtime_be_removed(uid)
            )

        containers = await self._evict_containers(policy, pods, removable, all_sources_ready, now_ns)
        sandboxes = await self._evict_sandboxes(pods, await sandboxes_with_containers(), removable)
        alive = {
            pod.uid
            for pod in pods
            if any(c.state in _ALIVE for c in pod.containers)
            or any(s.state is ContainerState.RUNNING for s in pod.sandboxes)
        }
        log_dirs = await self._evict_pod_log_dirs(state, alive) if all_sources_ready else []
        return GCResult(tuple(containers), tuple(sandboxes), tuple(log_dirs))

    async def _evict_containers(
        self,
        policy: GCPolicy,
        pods: Sequence[RuntimePod],
        removable: Callable[[str], bool],
        all_sources_ready: bool,
        now_ns: int,
    ) -> list[str]:
        newest_gc_time = now_ns - int(policy.min_age * 1e9)
        units: dict[tuple[str, str], list[_Dead]] = {}
        for pod in pods:
            for c in pod.containers:
                if c.state is ContainerState.RUNNING or c.created_at > newest_gc_time:
                    continue
                dead = _Dead(c.id, pod.uid, c.name, c.created_at, c.state is ContainerState.UNKNOWN)
                units.setdefault((pod.uid, c.name), []).append(dead)
        units = {key: _newest_first(unit) for key, unit in units.items()}
        removed: list[str] = []
        if all_sources_ready:
            for key in [k for k in units if removable(k[0])]:
                removed += await self._remove_oldest(units.pop(key), None)
        if policy.max_per_pod_container >= 0:
            removed += await self._keep_per_unit(units, policy.max_per_pod_container)
        total = sum(len(unit) for unit in units.values())
        if policy.max_containers >= 0 and total > policy.max_containers:
            removed += await self._keep_per_unit(units, max(policy.max_containers // len(units), 1))
            total = sum(len(unit) for unit in units.values())
            if total > policy.max_containers:
                flattened = _newest_first([c for unit in units.values() for c in unit])
                removed += await self._remove_oldest(flattened, total - policy.max_containers)
        return removed

    async def _keep_per_unit(self, units: dict[tuple[str, str], list[_Dead]], keep: int) -> list[str]:
        removed: list[str] = []
        for key, unit in units.items():
            if len(unit) > keep:
                removed += await self._remove_oldest(unit, len(unit) - keep)
                units[key] = unit[:keep]
        return removed

    async def _remove_oldest(self, newest_first: list[_Dead], count: int | None) -> list[str]:
        """Remove the ``count`` oldest (None: all) of a newest-first list, oldest first."""
        victims = newest_first if count is None else newest_first[len(newest_first) - count :]
        removed: list[str] = []
        for dead in reversed(victims):
            ctx = {"uid": dead.uid, "container": dead.name, "id": dead.id}
            try:
                if dead.unknown:
                    await self.runtime.stop_container(dead.id, 0)
                await self.lifecycle.remove_container(dead.id)
            except cri_errors.CriError as err:
                logger.warning("failed to remove dead container", extra=kv(**ctx, err=err))
                continue
            logger.info("removed dead container", extra=kv(**ctx))
            removed.append(dead.id)
        return removed

    async def _evict_sandboxes(
        self,
        pods: Sequence[RuntimePod],
        with_containers: Collection[str],
        removable: Callable[[str], bool],
    ) -> list[str]:
        removed: list[str] = []
        for pod in pods:
            # newest first; on equal creation times the one listed later is taken as newer
            order = sorted(enumerate(pod.sandboxes), key=lambda e: (e[1].created_at, e[0]), reverse=True)
            sandboxes = [sandbox for _, sandbox in order]
            keep_newest = not removable(pod.uid)
            for sandbox in sandboxes[1:] if keep_newest else sandboxes:
                if sandbox.state is ContainerState.RUNNING or sandbox.id in with_containers:
                    continue  # active
                try:
                    await self.runtime.remove_pod_sandbox(sandbox.id)
                except cri_errors.CriError as err:
                    logger.warning(
                        "failed to remove sandbox", extra=kv(uid=pod.uid, sandbox=sandbox.id, err=err)
                    )
                    continue
                logger.info("removed dead sandbox", extra=kv(pod=kobj(pod), uid=pod.uid, sandbox=sandbox.id))
                removed.append(sandbox.id)
        return removed

    async def _evict_pod_log_dirs(self, state: PodStateProvider, alive: Collection[str]) -> list[str]:
        """Log directories (``<namespace>_<name>_<uid>``) of pods whose content should be removed; those
        of pods with containers still running stay (the kill path reaches them first)."""
        try:
            names: list[str] = await self.lifecycle.run_sync(_list_dir, self.pod_logs_dir)
        except OSError as err:
            logger.warning("failed to read the pod logs directory", extra=kv(dir=self.pod_logs_dir, err=err))
            return []
        removed: list[str] = []
        for name in names:
            uid = name.rpartition("_")[2]
            if not uid or uid in alive or not state.should_pod_content_be_removed(uid):
                continue
            path = os.path.join(self.pod_logs_dir, name)
            try:
                await self.lifecycle.run_sync(remove_pod_logs, path)
            except OSError as err:
                logger.warning("failed to remove pod log directory", extra=kv(dir=path, err=err))
                continue
            logger.info("removed pod log directory", extra=kv(uid=uid, dir=path))
            removed.append(path)
        return removed


def _list_dir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except FileNotFoundError:
        return []
