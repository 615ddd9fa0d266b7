"""Cgroup names under both drivers, and the files written on cgroup v1 and v2 layouts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kubelet_trio.cm.cgroup_manager import (
    CgroupManager,
    cgroup_version,
    new_cgroup_name,
    parse_cgroupfs_to_cgroup_name,
    parse_systemd_to_cgroup_name,
    to_cgroupfs,
    to_systemd,
)
from kubelet_trio.cm.helpers import ResourceConfig
from tests.cm.fakes import MI, read, v1_root, v2_root

POD = ("kubepods", "burstable", "pod1234-5678")
GI = 1 << 30


def test_cgroupfs_names_are_paths() -> None:
    assert to_cgroupfs(POD) == "/kubepods/burstable/pod1234-5678"
    assert to_cgroupfs(()) == "/"
    assert parse_cgroupfs_to_cgroup_name("/kubepods/burstable/pod1234-5678/") == POD


def test_systemd_names_nest_slices_and_escape_dashes() -> None:
    literal = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_5678.slice"
    assert to_systemd(POD) == literal
    assert to_systemd(()) == "/"
    assert to_systemd(("kubepods",)) == "/kubepods.slice"
    assert parse_systemd_to_cgroup_name(literal) == POD


def test_components_may_not_hold_separators() -> None:
    with pytest.raises(ValueError, match="invalid character"):
        new_cgroup_name(("kubepods",), "a_b")
    with pytest.raises(ValueError, match="invalid character"):
        new_cgroup_name(("kubepods",), "a/b")
    assert new_cgroup_name(("kubepods",), "burstable") == ("kubepods", "burstable")


def test_unknown_driver_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown cgroup driver"):
        CgroupManager(driver="cgroupfs2", root=str(tmp_path))  # type: ignore[arg-type]


def test_version_detection(tmp_path: Path) -> None:
    assert cgroup_version(str(v1_root(tmp_path))) == 1
    assert cgroup_version(str(v2_root(tmp_path))) == 2


def test_v1_cgroupfs_create_writes_each_controller_file(tmp_path: Path) -> None:
    root = v1_root(tmp_path)
    manager = CgroupManager(driver="cgroupfs", root=str(root))
    config = ResourceConfig(
        cpu_shares=102, cpu_quota=10_000, cpu_period=100_000, memory=64 * MI, pids_limit=64
    )
    manager.create(POD, config)
    pod_dir = "kubepods/burstable/pod1234-5678"
    assert read(root / "cpu" / pod_dir / "cpu.shares") == "102"
    assert read(root / "cpu" / pod_dir / "cpu.cfs_period_us") == "100000"
    assert read(root / "cpu" / pod_dir / "cpu.cfs_quota_us") == "10000"
    assert read(root / "memory" / pod_dir / "memory.limit_in_bytes") == str(64 * MI)
    assert read(root / "pids" / pod_dir / "pids.max") == "64"
    assert (root / "freezer" / pod_dir).is_dir()  # every hierarchy holds the cgroup
    assert not (root / "unified" / "kubepods").exists()
    for level in ("kubepods", "kubepods/burstable", pod_dir):  # new cpusets get the parent's CPUs
        assert read(root / "cpuset" / level / "cpuset.cpus") == "0-1"
        assert read(root / "cpuset" / level / "cpuset.mems") == "0"
    assert manager.exists(POD)
    assert manager.name(POD) == "/kubepods/burstable/pod1234-5678"


def test_v1_unset_values_are_left_alone(tmp_path: Path) -> None:
    root = v1_root(tmp_path)
    manager = CgroupManager(root=str(root))
    manager.create(POD, ResourceConfig(cpu_shares=2))
    pod_dir = root / "cpu" / "kubepods/burstable/pod1234-5678"
    assert sorted(os.listdir(pod_dir)) == ["cpu.shares"]
    assert not (root / "memory" / "kubepods/burstable/pod1234-5678" / "memory.limit_in_bytes").exists()


def test_v1_hugepages_only_with_the_hugetlb_hierarchy(tmp_path: Path) -> None:
    root = v1_root(tmp_path)
    manager = CgroupManager(root=str(root), hugepage_sizes=(2 * MI, GI))
    manager.create(("a",), ResourceConfig(hugepage_limits={2 * MI: 4 * MI}))
    assert not any("hugetlb" in name for _, _, files in os.walk(root) for name in files)
    (root / "hugetlb").mkdir()
    manager.create(("b",), ResourceConfig(hugepage_limits={2 * MI: 4 * MI}))
    assert read(root / "hugetlb" / "b" / "hugetlb.2MB.limit_in_bytes") == str(4 * MI)
    assert read(root / "hugetlb" / "b" / "hugetlb.1GB.limit_in_bytes") == "0"  # not asked for: none


def test_hugepages_unbounded_or_untouched(tmp_path: Path) -> None:
    root = v1_root(tmp_path)
    (root / "hugetlb").mkdir()
    manager = CgroupManager(root=str(root), hugepage_sizes=(2 * MI, GI))
    manager.create(("tier",), ResourceConfig(hugepages_unbounded=True))
    assert read(root / "hugetlb/tier/hugetlb.2MB.limit_in_bytes") == str(1 << 62)
    assert read(root / "hugetlb/tier/hugetlb.1GB.limit_in_bytes") == str(1 << 62)
    manager.create(("pod",), ResourceConfig(hugepage_limits={}))
    assert read(root / "hugetlb/pod/hugetlb.2MB.limit_in_bytes") == "0"
    manager.create(("plain",), ResourceConfig(cpu_shares=2))
    assert not list((root / "hugetlb/plain").iterdir())


def test_v1_systemd_paths_are_slices(tmp_path: Path) -> None:
    root = v1_root(tmp_path)
    manager = CgroupManager(driver="systemd", root=str(root))
    manager.create(POD, ResourceConfig(memory=64 * MI))
    slice_dir = root / "memory/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_5678.slice"
    assert read(slice_dir / "memory.limit_in_bytes") == str(64 * MI)
    assert manager.exists(POD)
    assert manager.children(("kubepods", "burstable")) == {POD}


def test_exists_needs_every_required_hierarchy(tmp_path: Path) -> None:
    root = v1_root(tmp_path)
    manager = CgroupManager(root=str(root))
    manager.create(POD)
    os.rmdir(root / "pids" / "kubepods/burstable/pod1234-5678")
    assert not manager.exists(POD)
    assert not manager.exists(("other",))


def test_destroy_removes_the_cgroup_and_its_children_everywhere(tmp_path: Path) -> None:
    root = v1_root(tmp_path)
    manager = CgroupManager(root=str(root))
    manager.create(POD, ResourceConfig(cpu_shares=2, memory=MI))
    manager.create((*POD, "container1"), ResourceConfig(cpu_shares=2))
    manager.destroy(POD)
    assert not manager.exists(POD)
    for hierarchy in ("cpu", "memory", "freezer"):
        assert not (root / hierarchy / "kubepods/burstable/pod1234-5678").exists()
        assert (root / hierarchy / "kubepods/burstable").is_dir()
    manager.destroy(POD)  # gone already: nothing to do


def test_the_hybrid_layouts_v2_copy_made_by_runc_is_found_and_removed(tmp_path: Path) -> None:
    """On a hybrid machine runc also makes each container's cgroup under ``unified``: a pod cgroup left
    only there is still a child of its tier, and destroying the pod removes it."""
    root = v1_root(tmp_path)
    manager = CgroupManager(root=str(root))
    manager.create(POD)
    (root / "unified/kubepods/burstable/pod1234-5678/container1").mkdir(parents=True)
    (root / "unified/kubepods/burstable/pod-only-in-v2").mkdir()
    assert manager.children(POD[:-1]) == {POD, (*POD[:-1], "pod-only-in-v2")}
    manager.destroy(POD)
    assert not (root / "unified/kubepods/burstable/pod1234-5678").exists()
    assert (root / "unified/kubepods/burstable/pod-only-in-v2").is_dir()


def test_pids_lists_processes_below_the_cgroup(tmp_path: Path) -> None:
    root = v1_root(tmp_path)
    manager = CgroupManager(root=str(root))
    manager.create((*POD, "c1"))
    (root / "cpu/kubepods/burstable/pod1234-5678/cgroup.procs").write_text("")
    (root / "cpu/kubepods/burstable/pod1234-5678/c1/cgroup.procs").write_text("12\n7\n")
    (root / "memory/kubepods/burstable/pod1234-5678/c1/cgroup.procs").write_text("7\n")
    assert manager.pids(POD) == [7, 12]


def test_v2_create_delegates_controllers_and_writes_unified_files(tmp_path: Path) -> None:
    root = v2_root(tmp_path)
    manager = CgroupManager(driver="cgroupfs", root=str(root))
    assert manager.version == 2
    config = ResourceConfig(
        cpu_shares=102, cpu_quota=10_000, cpu_period=100_000, memory=64 * MI, pids_limit=64
    )
    manager.create(POD, config)
    pod_dir = root / "kubepods/burstable/pod1234-5678"
    assert read(root / "cgroup.subtree_control") == "+cpu +cpuset +memory +hugetlb +pids"
    assert read(pod_dir / "cpu.weight") == "4"  # 1 + (102 - 2) * 9999 / 262142
    assert read(pod_dir / "cpu.max") == "10000 100000"
    assert read(pod_dir / "memory.max") == str(64 * MI)
    assert read(pod_dir / "pids.max") == "64"
    assert manager.exists(POD)


def test_v2_unlimited_values(tmp_path: Path) -> None:
    root = v2_root(tmp_path)
    manager = CgroupManager(root=str(root))
    manager.create(
        ("kubepods",), ResourceConfig(cpu_shares=2, cpu_quota=-1, cpu_period=100_000, pids_limit=-1)
    )
    assert read(root / "kubepods/cpu.weight") == "1"
    assert read(root / "kubepods/cpu.max") == "max 100000"
    assert read(root / "kubepods/pids.max") == "max"


def test_v2_skips_controllers_the_cgroup_does_not_have(tmp_path: Path) -> None:
    root = v2_root(tmp_path)
    manager = CgroupManager(root=str(root))
    manager.create(("kubepods",))
    (root / "kubepods" / "cgroup.controllers").write_text("cpu memory\n")
    manager.update(("kubepods",), ResourceConfig(cpu_shares=1024, pids_limit=10, hugepage_limits={2 * MI: 0}))
    assert sorted(os.listdir(root / "kubepods")) == ["cgroup.controllers", "cpu.weight"]


def test_v2_systemd_layout(tmp_path: Path) -> None:
    root = v2_root(tmp_path)
    manager = CgroupManager(driver="systemd", root=str(root))
    manager.create(("kubepods", "besteffort", "podab-cd"), ResourceConfig(cpu_shares=2))
    slice_dir = root / "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podab_cd.slice"
    assert read(slice_dir / "cpu.weight") == "1"
    manager.destroy(("kubepods", "besteffort", "podab-cd"))
    assert not slice_dir.exists()
