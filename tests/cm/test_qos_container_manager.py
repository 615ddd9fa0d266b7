"""The Burstable and BestEffort tiers and their CPU shares."""

from __future__ import annotations

from pathlib import Path

from kubelet_trio.api import Pod
from kubelet_trio.cm.cgroup_manager import CgroupManager
from kubelet_trio.cm.qos_container_manager import QOSContainerManager, QOSContainersInfo, burstable_cpu_shares
from kubelet_trio.fsio import run_inline
from tests.cm.fakes import best_effort, burstable, guaranteed, pod, read, v1_root, v2_root


def test_burstable_shares_sum_the_burstable_requests() -> None:
    pods = [burstable("a", cpu="100m"), burstable("b", cpu="250m"), guaranteed(), best_effort()]
    assert burstable_cpu_shares(pods) == 358  # (100 + 250) * 1024 / 1000
    assert burstable_cpu_shares([]) == 2
    assert burstable_cpu_shares([pod("mem-only", {"requests": {"memory": "1Mi"}})]) == 2


async def test_start_creates_tiers_and_updates_follow_active_pods(tmp_path: Path) -> None:
    root = v1_root(tmp_path)
    active: list[Pod] = []
    qos = QOSContainerManager(
        CgroupManager(root=str(root)),
        QOSContainersInfo.under(("kubepods",)),
        active_pods=lambda: active,
        run_sync=run_inline,
    )
    await qos.start()
    assert read(root / "cpu/kubepods/besteffort/cpu.shares") == "2"
    assert read(root / "cpu/kubepods/burstable/cpu.shares") == "2"
    assert (root / "memory/kubepods/burstable").is_dir()
    active.extend([burstable("a", cpu="500m"), burstable("b", cpu="500m")])
    await qos.update_cgroups()
    assert read(root / "cpu/kubepods/burstable/cpu.shares") == "1024"
    (root / "cpu/kubepods/besteffort/cpu.shares").write_text("1024")
    await qos.start()  # existing tiers are brought back to their settings
    assert read(root / "cpu/kubepods/besteffort/cpu.shares") == "2"


async def test_tiers_on_v2_systemd(tmp_path: Path) -> None:
    root = v2_root(tmp_path)
    qos = QOSContainerManager(
        CgroupManager(driver="systemd", root=str(root)),
        QOSContainersInfo.under(("kubepods",)),
        active_pods=lambda: [burstable(cpu="1")],
        run_sync=run_inline,
    )
    await qos.start()
    assert read(root / "kubepods.slice/kubepods-besteffort.slice/cpu.weight") == "1"
    assert read(root / "kubepods.slice/kubepods-burstable.slice/cpu.weight") == "39"  # 1024 shares
