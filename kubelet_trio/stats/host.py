"""The node's own counters (Go: cAdvisor's machine and root-container stats, ``rlimit`` from ``/proc``).

Node CPU is the busy time in ``/proc/stat``; node memory comes from ``/proc/meminfo`` (working set =
total - available, the figure ``memory.available`` eviction compares against); nodefs is ``statvfs`` of
the kubelet's root directory; rlimit is ``kernel.pid_max`` and the number of processes. These are
blocking reads: callers run :func:`read_host_sample` through their ``run_sync``. A simulated node passes
its own :data:`HostSampler` instead, so its numbers are exact.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

import attrs

__all__ = ["HostSample", "HostSampler", "existing_dir", "fixed_host_sample", "read_host_sample"]

logger = logging.getLogger(__name__)

_BUSY_CPU_FIELDS = (0, 1, 2, 5, 6, 7)  # user nice system irq softirq steal (not idle, iowait, guests)


@attrs.frozen
class HostSample:
    """One reading; None where the host does not say."""

    cpu_core_nano_seconds: int | None = None
    memory_total_bytes: int | None = None
    memory_available_bytes: int | None = None
    memory_free_bytes: int | None = None
    fs_capacity_bytes: int | None = None
    fs_available_bytes: int | None = None
    fs_free_bytes: int | None = None
    fs_inodes: int | None = None
    fs_inodes_free: int | None = None
    max_pid: int | None = None
    processes: int | None = None
    boot_time_s: int | None = None


#: ``(root_dir) -> HostSample``, blocking.
HostSampler = Callable[[str], HostSample]


def existing_dir(path: str) -> str:
    """``path`` or its nearest existing ancestor (the root directory may not exist yet)."""
    while path and not os.path.isdir(path):
        path = os.path.dirname(path.rstrip("/")) or "/"
    return path or "/"


def _cpu() -> tuple[int | None, int | None]:
    busy: int | None = None
    boot: int | None = None
    try:
        with open("/proc/stat") as f:
            for line in f:
                fields = line.split()
                if fields and fields[0] == "cpu":
                    ticks = sum(int(fields[1 + i]) for i in _BUSY_CPU_FIELDS if 1 + i < len(fields))
                    busy = ticks * 10**9 // os.sysconf("SC_CLK_TCK")
                elif fields and fields[0] == "btime":
                    boot = int(fields[1])
    except (OSError, ValueError, IndexError):
        logger.debug("no /proc/stat; node CPU stats unavailable")
    return busy, boot


def _meminfo() -> dict[str, int]:
    try:
        with open("/proc/meminfo") as f:
            return {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f if line.strip()}
    except (OSError, ValueError, IndexError):
        logger.debug("no /proc/meminfo; node memory stats unavailable")
        return {}


def _pids() -> tuple[int | None, int | None]:
    max_pid: int | None = None
    try:
        with open("/proc/sys/kernel/pid_max") as f:
            max_pid = int(f.read().strip())
    except (OSError, ValueError):
        logger.debug("no /proc/sys/kernel/pid_max")
    try:
        processes: int | None = sum(1 for name in os.listdir("/proc") if name.isdigit())
    except OSError:
        processes = None
    return max_pid, processes


def read_host_sample(root_dir: str) -> HostSample:
    """Read the host's counters (blocking)."""
    cpu_ns, boot = _cpu()
    info = _meminfo()
    vfs = os.statvfs(existing_dir(root_dir))
    max_pid, processes = _pids()
    return HostSample(
        cpu_core_nano_seconds=cpu_ns,
        memory_total_bytes=info.get("MemTotal"),
        memory_available_bytes=info.get("MemAvailable", info.get("MemFree")),
        memory_free_bytes=info.get("MemFree"),
        fs_capacity_bytes=vfs.f_blocks * vfs.f_frsize,
        fs_available_bytes=vfs.f_bavail * vfs.f_frsize,
        fs_free_bytes=vfs.f_bfree * vfs.f_frsize,
        fs_inodes=vfs.f_files,
        fs_inodes_free=vfs.f_ffree,
        max_pid=max_pid,
        processes=processes,
        boot_time_s=boot,
    )


def fixed_host_sample(sample: HostSample) -> HostSampler:
    """A sampler that always answers ``sample`` (simulated nodes, tests)."""

    def read(root_dir: str) -> HostSample:
        return sample

    return read
