"""The summary's ``pods`` system container: ``kubepods``' CPU and memory read from its cgroup (a stand-in
v1 tree here), available bytes being its limit less the working set, the CPU rate from one summary to
the next on the virtual clock."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from kubelet_trio.fsio import run_inline
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.stats import HostSample, fixed_host_sample, summary_json
from kubelet_trio.stats.provider import CriStatsProvider
from kubelet_trio.stats.types import CPUStats, MemoryStats, Summary

MI = 1 << 20
KUBEPODS = {"cpu": "/kubepods", "cpuacct": "/kubepods", "memory": "/kubepods"}


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def provider(tmp_path: Path, where: dict[str, str]) -> CriStatsProvider:
    return CriStatsProvider(
        SimRuntime(),
        "node-a",
        str(tmp_path / "root"),
        str(tmp_path / "logs"),
        run_sync=run_inline,
        host=fixed_host_sample(HostSample()),
        system_cgroups={"pods": lambda: where},
        cgroup_root=str(tmp_path / "cgroup"),
    )


async def test_the_pods_system_container_is_kubepods(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    cgroup = tmp_path / "cgroup"
    write(cgroup / "memory/kubepods/memory.usage_in_bytes", str(700 * MI))
    write(cgroup / "memory/kubepods/memory.stat", f"total_inactive_file {100 * MI}\ntotal_rss {500 * MI}")
    write(cgroup / "memory/kubepods/memory.limit_in_bytes", str(1000 * MI))
    write(cgroup / "cpuacct/kubepods/cpuacct.usage", str(10**9))
    stats = provider(tmp_path, KUBEPODS)

    first = await stats.node_stats()
    [pods] = first.system_containers
    now = pods.memory.time_ns if pods.memory is not None else 0
    assert pods.name == "pods"
    assert pods.memory == MemoryStats(
        now, available_bytes=400 * MI, usage_bytes=700 * MI, working_set_bytes=600 * MI, rss_bytes=500 * MI
    )
    assert pods.cpu == CPUStats(now, None, 10**9)  # no rate before a second sample
    [again] = (await stats.node_stats()).system_containers  # the same instant: no rate, no division
    assert again.cpu == CPUStats(now, None, 10**9)

    write(cgroup / "cpuacct/kubepods/cpuacct.usage", str(3 * 10**9))
    await trio.sleep(10)
    [later] = (await stats.node_stats()).system_containers
    assert later.cpu == CPUStats(now + 10 * 10**9, 200_000_000, 3 * 10**9)  # 2 s of CPU in 10 s

    [shown] = summary_json(Summary(first))["node"]["systemContainers"]
    assert shown["name"] == "pods" and "rootfs" not in shown and "logs" not in shown
    assert shown["memory"]["availableBytes"] == 400 * MI


async def test_without_kubepods_there_is_no_system_container(tmp_path: Path) -> None:
    node = await provider(tmp_path, {}).node_stats()
    assert node.system_containers == ()
    assert "systemContainers" not in summary_json(Summary(node))["node"]
