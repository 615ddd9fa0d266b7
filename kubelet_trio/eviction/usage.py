"""Per-pod resource usage for ranking pods (Go: the pod stats of the summary API that ``statsFunc`` serves).

The eviction manager needs, per pod: the memory working set, disk usage split the way Go's ranking
functions measure it (container writable layers, container logs, local volumes), the inodes of each,
and the process count. :class:`StatsPodUsage` takes them from the kubelet's stats provider
(:mod:`kubelet_trio.stats`: CRI container stats, logs and emptyDir volumes measured on disk);
:class:`SimulatedPodUsage` is set from Python.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import attrs
import trio

from kubelet_trio.api import Pod
from kubelet_trio.stats.types import FsStats, PodStats, PodStatsProvider

__all__ = ["ContainerUsage", "PodUsage", "PodUsageProvider", "SimulatedPodUsage", "StatsPodUsage"]


@attrs.frozen
class ContainerUsage:
    """What one container uses (for the eviction message)."""

    memory_working_set: int = 0
    rootfs_bytes: int = 0
    logs_bytes: int = 0


@attrs.frozen
class PodUsage:
    """What one pod uses (bytes, inodes, processes), and per container name."""

    memory_working_set: int = 0
    rootfs_bytes: int = 0  # the containers' writable layers
    logs_bytes: int = 0
    volume_bytes: int = 0  # local ephemeral volumes (emptyDir on disk)
    rootfs_inodes: int = 0
    logs_inodes: int = 0
    volume_inodes: int = 0
    processes: int = 0
    containers: Mapping[str, ContainerUsage] = attrs.field(factory=dict, eq=False)
    volumes: Mapping[str, int] = attrs.field(factory=dict, eq=False)  # local volume name -> bytes
    ephemeral_bytes: int = 0  # everything the pod stores locally (Go: the pod's ephemeral storage)


class PodUsageProvider(Protocol):
    """Usage of the given pods, by UID; a pod without stats is left out (Go ranks those first)."""

    async def pod_usage(self, pods: Sequence[Pod]) -> Mapping[str, PodUsage]: ...


def _local_volumes(pod: Pod) -> set[str]:
    """Names of the pod's emptyDir volumes on disk (memory-backed ones use no disk)."""
    return {
        volume.name
        for volume in (pod.spec.volumes if pod.spec else None) or ()
        if volume.name and volume.empty_dir is not None and (volume.empty_dir.medium or "") != "Memory"
    }


def _used(fs: FsStats | None) -> tuple[int, int]:
    return (fs.used_bytes or 0, fs.inodes_used or 0) if fs is not None else (0, 0)


def pod_usage_from_stats(pod: Pod, stats: PodStats) -> PodUsage:
    """What the ranking reads of one pod's summary stats."""
    containers = {
        c.name: ContainerUsage(
            memory_working_set=(c.memory.working_set_bytes or 0) if c.memory else 0,
            rootfs_bytes=_used(c.rootfs)[0],
            logs_bytes=_used(c.logs)[0],
        )
        for c in stats.containers
    }
    local = _local_volumes(pod)
    volumes = [_used(v.fs) for v in stats.volume_stats if v.name in local]
    memory = stats.memory.working_set_bytes if stats.memory is not None else None
    return PodUsage(
        memory_working_set=memory
        if memory is not None
        else sum(c.memory_working_set for c in containers.values()),
        rootfs_bytes=sum(_used(c.rootfs)[0] for c in stats.containers),
        logs_bytes=sum(_used(c.logs)[0] for c in stats.containers),
        volume_bytes=sum(v[0] for v in volumes),
        rootfs_inodes=sum(_used(c.rootfs)[1] for c in stats.containers),
        logs_inodes=sum(_used(c.logs)[1] for c in stats.containers),
        volume_inodes=sum(v[1] for v in volumes),
        processes=(stats.process_stats.process_count or 0) if stats.process_stats else 0,
        containers=containers,
        volumes={v.name: _used(v.fs)[0] for v in stats.volume_stats if v.name in local},
        ephemeral_bytes=_used(stats.ephemeral_storage)[0],
    )


@attrs.define(eq=False)
class StatsPodUsage:
    """Pod usage from the kubelet's stats provider."""

    provider: PodStatsProvider

    async def pod_usage(self, pods: Sequence[Pod]) -> Mapping[str, PodUsage]:
        by_uid = {pod.uid: pod for pod in pods}
        return {
            stats.pod_ref.uid: pod_usage_from_stats(by_uid[stats.pod_ref.uid], stats)
            for stats in await self.provider.pod_stats()
            if stats.pod_ref.uid in by_uid
        }


@attrs.define(eq=False)
class SimulatedPodUsage:
    """Usage set from Python per pod UID; pods never set have no stats."""

    _usage: dict[str, PodUsage] = attrs.Factory(dict)

    def set(self, uid: str, usage: PodUsage) -> None:
        self._usage[uid] = usage

    async def pod_usage(self, pods: Sequence[Pod]) -> Mapping[str, PodUsage]:
        await trio.lowlevel.checkpoint()
        return {pod.uid: self._usage[pod.uid] for pod in pods if pod.uid in self._usage}
