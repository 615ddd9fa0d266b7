"""What CRI stats leave out, read from a process's cgroups and network namespace (Go: cAdvisor's
``container/libcontainer`` handler).

``/metrics/cadvisor`` needs values CRI ``ContainerStats`` does not carry: RSS, page cache, swap, CFS
throttling, block I/O per device, limits, and network counters. They are read here for one process of
the container (its pid from the runtime's verbose status): the cgroups in ``/proc/<pid>/cgroup`` and the
interfaces in ``/proc/<pid>/net/dev``. cgroup v1 (one hierarchy per controller under
``/sys/fs/cgroup/<controller>``) and v2 (the unified hierarchy) are both read. Every reading is
optional: a file that is missing or unreadable leaves its value None. All of it is blocking: callers go
through their ``run_sync``.
"""

from __future__ import annotations

import os

import attrs

from kubelet_trio.cm.cgroup_manager import CGROUP_ROOT

__all__ = [
    "CGROUP_ROOT",
    "BlockIo",
    "CgroupUsage",
    "InterfaceCounters",
    "block_device_name",
    "process_cgroups",
    "read_cgroup_usage",
    "read_net_dev",
    "read_process_usage",
]

PROC = "/proc"
_USER_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_NO_LIMIT = 1 << 62  # v1 reports "no limit" as a page-rounded 2^63-1


@attrs.frozen
class BlockIo:
    """One block device's cumulative I/O by the cgroup."""

    device: str  # "/dev/vda", as cAdvisor names it; "maj:min" when the name is unknown
    read_bytes: int = 0
    write_bytes: int = 0
    reads: int = 0
    writes: int = 0


@attrs.frozen
class InterfaceCounters:
    """One interface of ``/proc/<pid>/net/dev`` (or CRI's, which has no packet counts: None)."""

    name: str
    rx_bytes: int | None = None
    rx_packets: int | None = None
    rx_errors: int | None = None
    rx_dropped: int | None = None
    tx_bytes: int | None = None
    tx_packets: int | None = None
    tx_errors: int | None = None
    tx_dropped: int | None = None


@attrs.frozen
class CgroupUsage:
    """A cgroup's counters; None where the hierarchy does not say."""

    path: str  # the cgroup's name, as cAdvisor's ``id`` label ("/k8s.io/<id>")
    cpu_usage_ns: int | None = None
    cpu_user_ns: int | None = None
    cpu_system_ns: int | None = None
    cfs_periods: int | None = None
    cfs_throttled_periods: int | None = None
    cfs_throttled_ns: int | None = None
    cpu_quota_us: int | None = None  # None: unlimited
    cpu_period_us: int | None = None
    cpu_shares: int | None = None
    memory_usage: int | None = None
    memory_max_usage: int | None = None
    memory_working_set: int | None = None
    memory_rss: int | None = None
    memory_cache: int | None = None
    memory_swap: int | None = None
    memory_mapped_file: int | None = None
    memory_failcnt: int | None = None
    memory_limit: int | None = None  # None: unlimited
    block_io: tuple[BlockIo, ...] = ()

    @property
    def memory_available(self) -> int | None:
        """cAdvisor's available bytes: the limit less the working set (never below 0); None without a
        limit."""
        if self.memory_limit is None or self.memory_working_set is None:
            return None
        return max(self.memory_limit - self.memory_working_set, 0)


def process_cgroups(pid: int, *, proc: str = PROC) -> dict[str, str]:
    """Controller → cgroup path of ``pid`` (``""`` is the v2 unified hierarchy); {} when it is gone."""
    try:
        with open(os.path.join(proc, str(pid), "cgroup")) as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    paths: dict[str, str] = {}
    for line in lines:
        _, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller.removeprefix("name=")] = path
    return paths


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except (OSError, ValueError):
        return None


def _int(path: str) -> int | None:
    text = _read(path)
    if text is None:
        return None
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return None


def _keyed(path: str) -> dict[str, int]:
    text = _read(path) or ""
    out: dict[str, int] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1].lstrip("-").isdigit():
            out[fields[0]] = int(fields[1])
    return out


