"""Where the eviction signals come from (Go: the summary provider behind ``makeSignalObservations``).

A :class:`SignalSource` measures the node: ``memory.available``, ``nodefs.*``, ``imagefs.*`` and
``pid.available``, each as available and capacity. :class:`HostSignals` reads this machine:

- memory: capacity is ``MemTotal``; available = capacity - working set, the working set being the root
  memory cgroup's usage less its inactive file pages (cadvisor's figure, which the Go kubelet uses).
  cgroup v1: ``memory.usage_in_bytes`` and ``total_inactive_file``; cgroup v2 has no usage file at the
  root, so usage is ``MemTotal - MemFree`` and inactive file pages come from the root ``memory.stat``
  (runc's fallback for the v2 root).
- nodefs: ``statvfs`` of the kubelet's root directory (which holds pods' volumes; pod logs are expected
  on the same filesystem, as in Go's cadvisor ``rootfs``).
- imagefs: ``statvfs`` of the runtime's image filesystem (CRI ``ImageFsInfo`` mountpoint); it is
  *dedicated* when it is another device than nodefs, which changes how pods are ranked and what is
  reclaimed first.
- pid: ``min(pid_max, threads-max)`` less the number of tasks (``/proc/loadavg``).
- allocatable memory (with pod cgroups): ``kubepods``' memory limit less its working set: the pods
  together nearing what the node allocates them, even while the machine has memory left.

:class:`SimulatedSignals` is set from Python (tests, the simulated runtime): deterministic pressure.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Protocol

import attrs
import trio

from kubelet_trio.cm.cgroup_manager import CGROUP_ROOT
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.eviction.api import (
    ALLOCATABLE_MEMORY_AVAILABLE,
    IMAGEFS_AVAILABLE,
    IMAGEFS_INODES_FREE,
    MEMORY_AVAILABLE,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
    PID_AVAILABLE,
)
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.logs import kv
from kubelet_trio.stats.cgroups import CgroupUsage, read_cgroup_usage

__all__ = [
    "HostSignals",
    "Observation",
    "Observations",
    "SignalSource",
    "SimulatedSignals",
    "allocatable_memory_observation",
    "memory_observation",
    "pid_observation",
    "statvfs_observations",
]

logger = logging.getLogger(__name__)

RUNTIME_CALL_TIMEOUT = 10.0


@attrs.frozen
class Observation:
    """One signal: what is available of what capacity, measured at ``time`` (Trio time)."""

    available: int
    capacity: int
    time: float


@attrs.frozen
class Observations:
    """A measurement of the node: signal -> observation (a signal it could not measure is absent)."""

    signals: Mapping[str, Observation]
    dedicated_image_fs: bool = False


class SignalSource(Protocol):
    """Measures the node's eviction signals."""

    async def observe(self) -> Observations: ...


# -- the host ---------------------------------------------------------------------------------------------


def _read_keyed(path: str, *, scale: int = 1) -> dict[str, int]:
    """``key value`` lines (``/proc/meminfo``: ``MemTotal:  123 kB``; ``memory.stat``) -> ints."""
    out: dict[str, int] = {}
    with open(path, encoding="ascii") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2:
                try:
                    out[parts[0].rstrip(":")] = int(parts[1]) * scale
                except ValueError:
                    continue
    return out


def _read_int(path: str) -> int:
    with open(path, encoding="ascii") as f:
        return int(f.read().strip())


def memory_observation(now: float, *, proc: str = "/proc", cgroup_root: str = CGROUP_ROOT) -> Observation:
    """``memory.available`` of this machine (blocking; raises OSError when nothing can be read)."""
    meminfo = _read_keyed(os.path.join(proc, "meminfo"), scale=1024)
    capacity = meminfo["MemTotal"]
    v1 = os.path.join(cgroup_root, "memory")
    if os.path.exists(os.path.join(v1, "memory.usage_in_bytes")):
        usage = _read_int(os.path.join(v1, "memory.usage_in_bytes"))
        inactive = _read_keyed(os.path.join(v1, "memory.stat")).get("total_inactive_file", 0)
    else:
        usage = capacity - meminfo.get("MemFree", 0)
        stat_path = os.path.join(cgroup_root, "memory.stat")
        stat = _read_keyed(stat_path) if os.path.exists(stat_path) else {}
        inactive = stat.get("inactive_file", meminfo.get("Inactive(file)", 0))
    working_set = max(usage - inactive, 0)
    return Observation(available=max(capacity - working_set, 0), capacity=capacity, time=now)


def pid_observation(now: float, *, proc: str = "/proc") -> Observation:
    """``pid.available``: the task limit less the tasks that exist (blocking)."""
    limit = _read_int(os.path.join(proc, "sys/kernel/pid_max"))
    threads_max = os.path.join(proc, "sys/kernel/threads-max")
    if os.path.exists(threads_max):
        limit = min(limit, _read_int(threads_max))
    with open(os.path.join(proc, "loadavg"), encoding="ascii") as f:
        tasks = int(f.read().split()[3].split("/")[1])
    return Observation(available=limit - tasks, capacity=limit, time=now)


def statvfs_observations(path: str, now: float) -> tuple[Observation, Observation]:
    """(bytes, inodes) available and capacity of the filesystem holding ``path`` (blocking)."""
    st = os.statvfs(path)
    return (
        Observation(available=st.f_bavail * st.f_frsize, capacity=st.f_blocks * st.f_frsize, time=now),
        Observation(available=st.f_ffree, capacity=st.f_files, time=now),
    )


