"""Container garbage collection for one node's pods (Go: ``kuberuntime_gc.go``, simplified).

- :meth:`ContainerGC.remove_dead_containers`: per container name of a pod, keep the newest
  ``max(keep, 1)`` dead instances (the newest is what restart counts and crash-loop backoff read) and
  remove the older ones, log files first.
- :meth:`ContainerGC.remove_dead_sandboxes`: remove not-ready sandboxes of a pod that hold no
  containers, except the newest.
- :meth:`ContainerGC.collect_orphans`: runtime pods that are no longer desired and are fully stopped
  (no running container, no ready sandbox) lose their containers, sandboxes and log directory. Pods
  that still run are left to the kubelet's kill path.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import TYPE_CHECKING

import attrs

from kubelet_trio.container.types import ContainerState, ContainerStatus, PodStatus, RuntimePod
from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.kuberuntime.logs import pod_logs_directory, remove_pod_logs
from kubelet_trio.logs import kobj, kv

if TYPE_CHECKING:
    from kubelet_trio.cri.runtime import Runtime
    from kubelet_trio.kuberuntime.container import ContainerLifecycle

__all__ = ["DEFAULT_MAX_PER_POD_CONTAINER", "ContainerGC"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_PER_POD_CONTAINER = 1  # --maximum-dead-containers-per-container
_DEAD = (ContainerState.EXITED, ContainerState.UNKNOWN)
_ALIVE = (ContainerState.RUNNING, ContainerState.UNKNOWN)


@attrs.define(eq=False, kw_only=True)
class ContainerGC:
    runtime: Runtime
    lifecycle: ContainerLifecycle
    pod_logs_dir: str

    async def remove_dead_containers(
        self, status: PodStatus, keep_per_container: int = DEFAULT_MAX_PER_POD_CONTAINER
    ) -> list[str]:
        """Remove all but the newest ``max(keep_per_container, 1)`` dead instances per container name.

        Unknown-state instances are stopped before removal. Returns the removed container ids.
        """
        keep = max(keep_per_container, 1)
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

    async def remove_dead_sandboxes(self, status: PodStatus) -> list[str]:
        """Remove not-ready sandboxes without containers, keeping the newest sandbox of the pod."""
        removed: list[str] = []
        for sandbox in status.sandbox_statuses[1:]:  # newest first: the newest is kept
            if sandbox.ready:
                continue
            try:
                if await self.runtime.list_containers(pb.ContainerFilter(pod_sandbox_id=sandbox.id)):
                    continue
                await self.runtime.remove_pod_sandbox(sandbox.id)
            except cri_errors.CriError as err:
                logger.warning(
                    "failed to remove sandbox", extra=kv(uid=status.uid, sandbox=sandbox.id, err=err)
                )
                continue
            logger.info(
                "removed dead sandbox", extra=kv(pod=kobj(status), uid=status.uid, sandbox=sandbox.id)
            )
            removed.append(sandbox.id)
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