def block_device_name(major_minor: str, *, sys: str = "/sys") -> str:
    """``/dev/<name>`` of a block device number ("253:0"), as cAdvisor labels it."""
    text = _read(os.path.join(sys, "dev", "block", major_minor, "uevent")) or ""
    for line in text.splitlines():
        if line.startswith("DEVNAME="):
            return "/dev/" + line.removeprefix("DEVNAME=")
    return major_minor


def _v1_block_io(blkio: str, sys: str) -> tuple[BlockIo, ...]:
    per: dict[str, dict[str, int]] = {}
    for name, unit in (("blkio.throttle.io_service_bytes", "bytes"), ("blkio.throttle.io_serviced", "ops")):
        for line in (_read(os.path.join(blkio, name)) or "").splitlines():
            fields = line.split()
            if len(fields) == 3 and fields[1] in ("Read", "Write") and fields[2].isdigit():
                per.setdefault(fields[0], {})[f"{fields[1]}_{unit}"] = int(fields[2])
    return tuple(
        BlockIo(
            block_device_name(dev, sys=sys),
            read_bytes=v.get("Read_bytes", 0),
            write_bytes=v.get("Write_bytes", 0),
            reads=v.get("Read_ops", 0),
            writes=v.get("Write_ops", 0),
        )
        for dev, v in sorted(per.items())
    )


def _v2_block_io(directory: str, sys: str) -> tuple[BlockIo, ...]:
    out = []
    for line in (_read(os.path.join(directory, "io.stat")) or "").splitlines():
        dev, *pairs = line.split()
        values = dict(p.split("=", 1) for p in pairs if "=" in p)

        def number(key: str, values: dict[str, str] = values) -> int:
            return int(values.get(key, "0")) if values.get(key, "0").isdigit() else 0

        out.append(
            BlockIo(
                block_device_name(dev, sys=sys),
                read_bytes=number("rbytes"),
                write_bytes=number("wbytes"),
                reads=number("rios"),
                writes=number("wios"),
            )
        )
    return tuple(sorted(out, key=lambda b: b.device))


def _limit(value: int | None) -> int | None:
    return None if value is None or value < 0 or value >= _NO_LIMIT else value


def _read_v1(paths: dict[str, str], root: str, sys: str) -> CgroupUsage:
    def at(controller: str, name: str) -> str:
        return os.path.join(root, controller, paths.get(controller, "/").lstrip("/"), name)

    acct = _keyed(at("cpuacct", "cpuacct.stat"))
    cpu_stat = _keyed(at("cpu", "cpu.stat"))
    memory = _keyed(at("memory", "memory.stat"))
    usage = _int(at("memory", "memory.usage_in_bytes"))
    inactive = memory.get("total_inactive_file", memory.get("inactive_file", 0))
    quota = _int(at("cpu", "cpu.cfs_quota_us"))
    return CgroupUsage(
        path=paths.get("memory", paths.get("cpu", "/")),
        cpu_usage_ns=_int(at("cpuacct", "cpuacct.usage")),
        cpu_user_ns=acct["user"] * 10**9 // _USER_HZ if "user" in acct else None,
        cpu_system_ns=acct["system"] * 10**9 // _USER_HZ if "system" in acct else None,
        cfs_periods=cpu_stat.get("nr_periods"),
        cfs_throttled_periods=cpu_stat.get("nr_throttled"),
        cfs_throttled_ns=cpu_stat.get("throttled_time"),
        cpu_quota_us=quota if quota is not None and quota > 0 else None,
        cpu_period_us=_int(at("cpu", "cpu.cfs_period_us")),
        cpu_shares=_int(at("cpu", "cpu.shares")),
        memory_usage=usage,
        memory_max_usage=_int(at("memory", "memory.max_usage_in_bytes")),
        memory_working_set=max(usage - inactive, 0) if usage is not None else None,
        memory_rss=memory.get("total_rss", memory.get("rss")),
        memory_cache=memory.get("total_cache", memory.get("cache")),
        memory_swap=memory.get("total_swap", memory.get("swap", 0)),
        memory_mapped_file=memory.get("total_mapped_file", memory.get("mapped_file")),
        memory_failcnt=_int(at("memory", "memory.failcnt")),
        memory_limit=_limit(_int(at("memory", "memory.limit_in_bytes"))),
        block_io=_v1_block_io(at("blkio", ""), sys),
    )