def allocatable_memory_observation(usage: CgroupUsage | None, now: float) -> Observation | None:
    """``allocatableMemory.available`` from ``kubepods``' counters: its limit less the pods' working set
    (none without a limit, as cAdvisor reports no available bytes then)."""
    available = usage.memory_available if usage is not None else None
    if usage is None or available is None or usage.memory_working_set is None:
        return None
    return Observation(available=available, capacity=available + usage.memory_working_set, time=now)


def _host_observations(
    root_dir: str,
    image_fs: str | None,
    now: float,
    pods_cgroup: Callable[[], dict[str, str]] | None = None,
    cgroup_root: str = CGROUP_ROOT,
) -> Observations:
    signals: dict[str, Observation] = {}
    for signal, read in ((MEMORY_AVAILABLE, memory_observation), (PID_AVAILABLE, pid_observation)):
        try:
            signals[signal] = read(now)
        except (OSError, KeyError, ValueError, IndexError) as err:
            logger.warning("eviction signal cannot be measured", extra=kv(signal=signal, error=err))
    if pods_cgroup is not None:
        try:
            usage = read_cgroup_usage(pods_cgroup(), root=cgroup_root)
            allocatable = allocatable_memory_observation(usage, now)
        except OSError as err:
            allocatable = None
            logger.warning(
                "eviction signal cannot be measured", extra=kv(signal=ALLOCATABLE_MEMORY_AVAILABLE, error=err)
            )
        if allocatable is not None:
            signals[ALLOCATABLE_MEMORY_AVAILABLE] = allocatable
    try:
        signals[NODEFS_AVAILABLE], signals[NODEFS_INODES_FREE] = statvfs_observations(root_dir, now)
    except OSError as err:
        logger.warning("eviction signal cannot be measured", extra=kv(signal=NODEFS_AVAILABLE, error=err))
        return Observations(signals)
    dedicated = False
    image_path = image_fs if image_fs and os.path.exists(image_fs) else root_dir
    try:
        signals[IMAGEFS_AVAILABLE], signals[IMAGEFS_INODES_FREE] = statvfs_observations(image_path, now)
        dedicated = os.stat(image_path).st_dev != os.stat(root_dir).st_dev
    except OSError as err:
        logger.warning("eviction signal cannot be measured", extra=kv(signal=IMAGEFS_AVAILABLE, error=err))
    return Observations(signals, dedicated_image_fs=dedicated)


@attrs.define(eq=False)
class HostSignals:
    """This machine's signals; ``runtime`` (optional) names the image filesystem; ``pods_cgroup``
    (blocking, optional) says where ``kubepods`` is, for ``allocatableMemory.available``."""

    root_dir: str
    runtime: Runtime | None = None
    run_sync: RunSync = run_in_thread
    pods_cgroup: Callable[[], dict[str, str]] | None = None
    cgroup_root: str = CGROUP_ROOT

    async def _image_fs_mountpoint(self) -> str | None:
        if self.runtime is None:
            return None
        try:
            with trio.fail_after(RUNTIME_CALL_TIMEOUT):
                info = await self.runtime.image_fs_info()
        except Exception as err:
            logger.debug("no image filesystem info from the runtime", extra=kv(error=err))
            return None
        for usage in info.image_filesystems:
            if usage.fs_id is not None and usage.fs_id.mountpoint:
                return str(usage.fs_id.mountpoint)
        return None

    async def observe(self) -> Observations:
        image_fs = await self._image_fs_mountpoint()
        result: Observations = await self.run_sync(
            _host_observations,
            self.root_dir,
            image_fs,
            trio.current_time(),
            self.pods_cgroup,
            self.cgroup_root,
        )
        return result


# -- simulated ----------------------------------------------------------------------------------------

GIB = 1 << 30
#: A comfortable simulated node: 8Gi memory, 100Gi disks with a million inodes each, 32768 pids.
_SIM_DEFAULTS = {
    MEMORY_AVAILABLE: (8 * GIB, 8 * GIB),
    NODEFS_AVAILABLE: (100 * GIB, 100 * GIB),
    NODEFS_INODES_FREE: (1_000_000, 1_000_000),
    IMAGEFS_AVAILABLE: (100 * GIB, 100 * GIB),
    IMAGEFS_INODES_FREE: (1_000_000, 1_000_000),
    PID_AVAILABLE: (32768, 32768),
}


@attrs.define(eq=False)
class SimulatedSignals:
    """Signals set from Python: ``set(signal, available, capacity)``; starts with no pressure.

    ``reclaimable`` is what a node-level reclaim (container and image GC) may give back per signal: a
    test can make reclaim enough (no pod evicted) or not.
    """

    dedicated_image_fs: bool = False
    _values: dict[str, tuple[int, int]] = attrs.Factory(lambda: dict(_SIM_DEFAULTS))
    observations: int = 0  # how often observed

    def set(self, signal: str, available: int, capacity: int | None = None) -> None:
        """Set ``signal`` (capacity unchanged when not given)."""
        self._values[signal] = (
            available,
            self._values.get(signal, (0, available))[1] if capacity is None else capacity,
        )

    def get(self, signal: str) -> tuple[int, int]:
        """(available, capacity) of ``signal``."""
        return self._values[signal]

    def unset(self, signal: str) -> None:
        """Make ``signal`` unmeasurable."""
        self._values.pop(signal, None)

    async def observe(self) -> Observations:
        await trio.lowlevel.checkpoint()
        self.observations += 1
        now = trio.current_time()
        return Observations(
            {
                signal: Observation(available, capacity, now)
                for signal, (available, capacity) in self._values.items()
            },
            dedicated_image_fs=self.dedicated_image_fs,
        )
