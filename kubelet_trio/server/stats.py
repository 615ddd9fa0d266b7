"""``/stats/summary`` (Go: ``pkg/kubelet/server/stats``, the ``statsapi.Summary`` shape).

Node CPU and memory come from the host (``/proc/stat``, ``/proc/meminfo``), the node filesystem from
``statvfs`` of the kubelet's root directory, the image filesystem from CRI ImageFsInfo, and pods and
containers from CRI ListContainerStats (grouped by the pod labels the kubelet put on its containers).
``usageNanoCores`` needs two samples: it appears from the second request on.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

import attrs
import trio

from kubelet_trio.clock import rfc3339
from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.httpserver.asgi import Handler, Request, Response
from kubelet_trio.kuberuntime.labels import (
    CONTAINER_NAME_LABEL,
    POD_NAME_LABEL,
    POD_NAMESPACE_LABEL,
    POD_UID_LABEL,
    node_selector,
)
from kubelet_trio.logs import kv

if TYPE_CHECKING:
    from kubelet_trio.kubelet import Kubelet

__all__ = ["HostSample", "StatsProvider", "read_host_sample", "stats_summary_handler"]

logger = logging.getLogger(__name__)

_BUSY_CPU_FIELDS = (0, 1, 2, 5, 6, 7)  # user nice system irq softirq steal (not idle, iowait, guests)


@attrs.frozen
class HostSample:
    cpu_ns: int | None
    memory: dict[str, int]
    fs: dict[str, int]


def _existing_dir(path: str) -> str:
    while path and not os.path.isdir(path):
        path = os.path.dirname(path.rstrip("/")) or "/"
    return path or "/"


def read_host_sample(root_dir: str) -> HostSample:
    """One reading of the host's counters (blocking: run through ``run_sync``)."""
    cpu_ns: int | None = None
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()[1:]
        ticks = sum(int(fields[i]) for i in _BUSY_CPU_FIELDS if i < len(fields))
        cpu_ns = ticks * 10**9 // os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        logger.debug("no /proc/stat; node CPU stats unavailable")
    memory: dict[str, int] = {}
    try:
        with open("/proc/meminfo") as f:
            info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f if line.strip()}
        total, available = info["MemTotal"], info.get("MemAvailable", info.get("MemFree", 0))
        memory = {
            "availableBytes": available,
            "usageBytes": total - info.get("MemFree", 0),
            "workingSetBytes": total - available,
        }
    except (OSError, ValueError, KeyError, IndexError):
        logger.debug("no /proc/meminfo; node memory stats unavailable")
    vfs = os.statvfs(_existing_dir(root_dir))
    fs = {
        "availableBytes": vfs.f_bavail * vfs.f_frsize,
        "capacityBytes": vfs.f_blocks * vfs.f_frsize,
        "usedBytes": (vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize,
        "inodesFree": vfs.f_ffree,
        "inodes": vfs.f_files,
        "inodesUsed": vfs.f_files - vfs.f_ffree,
    }
    return HostSample(cpu_ns, memory, fs)


def _value(v: pb.UInt64Value | None) -> int | None:
    return v.value if v is not None else None


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _container_stats(stats: pb.ContainerStats, now: str) -> dict[str, Any]:
    attributes = stats.attributes or pb.ContainerAttributes()
    name = attributes.labels.get(CONTAINER_NAME_LABEL) or (
        attributes.metadata.name if attributes.metadata else ""
    )
    entry: dict[str, Any] = {"name": name}
    if stats.cpu is not None:
        entry["cpu"] = _drop_none(
            {
                "time": now,
                "usageNanoCores": _value(stats.cpu.usage_nano_cores),
                "usageCoreNanoSeconds": _value(stats.cpu.usage_core_nano_seconds),
            }
        )
    if stats.memory is not None:
        entry["memory"] = _drop_none(
            {
                "time": now,
                "availableBytes": _value(stats.memory.available_bytes),
                "usageBytes": _value(stats.memory.usage_bytes),
                "workingSetBytes": _value(stats.memory.working_set_bytes),
                "rssBytes": _value(stats.memory.rss_bytes),
                "pageFaults": _value(stats.memory.page_faults),
                "majorPageFaults": _value(stats.memory.major_page_faults),
            }
        )
    if stats.writable_layer is not None:
        entry["rootfs"] = _drop_none(
            {
                "time": now,
                "usedBytes": _value(stats.writable_layer.used_bytes),
                "inodesUsed": _value(stats.writable_layer.inodes_used),
            }
        )
    return entry


def _sum(containers: list[dict[str, Any]], section: str, keys: tuple[str, ...], now: str) -> dict[str, Any]:
    total: dict[str, Any] = {"time": now}
    for key in keys:
        values = [c[section][key] for c in containers if key in c.get(section, {})]
        if values:
            total[key] = sum(values)
    return total


@attrs.define(eq=False)
class StatsProvider:
    """Builds summaries; keeps the previous CPU sample to compute the node's ``usageNanoCores``."""

    kubelet: Kubelet
    _last_cpu: tuple[float, int] | None = None  # (trio time, cpu ns)

    async def summary(self) -> dict[str, Any]:
        kubelet = self.kubelet
        now = rfc3339(kubelet.clock.wall_ns())
        sample: HostSample = await kubelet.run_sync(read_host_sample, kubelet.config.root_dir)
        cpu: dict[str, Any] = {"time": now}
        if sample.cpu_ns is not None:
            cpu["usageCoreNanoSeconds"] = sample.cpu_ns
            t = trio.current_time()
            if self._last_cpu is not None and t > self._last_cpu[0]:
                cpu["usageNanoCores"] = round((sample.cpu_ns - self._last_cpu[1]) / (t - self._last_cpu[0]))
            self._last_cpu = (t, sample.cpu_ns)
        node: dict[str, Any] = {
            "nodeName": kubelet.config.node_name,
            "cpu": cpu,
            "memory": {"time": now, **sample.memory},
            "fs": {"time": now, **sample.fs},
        }
        image_fs = await self._image_fs(now)
        if image_fs:
            node["runtime"] = {"imageFs": image_fs}
        return {"node": node, "pods": await self._pods(now)}

    async def _image_fs(self, now: str) -> dict[str, Any] | None:
        try:
            info = await self.kubelet.runtime.image_fs_info()
        except cri_errors.CriError as err:
            logger.debug("image filesystem stats unavailable", extra=kv(err=err))
            return None
        if not info.image_filesystems:
            return None
        usage = info.image_filesystems[0]
        return _drop_none(
            {"time": now, "usedBytes": _value(usage.used_bytes), "inodesUsed": _value(usage.inodes_used)}
        )

    async def _pods(self, now: str) -> list[dict[str, Any]]:
        kubelet = self.kubelet
        selector = node_selector(kubelet.config.node_name)
        all_stats = await kubelet.runtime.list_container_stats(
            pb.ContainerStatsFilter(label_selector=selector)
        )
        pods: dict[str, dict[str, Any]] = {}
        for stats in all_stats:
            labels = stats.attributes.labels if stats.attributes else {}
            uid = labels.get(POD_UID_LABEL)
            if not uid:
                continue
            pod = pods.setdefault(
                uid,
                {
                    "podRef": {
                        "name": labels.get(POD_NAME_LABEL, ""),
                        "namespace": labels.get(POD_NAMESPACE_LABEL, ""),
                        "uid": uid,
                    },
                    "containers": [],
                },
            )
            pod["containers"].append(_container_stats(stats, now))
        for uid, pod in pods.items():
            status = kubelet.status_manager.get(uid)
            if status is not None and status.start_time:
                pod["startTime"] = status.start_time
            pod["cpu"] = _sum(pod["containers"], "cpu", ("usageNanoCores", "usageCoreNanoSeconds"), now)
            pod["memory"] = _sum(
                pod["containers"], "memory", ("usageBytes", "workingSetBytes", "rssBytes"), now
            )
        return list(pods.values())


def stats_summary_handler(kubelet: Kubelet) -> Handler:
    provider = StatsProvider(kubelet)

    async def handle(request: Request) -> Response:
        return Response.json(await provider.summary())

    return handle