def _read_v2(path: str, root: str, sys: str) -> CgroupUsage:
    directory = os.path.join(root, path.lstrip("/"))
    cpu = _keyed(os.path.join(directory, "cpu.stat"))
    memory = _keyed(os.path.join(directory, "memory.stat"))
    usage = _int(os.path.join(directory, "memory.current"))
    quota_us: int | None = None
    period_us: int | None = None
    cpu_max = (_read(os.path.join(directory, "cpu.max")) or "").split()
    if len(cpu_max) == 2:
        quota_us = int(cpu_max[0]) if cpu_max[0].isdigit() else None
        period_us = int(cpu_max[1]) if cpu_max[1].isdigit() else None
    weight = _int(os.path.join(directory, "cpu.weight"))
    events = _keyed(os.path.join(directory, "memory.events"))
    max_text = (_read(os.path.join(directory, "memory.max")) or "").strip()

    def usec(key: str) -> int | None:
        return cpu[key] * 1000 if key in cpu else None

    return CgroupUsage(
        path=path,
        cpu_usage_ns=usec("usage_usec"),
        cpu_user_ns=usec("user_usec"),
        cpu_system_ns=usec("system_usec"),
        cfs_periods=cpu.get("nr_periods"),
        cfs_throttled_periods=cpu.get("nr_throttled"),
        cfs_throttled_ns=usec("throttled_usec"),
        cpu_quota_us=quota_us,
        cpu_period_us=period_us,
        # cAdvisor converts the v2 weight back to v1 shares
        cpu_shares=2 + (weight - 1) * 262142 // 9999 if weight is not None else None,
        memory_usage=usage,
        memory_max_usage=_int(os.path.join(directory, "memory.peak")),
        memory_working_set=max(usage - memory.get("inactive_file", 0), 0) if usage is not None else None,
        memory_rss=memory.get("anon"),
        memory_cache=memory.get("file"),
        memory_swap=_int(os.path.join(directory, "memory.swap.current")) or 0,
        memory_mapped_file=memory.get("file_mapped"),
        memory_failcnt=events.get("max"),
        memory_limit=_limit(int(max_text)) if max_text.isdigit() else None,
        block_io=_v2_block_io(directory, sys),
    )


def read_cgroup_usage(
    paths: dict[str, str], *, root: str = CGROUP_ROOT, sys: str = "/sys"
) -> CgroupUsage | None:
    """Counters of the cgroups ``paths`` (:func:`process_cgroups`); None when there are none."""
    if not paths:
        return None
    if os.path.exists(os.path.join(root, "cgroup.controllers")) and "" in paths:
        return _read_v2(paths[""], root, sys)
    return _read_v1(paths, root, sys)


def read_net_dev(pid: int, *, proc: str = PROC) -> tuple[InterfaceCounters, ...]:
    """The interfaces of ``pid``'s network namespace, loopback left out (as cAdvisor does)."""
    text = _read(os.path.join(proc, str(pid), "net", "dev")) or ""
    out = []
    for line in text.splitlines()[2:]:
        name, _, rest = line.partition(":")
        name = name.strip()
        fields = rest.split()
        if name == "lo" or len(fields) < 12 or not all(f.isdigit() for f in fields[:12]):
            continue
        n = [int(f) for f in fields[:12]]
        out.append(InterfaceCounters(name, n[0], n[1], n[2], n[3], n[8], n[9], n[10], n[11]))
    return tuple(sorted(out, key=lambda i: i.name))


def read_process_usage(
    pid: int, *, proc: str = PROC, root: str = CGROUP_ROOT
) -> tuple[CgroupUsage | None, tuple[InterfaceCounters, ...]]:
    """The cgroup counters and network interfaces of the container whose process is ``pid``."""
    if pid <= 0:
        return None, ()
    return read_cgroup_usage(process_cgroups(pid, proc=proc), root=root), read_net_dev(pid, proc=proc)
