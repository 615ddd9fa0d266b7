"""Resource usage of the node, its pods and their containers, from the runtime (Go: ``pkg/kubelet/stats``,
``cri_stats_provider.go``; with ``PodAndContainerStatsFromCRI``: no cAdvisor).

One :class:`CriStatsProvider` per node. It reads, for the objects carrying this node's label:

- CRI ``ListPodSandbox`` / ``ListContainers``: which pods and containers count. As Go, a pod counts once
  (its ready sandbox, else its newest), and per container name only the running instance (else the
  newest): exited instances would double-count usage. Their ``created_at`` is the start time.
- CRI ``ListContainerStats``: per-container CPU, memory and writable layer. ``usageNanoCores`` is the
  runtime's when it reports one, else computed here from the previous sample of that container.
- CRI ``ListPodSandboxStats``: pod-level CPU, memory (the pod cgroup: the pause container included),
  network and process count. Where the runtime cannot answer (gRPC UNIMPLEMENTED; containerd without
  a pod cgroup parent, as on nodes without ``cgroupsPerQOS``, fails with "cgroupPath is empty"), pod
  CPU and memory are the sum of the pod's containers and the call is not tried again for
  :data:`SANDBOX_STATS_RETRY` seconds.
- The disk: each container's log directory and each on-disk emptyDir (``du``: allocated blocks, hard
  links once), summed with the writable layers into the pod's ``ephemeral-storage``, the usage
  disk-pressure eviction ranks by.
- The host (:mod:`kubelet_trio.stats.host`) for the node, CRI ``ImageFsInfo`` for the image filesystem.

Consumers: ``/stats/summary`` and ``/metrics/resource`` (:mod:`kubelet_trio.server.stats`) and the
eviction manager (:meth:`CriStatsProvider.pod_stats`, typed by :class:`PodStatsProvider`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs
import trio

from kubelet_trio.clock import WallClock
from kubelet_trio.cm.cgroup_manager import CGROUP_ROOT
from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.kuberuntime.labels import (
    CONTAINER_NAME_LABEL,
    POD_NAME_LABEL,
    POD_NAMESPACE_LABEL,
    POD_UID_LABEL,
    node_selector,
)
from kubelet_trio.kuberuntime.logs import container_logs_directory, pod_logs_directory
from kubelet_trio.logs import kv
from kubelet_trio.stats.cgroups import CgroupUsage, read_cgroup_usage
from kubelet_trio.stats.host import HostSample, HostSampler, read_host_sample
from kubelet_trio.stats.types import (
    ContainerStats,
    CPUStats,
    FsStats,
    InterfaceStats,
    MemoryStats,
    NetworkStats,
    NodeStats,
    PodReference,
    PodStats,
    ProcessStats,
    RlimitStats,
    Summary,
    VolumeStats,
)
from kubelet_trio.volumemanager.paths import EMPTY_DIR_PLUGIN, pod_dir, pod_etc_hosts_path

if TYPE_CHECKING:
    from kubelet_trio.volume.persistent import ClaimUsage as ClaimVolumeStats

__all__ = ["SANDBOX_STATS_RETRY", "CriStatsProvider", "DiskUsage", "disk_usage"]

logger = logging.getLogger(__name__)

SANDBOX_STATS_RETRY = 300.0


@attrs.frozen
class DiskUsage:
    used_bytes: int
    inodes_used: int


def disk_usage(path: str) -> DiskUsage | None:
    """``du`` of ``path``: allocated bytes (``st_blocks`` * 512) and inodes, each hard link once, not
    crossing into other filesystems; None when ``path`` does not exist. Blocking."""
    try:
        top = os.lstat(path)
    except FileNotFoundError:
        return None
    seen: set[tuple[int, int]] = set()
    used = inodes = 0
    stack = [(path, top)]
    while stack:
        current, st = stack.pop()
        key = (st.st_dev, st.st_ino)
        if key in seen:
            continue
        seen.add(key)
        used += st.st_blocks * 512
        inodes += 1
        if not os.path.isdir(current) or os.path.islink(current):
            continue
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            try:
                child = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if child.st_dev == top.st_dev:
                stack.append((entry.path, child))
    return DiskUsage(used, inodes)


def _value(v: pb.UInt64Value | None) -> int | None:
    return v.value if v is not None else None


def _pod_ref(labels: Mapping[str, str], metadata: pb.PodSandboxMetadata | None) -> PodReference:
    if metadata is not None and metadata.uid:
        return PodReference(metadata.name, metadata.namespace, metadata.uid)
    return PodReference(
        labels.get(POD_NAME_LABEL, ""), labels.get(POD_NAMESPACE_LABEL, ""), labels.get(POD_UID_LABEL, "")
    )


def _newest_first(items: Iterable[pb.PodSandbox]) -> list[pb.PodSandbox]:
    return sorted(items, key=lambda s: s.created_at, reverse=True)


def _live_sandboxes(sandboxes: Sequence[pb.PodSandbox]) -> list[pb.PodSandbox]:
    """One sandbox per pod: a ready one, else the newest (Go: ``removeTerminatedPods``)."""
    by_uid: dict[str, list[pb.PodSandbox]] = {}
    for sandbox in sandboxes:
        uid = sandbox.metadata.uid if sandbox.metadata else sandbox.labels.get(POD_UID_LABEL, "")
        by_uid.setdefault(uid, []).append(sandbox)
    chosen = []
    for group in by_uid.values():
        ready = [s for s in group if s.state is pb.PodSandboxState.SANDBOX_READY]
        chosen.append(_newest_first(ready or group)[0])
    return chosen


def _live_containers(containers: Sequence[pb.Container]) -> list[pb.Container]:
    """Per pod and container name: the running instances, else the newest (Go:
    ``removeTerminatedContainers``)."""
    groups: dict[tuple[str, str], list[pb.Container]] = {}
    for container in sorted(containers, key=lambda c: c.created_at):
        name = container.labels.get(CONTAINER_NAME_LABEL) or (
            container.metadata.name if container.metadata else ""
        )
        groups.setdefault((container.pod_sandbox_id, name), []).append(container)
    chosen: list[pb.Container] = []
    for group in groups.values():
        running = [c for c in group if c.state is pb.ContainerState.CONTAINER_RUNNING]
        chosen.extend(running or group[-1:])
    return chosen


def _memory(m: pb.MemoryUsage | None, fallback_ns: int) -> MemoryStats | None:
    if m is None:
        return None
    return MemoryStats(
        time_ns=m.timestamp or fallback_ns,
        available_bytes=_value(m.available_bytes),
        usage_bytes=_value(m.usage_bytes),
        working_set_bytes=_value(m.working_set_bytes),
        rss_bytes=_value(m.rss_bytes),
        page_faults=_value(m.page_faults),
        major_page_faults=_value(m.major_page_faults),
    )


def _network(n: pb.NetworkUsage | None, fallback_ns: int) -> NetworkStats | None:
    if n is None:
        return None

    def interface(i: pb.NetworkInterfaceUsage) -> InterfaceStats:
        return InterfaceStats(
            i.name, _value(i.rx_bytes), _value(i.rx_errors), _value(i.tx_bytes), _value(i.tx_errors)
        )

    default = interface(n.default_interface) if n.default_interface is not None else None
    others = tuple(interface(i) for i in n.interfaces)
    return NetworkStats(
        time_ns=n.timestamp or fallback_ns,
        default=default,
        interfaces=((default,) if default else ()) + others,
    )


def _sum(values: Iterable[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _sum_cpu(containers: Sequence[ContainerStats]) -> CPUStats | None:
    cpus = [c.cpu for c in containers if c.cpu is not None]
    if not cpus:
        return None
    return CPUStats(
        time_ns=max(c.time_ns for c in cpus),
        usage_nano_cores=_sum(c.usage_nano_cores for c in cpus),
        usage_core_nano_seconds=_sum(c.usage_core_nano_seconds for c in cpus),
    )


def _sum_memory(containers: Sequence[ContainerStats]) -> MemoryStats | None:
    mems = [c.memory for c in containers if c.memory is not None]
    if not mems:
        return None
    return MemoryStats(
        time_ns=max(m.time_ns for m in mems),
        usage_bytes=_sum(m.usage_bytes for m in mems),
        working_set_bytes=_sum(m.working_set_bytes for m in mems),
        rss_bytes=_sum(m.rss_bytes for m in mems),
        page_faults=_sum(m.page_faults for m in mems),
        major_page_faults=_sum(m.major_page_faults for m in mems),
    )


@attrs.frozen
class _PodDisk:
    """What :func:`_measure_pod_disk` found for one pod (blocking walk, one per pod)."""

    logs: dict[str, DiskUsage | None]  # container name → its log directory
    pod_logs: DiskUsage | None  # the pod log directory outside the containers' ones
    volumes: dict[str, DiskUsage]  # emptyDir name → usage (on disk only)
    etc_hosts: DiskUsage | None


def _measure_pod_disk(
    root_dir: str, logs_dir: str, ref: PodReference, container_names: Sequence[str]
) -> _PodDisk:
    logs = {
        name: disk_usage(container_logs_directory(logs_dir, ref.namespace, ref.name, ref.uid, name))
        for name in container_names
    }
    pod_logs_path = pod_logs_directory(logs_dir, ref.namespace, ref.name, ref.uid)
    pod_logs: DiskUsage | None = None
    try:
        files = [e.path for e in os.scandir(pod_logs_path) if e.name not in logs and not e.is_dir()]
        usages = [u for u in map(disk_usage, files) if u is not None]
        pod_logs = DiskUsage(sum(u.used_bytes for u in usages), sum(u.inodes_used for u in usages))
    except OSError:
        pass
    volumes: dict[str, DiskUsage] = {}
    empty_dirs = os.path.join(pod_dir(root_dir, ref.uid), "volumes", EMPTY_DIR_PLUGIN)
    try:
        entries = list(os.scandir(empty_dirs))
    except OSError:
        entries = []
    for entry in entries:
        if os.path.ismount(entry.path):  # medium: Memory counts as memory, not disk
            continue
        usage = disk_usage(entry.path)
        if usage is not None:
            volumes[entry.name] = usage
    return _PodDisk(logs, pod_logs, volumes, disk_usage(pod_etc_hosts_path(root_dir, ref.uid)))


@attrs.define(eq=False)
class CriStatsProvider:
    """Summaries for one node. Keeps the previous CPU samples (node and containers) to derive
    ``usageNanoCores``, so reuse one instance."""

    runtime: Runtime
    node_name: str
    root_dir: str
    pod_logs_dir: str
    clock: WallClock = attrs.Factory(WallClock)
    run_sync: RunSync = run_in_thread
    host: HostSampler = read_host_sample
    # the usage of a pod's claim-backed volumes by pod UID (kubelet_trio.volume: the CSI drivers' figures)
    claim_usage: Callable[[str], Awaitable[Sequence[ClaimVolumeStats]]] | None = None
    # system container name ("pods") → where its cgroup is (blocking; {}: not there), read under cgroup_root
    system_cgroups: Mapping[str, Callable[[], dict[str, str]]] = attrs.Factory(dict)
    cgroup_root: str = CGROUP_ROOT
    _container_cpu: dict[str, tuple[int, int]] = attrs.Factory(dict)  # id → (timestamp ns, core ns)
    _host_cpu: dict[str, tuple[int, int]] = attrs.Factory(dict)  # the node ("") and system containers
    _sandbox_stats_after: float = float("-inf")  # Trio time: ListPodSandboxStats failed, ask again then

    # -- the public surface ------------------------------------------------------------------------

    async def summary(self, *, cpu_and_memory_only: bool = False) -> Summary:
        """``/stats/summary``; ``cpu_and_memory_only`` skips the disk walks (``/metrics/resource``, Go's
        ``GetCPUAndMemoryStats``)."""
        node = await self.node_stats()
        pods = await self._pods(with_disk=not cpu_and_memory_only)
        return Summary(node, tuple(pods))

    async def pod_stats(self) -> list[PodStats]:
        """Every pod of this node with its containers, CPU, memory, processes and ephemeral storage."""
        return await self._pods(with_disk=True)

    async def node_stats(self) -> NodeStats:
        now = self.clock.wall_ns()
        sample: HostSample = await self.run_sync(self.host, self.root_dir)
        return NodeStats(
            node_name=self.node_name,
            start_time_ns=sample.boot_time_s * 10**9 if sample.boot_time_s else None,
            cpu=self._node_cpu_stats(sample, now),
            memory=self._node_memory(sample, now),
            fs=FsStats(
                time_ns=now,
                available_bytes=sample.fs_available_bytes,
                capacity_bytes=sample.fs_capacity_bytes,
                used_bytes=(
                    sample.fs_capacity_bytes - sample.fs_free_bytes
                    if sample.fs_capacity_bytes is not None and sample.fs_free_bytes is not None
                    else None
                ),
                inodes_free=sample.fs_inodes_free,
                inodes=sample.fs_inodes,
                inodes_used=(
                    sample.fs_inodes - sample.fs_inodes_free
                    if sample.fs_inodes is not None and sample.fs_inodes_free is not None
                    else None
                ),
            ),
            image_fs=await self.image_fs_stats(now),
            rlimit=RlimitStats(now, sample.max_pid, sample.processes),
            system_containers=tuple(await self._system_containers(now)),
        )

    async def _system_containers(self, now: int) -> list[ContainerStats]:
        """Go's ``SystemContainers`` from their cgroups: CPU (with a rate since the last summary) and
        memory, available bytes being the limit less the working set where there is a limit."""
        out = []
        for name, where in sorted(self.system_cgroups.items()):
            usage: CgroupUsage | None = await self.run_sync(
                lambda where=where: read_cgroup_usage(where(), root=self.cgroup_root)
            )
            if usage is None:
                continue
            cpu = None
            if usage.cpu_usage_ns is not None:
                cpu = _cpu_sample(self._host_cpu, name, now, usage.cpu_usage_ns)
            memory = MemoryStats(
                now,
                available_bytes=usage.memory_available,
                usage_bytes=usage.memory_usage,
                working_set_bytes=usage.memory_working_set,
                rss_bytes=usage.memory_rss,
            )
            out.append(ContainerStats(name, cpu=cpu, memory=memory))
        return out

    async def image_fs_stats(self, now_ns: int | None = None) -> FsStats | None:
        """The runtime's image filesystem (CRI ImageFsInfo), with capacity from ``statvfs`` of its
        mountpoint when that is on this machine."""
        now = self.clock.wall_ns() if now_ns is None else now_ns
        try:
            info = await self.runtime.image_fs_info()
        except cri_errors.CriError as err:
            logger.debug("image filesystem stats unavailable", extra=kv(err=err))
            return None
        if not info.image_filesystems:
            return None
        usage = info.image_filesystems[0]
        mountpoint = usage.fs_id.mountpoint if usage.fs_id else ""
        capacity = await self.run_sync(_statvfs, mountpoint) if mountpoint else None
        return FsStats(
            time_ns=usage.timestamp or now,
            used_bytes=_value(usage.used_bytes),
            inodes_used=_value(usage.inodes_used),
            available_bytes=capacity[0] if capacity else None,
            capacity_bytes=capacity[1] if capacity else None,
            inodes_free=capacity[2] if capacity else None,
            inodes=capacity[3] if capacity else None,
        )

    # -- node --------------------------------------------------------------------------------------

    def _node_cpu_stats(self, sample: HostSample, now: int) -> CPUStats | None:
        if sample.cpu_core_nano_seconds is None:
            return None
        return _cpu_sample(self._host_cpu, "", now, sample.cpu_core_nano_seconds)

    @staticmethod
    def _node_memory(sample: HostSample, now: int) -> MemoryStats | None:
        total, available = sample.memory_total_bytes, sample.memory_available_bytes
        if total is None or available is None:
            return None
        free = sample.memory_free_bytes
        return MemoryStats(
            time_ns=now,
            available_bytes=available,
            usage_bytes=total - free if free is not None else None,
            working_set_bytes=total - available,
        )

    # -- pods --------------------------------------------------------------------------------------

    async def _pods(self, *, with_disk: bool) -> list[PodStats]:
        selector = node_selector(self.node_name)
        sandboxes = _live_sandboxes(
            await self.runtime.list_pod_sandbox(pb.PodSandboxFilter(label_selector=selector))
        )
        containers = _live_containers(
            await self.runtime.list_containers(pb.ContainerFilter(label_selector=selector))
        )
        stats = {
            s.attributes.id: s
            for s in await self.runtime.list_container_stats(pb.ContainerStatsFilter(label_selector=selector))
            if s.attributes is not None
        }
        sandbox_stats = await self._sandbox_stats(selector)
        now = self.clock.wall_ns()
        by_sandbox: dict[str, list[ContainerStats]] = {}
        known = {s.id for s in sandboxes}
        for container in containers:
            if container.pod_sandbox_id in known:
                by_sandbox.setdefault(container.pod_sandbox_id, []).append(
                    self._container(container, stats.get(container.id), now)
                )
        self._forget_containers({c.id for c in containers})
        result = []
        for sandbox in sandboxes:
            members = by_sandbox.get(sandbox.id)
            if not members:
                continue  # as Go: a pod is reported once it has a container
            pod = self._pod(sandbox, members, sandbox_stats.get(sandbox.id), now)
            if with_disk:
                pod = await self._with_disk(pod, now)
            result.append(pod)
        return result

    async def _sandbox_stats(self, selector: dict[str, str]) -> dict[str, pb.PodSandboxStats]:
        if trio.current_time() < self._sandbox_stats_after:
            return {}
        try:
            listed = await self.runtime.list_pod_sandbox_stats(
                pb.PodSandboxStatsFilter(label_selector=selector)
            )
        except cri_errors.CriError as err:
            self._sandbox_stats_after = trio.current_time() + SANDBOX_STATS_RETRY
            logger.info(
                "pod sandbox stats unavailable, summing container stats",
                extra=kv(err=err, retry_after=SANDBOX_STATS_RETRY),
            )
            return {}
        return {s.attributes.id: s for s in listed if s.attributes is not None}

    def _container(
        self, container: pb.Container, stats: pb.ContainerStats | None, now: int
    ) -> ContainerStats:
        name = container.labels.get(CONTAINER_NAME_LABEL) or (
            container.metadata.name if container.metadata else ""
        )
        start = container.created_at or None
        if stats is None:
            return ContainerStats(name=name, start_time_ns=start)
        rootfs = None
        if stats.writable_layer is not None:
            rootfs = FsStats(
                time_ns=stats.writable_layer.timestamp or now,
                used_bytes=_value(stats.writable_layer.used_bytes),
                inodes_used=_value(stats.writable_layer.inodes_used),
            )
        return ContainerStats(
            name=name,
            start_time_ns=start,
            cpu=self._container_cpu_stats(container.id, stats.cpu, now),
            memory=_memory(stats.memory, now),
            rootfs=rootfs,
        )

    def _container_cpu_stats(self, container_id: str, cpu: pb.CpuUsage | None, now: int) -> CPUStats | None:
        if cpu is None:
            return None
        stamp = cpu.timestamp or now
        total = _value(cpu.usage_core_nano_seconds)
        nano_cores = _value(cpu.usage_nano_cores)
        if total is None:
            return CPUStats(stamp, nano_cores, None)
        return _cpu_sample(self._container_cpu, container_id, stamp, total, nano_cores)

    def _forget_containers(self, live: set[str]) -> None:
        for gone in set(self._container_cpu) - live:
            del self._container_cpu[gone]

    @staticmethod
    def _pod(
        sandbox: pb.PodSandbox,
        containers: list[ContainerStats],
        sandbox_stats: pb.PodSandboxStats | None,
        now: int,
    ) -> PodStats:
        linux = sandbox_stats.linux if sandbox_stats is not None else None
        cpu: CPUStats | None = None
        memory: MemoryStats | None = None
        network: NetworkStats | None = None
        process: ProcessStats | None = None
        if linux is not None:
            if linux.cpu is not None:
                cpu = CPUStats(
                    linux.cpu.timestamp or now,
                    _value(linux.cpu.usage_nano_cores),
                    _value(linux.cpu.usage_core_nano_seconds),
                )
            memory = _memory(linux.memory, now)
            network = _network(linux.network, now)
            if linux.process is not None:
                process = ProcessStats(_value(linux.process.process_count))
        containers.sort(key=lambda c: c.name)
        return PodStats(
            pod_ref=_pod_ref(sandbox.labels, sandbox.metadata),
            start_time_ns=sandbox.created_at or None,
            containers=tuple(containers),
            cpu=cpu if cpu is not None and cpu.usage_core_nano_seconds is not None else _sum_cpu(containers),
            memory=(
                memory
                if memory is not None and memory.working_set_bytes is not None
                else _sum_memory(containers)
            ),
            network=network,
            process_stats=process,
        )

    async def _with_disk(self, pod: PodStats, now: int) -> PodStats:
        names = [c.name for c in pod.containers]
        disk: _PodDisk = await self.run_sync(
            _measure_pod_disk, self.root_dir, self.pod_logs_dir, pod.pod_ref, names
        )
        containers = tuple(
            attrs.evolve(c, logs=_fs(disk.logs.get(c.name), now)) if disk.logs.get(c.name) else c
            for c in pod.containers
        )
        volumes = tuple(
            VolumeStats(name, FsStats(time_ns=now, used_bytes=u.used_bytes, inodes_used=u.inodes_used))
            for name, u in sorted(disk.volumes.items())
        )
        parts: list[FsStats | None] = [c.rootfs for c in containers] + [c.logs for c in containers]
        parts += [v.fs for v in volumes]
        parts += [_fs(disk.pod_logs, now), _fs(disk.etc_hosts, now)]
        present = [p for p in parts if p is not None]
        ephemeral = FsStats(
            time_ns=now,
            used_bytes=sum(p.used_bytes or 0 for p in present),
            inodes_used=sum(p.inodes_used or 0 for p in present),
        )
        if self.claim_usage is not None:  # persistent volumes: not ephemeral storage
            volumes += tuple(
                VolumeStats(
                    c.volume_name,
                    FsStats(
                        time_ns=now,
                        available_bytes=c.usage.available_bytes,
                        capacity_bytes=c.usage.capacity_bytes,
                        used_bytes=c.usage.used_bytes,
                        inodes_free=c.usage.inodes_free,
                        inodes=c.usage.inodes,
                        inodes_used=c.usage.inodes_used,
                    ),
                    pvc_ref=(c.claim_namespace, c.claim_name),
                )
                for c in await self.claim_usage(pod.pod_ref.uid)
            )
        return attrs.evolve(pod, containers=containers, volume_stats=volumes, ephemeral_storage=ephemeral)


def _fs(usage: DiskUsage | None, now: int) -> FsStats | None:
    if usage is None:
        return None
    return FsStats(time_ns=now, used_bytes=usage.used_bytes, inodes_used=usage.inodes_used)


def _cpu_sample(
    samples: dict[str, tuple[int, int]], key: str, stamp: int, total: int, nano_cores: int | None = None
) -> CPUStats:
    """CPU at ``stamp`` with ``total`` core-nanoseconds; without a rate of the runtime's own, the rate since
    ``key``'s previous sample in ``samples`` (none for the first, or for a sample no newer), which this
    one replaces."""
    previous = samples.get(key)
    if nano_cores is None and previous is not None and stamp > previous[0]:
        nano_cores = _rate(total - previous[1], stamp - previous[0])
    samples[key] = (stamp, total)
    return CPUStats(stamp, nano_cores, total)


def _rate(delta: int, elapsed_ns: int) -> int:
    """Nanocores: CPU nanoseconds per wall second."""
    return max(delta, 0) * 10**9 // elapsed_ns


def _statvfs(path: str) -> tuple[int, int, int, int] | None:
    """(available, capacity, inodes free, inodes) of the filesystem holding ``path``, if it is here."""
    try:
        vfs = os.statvfs(path)
    except OSError:
        return None
    return (vfs.f_bavail * vfs.f_frsize, vfs.f_blocks * vfs.f_frsize, vfs.f_ffree, vfs.f_files)
