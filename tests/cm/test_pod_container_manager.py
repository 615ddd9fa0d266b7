"""Pod cgroups in their QoS tier, sized from the spec, listed and removed (processes killed first)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from kubelet_trio.cm.cgroup_manager import CgroupManager
from kubelet_trio.cm.pod_container_manager import PodContainerManager
from kubelet_trio.cm.qos_container_manager import QOSContainersInfo
from kubelet_trio.fsio import run_inline
from tests.cm.fakes import MI, best_effort, burstable, guaranteed, read, v1_root, v2_root

KUBEPODS = ("kubepods",)


def manager(root: Path, driver: str = "cgroupfs", pids: int = -1) -> PodContainerManager:
    cgroups = CgroupManager(driver=driver, root=str(root))  # type: ignore[arg-type]
    return PodContainerManager(
        cgroups, QOSContainersInfo.under(KUBEPODS), pod_pids_limit=pids, run_sync=run_inline
    )


def test_names_by_qos_class_cgroupfs(tmp_path: Path) -> None:
    pcm = manager(v1_root(tmp_path))
    g, b, e = guaranteed(uid="g-1"), burstable(uid="b-2"), best_effort(uid="e-3")
    assert pcm.pod_container_name(g) == (("kubepods", "podg-1"), "/kubepods/podg-1")
    assert pcm.pod_container_name(b) == (("kubepods", "burstable", "podb-2"), "/kubepods/burstable/podb-2")
    assert pcm.pod_container_name(e)[1] == "/kubepods/besteffort/pode-3"


def test_names_by_qos_class_systemd(tmp_path: Path) -> None:
    pcm = manager(v1_root(tmp_path), driver="systemd")
    uid = "1f0e9f6a-4b52-4c1e-9d2e-0a5c3c7a1b2c"
    escaped = uid.replace("-", "_")
    assert pcm.pod_container_name(guaranteed(uid=uid))[1] == f"/kubepods.slice/kubepods-pod{escaped}.slice"
    assert pcm.pod_container_name(burstable(uid=uid))[1] == (
        f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{escaped}.slice"
    )


async def test_ensure_exists_writes_the_pod_values(tmp_path: Path) -> None:
    root = v1_root(tmp_path)
    pcm = manager(root, pids=64)
    g, b, e = guaranteed(uid="g-1"), burstable(uid="b-2"), best_effort(uid="e-3")
    for pod in (g, b, e):
        assert not await pcm.exists(pod)
        await pcm.ensure_exists(pod)
        assert await pcm.exists(pod)
    assert read(root / "memory/kubepods/podg-1/memory.limit_in_bytes") == str(64 * MI)
    assert read(root / "cpu/kubepods/podg-1/cpu.shares") == "102"
    assert read(root / "cpu/kubepods/podg-1/cpu.cfs_quota_us") == "10000"
    assert read(root / "cpu/kubepods/burstable/podb-2/cpu.shares") == "256"
    assert not (root / "memory/kubepods/burstable/podb-2/memory.limit_in_bytes").exists()
    assert read(root / "cpu/kubepods/besteffort/pode-3/cpu.shares") == "2"
    for path in ("podg-1", "burstable/podb-2", "besteffort/pode-3"):
        assert read(root / "pids/kubepods" / path / "pids.max") == "64"


async def test_ensure_exists_leaves_an_existing_cgroup_alone(tmp_path: Path) -> None:
    root = v1_root(tmp_path)
    pcm = manager(root)
    await pcm.ensure_exists(guaranteed(uid="g-1"))
    (root / "cpu/kubepods/podg-1/cpu.shares").write_text("5")
    await pcm.ensure_exists(guaranteed(uid="g-1"))
    assert read(root / "cpu/kubepods/podg-1/cpu.shares") == "5"


async def test_no_pids_limit_by_default_v2(tmp_path: Path) -> None:
    root = v2_root(tmp_path)
    pcm = manager(root)
    await pcm.ensure_exists(guaranteed(uid="g-1"))
    assert read(root / "kubepods/podg-1/memory.max") == str(64 * MI)
    assert not (root / "kubepods/podg-1/pids.max").exists()


@pytest.mark.parametrize("driver", ["cgroupfs", "systemd"])
async def test_lists_pod_cgroups_in_every_tier(tmp_path: Path, driver: str) -> None:
    pcm = manager(v1_root(tmp_path), driver=driver)
    pods = [guaranteed(uid="aa-1"), burstable(uid="bb-2"), best_effort(uid="cc-3")]
    for pod in pods:
        await pcm.ensure_exists(pod)
    found = await pcm.get_all_pods_from_cgroups()
    assert found == {pod.uid: pcm.pod_container_name(pod)[0] for pod in pods}  # tiers are not pods


async def test_destroy_kills_what_is_left_then_removes(tmp_path: Path) -> None:
    root = v1_root(tmp_path)
    pcm = manager(root)
    pod = burstable(uid="bb-2")
    await pcm.ensure_exists(pod)
    name, _ = pcm.pod_container_name(pod)
    leftover = await trio.lowlevel.open_process(["sleep", "60"])
    try:
        (root / "cpu/kubepods/burstable/podbb-2/cgroup.procs").write_text(f"{leftover.pid}\n")
        await pcm.destroy(name)
        with trio.fail_after(10):
            assert await leftover.wait() == -9
    finally:
        leftover.kill()
        with trio.move_on_after(10, shield=True):
            await leftover.wait()
    assert not await pcm.exists(pod)
    assert not (root / "memory/kubepods/burstable/podbb-2").exists()


async def test_reduce_cpu_limits(tmp_path: Path) -> None:
    root = v1_root(tmp_path)
    pcm = manager(root)
    pod = guaranteed(uid="g-1")
    await pcm.ensure_exists(pod)
    await pcm.reduce_cpu_limits(pcm.pod_container_name(pod)[0])
    assert read(root / "cpu/kubepods/podg-1/cpu.shares") == "2"
