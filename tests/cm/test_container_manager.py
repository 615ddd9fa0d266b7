"""The container manager's start (validation, kubepods, tiers), its periodic tier updates and orphan
cleanup, on stand-in cgroup roots under a virtual clock."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet_trio.api import Pod
from kubelet_trio.cm.cgroup_manager import CgroupError
from kubelet_trio.cm.container_manager import CgroupDriverMismatch, ContainerManager, NodeConfig
from kubelet_trio.cm.node_container_manager import NodeCapacity
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.fsio import run_inline
from tests.cm.fakes import MI, best_effort, burstable, guaranteed, read, v1_root, v2_root

GI = 1 << 30
CAPACITY = NodeCapacity(milli_cpu=2000, memory=4 * GI, pids=32768)


class FakeRuntime:
    """Answers ``Status`` with a containerd-style config whose runc runtime has ``SystemdCgroup``."""

    def __init__(self, systemd: bool | None) -> None:
        options = {} if systemd is None else {"SystemdCgroup": systemd}
        config = {"containerd": {"defaultRuntimeName": "runc", "runtimes": {"runc": {"options": options}}}}
        self.info = {"config": json.dumps(config)}

    async def status(self, verbose: bool = False) -> pb.StatusResponse:
        return pb.StatusResponse(info=self.info if verbose else {})


def container_manager(
    root: Path, active: list[Pod] | None = None, **kw: Any
) -> tuple[ContainerManager, list[tuple[str, str, str]]]:
    events: list[tuple[str, str, str]] = []
    pods = active if active is not None else []
    cm = ContainerManager(
        config=kw.pop("config", NodeConfig()),
        capacity=CAPACITY,
        active_pods=lambda: pods,
        record_node_event=lambda *event: events.append(event),
        cgroup_fs_root=str(root),
        run_sync=kw.pop("run_sync", run_inline),
        **kw,
    )
    return cm, events


async def test_start_sizes_kubepods_from_capacity(tmp_path: Path, nursery: trio.Nursery) -> None:
    root = v1_root(tmp_path)
    cm, events = container_manager(root, config=NodeConfig(enforce_node_allocatable=frozenset()))
    await nursery.start(cm.run)
    assert read(root / "cpu/kubepods/cpu.shares") == "2048"
    assert read(root / "memory/kubepods/memory.limit_in_bytes") == str(4 * GI)
    assert read(root / "pids/kubepods/pids.max") == "32768"
    assert read(root / "cpu/kubepods/besteffort/cpu.shares") == "2"
    assert (root / "memory/kubepods/burstable").is_dir()
    assert events == [("Normal", "NodeAllocatableEnforced", "Updated Node Allocatable limit across pods")]


async def test_enforced_allocatable_leaves_out_the_reservations(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    root = v1_root(tmp_path)
    config = NodeConfig(
        kube_reserved={"cpu": "500m", "memory": "1Gi"}, system_reserved={"memory": "512Mi", "pid": "768"}
    )
    cm, _ = container_manager(root, config=config)
    await nursery.start(cm.run)
    assert read(root / "cpu/kubepods/cpu.shares") == "1536"
    assert read(root / "memory/kubepods/memory.limit_in_bytes") == str(4 * GI - GI - 512 * MI)
    assert read(root / "pids/kubepods/pids.max") == "32000"


async def test_tier_shares_are_reconciled_every_minute(
    tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    root = v1_root(tmp_path)
    active: list[Pod] = [burstable("a", cpu="100m")]
    cm, _ = container_manager(root, active)
    await nursery.start(cm.run)
    start = trio.current_time()
    assert read(root / "cpu/kubepods/burstable/cpu.shares") == "102"
    active.append(burstable("b", cpu="900m"))
    await trio.sleep(59)
    assert read(root / "cpu/kubepods/burstable/cpu.shares") == "102"
    await trio.sleep(1.5)
    assert trio.current_time() - start == pytest.approx(60.5)
    assert read(root / "cpu/kubepods/burstable/cpu.shares") == "1024"


async def test_ensure_pod_cgroup_counts_the_pod_in_its_tier_first(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    root = v1_root(tmp_path)
    active: list[Pod] = []
    cm, _ = container_manager(root, active, config=NodeConfig(pod_pids_limit=64))
    await nursery.start(cm.run)
    pod = burstable("new", cpu="500m", uid="nn-1")
    active.append(pod)
    await cm.ensure_pod_cgroup(pod)
    assert read(root / "cpu/kubepods/burstable/cpu.shares") == "512"
    assert read(root / "pids/kubepods/burstable/podnn-1/pids.max") == "64"
    assert cm.pod_cgroup_parent(pod) == "/kubepods/burstable/podnn-1"


async def test_orphans_are_removed_unless_running_or_holding_volumes(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    root = v1_root(tmp_path)
    cm, _ = container_manager(root)
    await nursery.start(cm.run)
    running, gone, mounted = guaranteed(uid="run-1"), burstable(uid="gone-2"), best_effort(uid="vol-3")
    for pod in (running, gone, mounted):
        await cm.ensure_pod_cgroup(pod)
    removed = await cm.cleanup_orphaned_pod_cgroups({"run-1"}, volumes_exist=lambda uid: uid == "vol-3")
    assert removed == ["gone-2"]
    assert (root / "cpu/kubepods/podrun-1").is_dir()
    assert not (root / "cpu/kubepods/burstable/podgone-2").exists()
    assert read(root / "cpu/kubepods/besteffort/podvol-3/cpu.shares") == "2"
    assert await cm.cleanup_orphaned_pod_cgroups({"run-1"}) == ["vol-3"]


async def test_systemd_driver_on_v2(tmp_path: Path, nursery: trio.Nursery) -> None:
    root = v2_root(tmp_path)
    cm, _ = container_manager(
        root, config=NodeConfig(cgroup_driver="systemd"), runtime=FakeRuntime(systemd=True)
    )
    await nursery.start(cm.run)
    assert read(root / "kubepods.slice/memory.max") == str(4 * GI)
    pod = guaranteed(uid="ab-cd")
    await cm.ensure_pod_cgroup(pod)
    assert cm.pod_cgroup_parent(pod) == "/kubepods.slice/kubepods-podab_cd.slice"
    assert read(root / "kubepods.slice/kubepods-podab_cd.slice/memory.max") == str(64 * MI)


async def test_a_driver_other_than_the_runtimes_fails_the_start(tmp_path: Path) -> None:
    cm, _ = container_manager(v1_root(tmp_path), runtime=FakeRuntime(systemd=True))
    with pytest.raises(
        CgroupDriverMismatch,
        match='kubelet cgroup driver: "cgroupfs" is different from the container runtime cgroup driver: '
        '"systemd"',
    ):
        await cm.run()


async def test_a_runtime_that_does_not_say_is_trusted(tmp_path: Path, nursery: trio.Nursery) -> None:
    cm, _ = container_manager(v1_root(tmp_path), runtime=FakeRuntime(systemd=None))
    await nursery.start(cm.run)
    assert cm.cgroups.exists(("kubepods",))


async def test_a_missing_controller_fails_the_start(tmp_path: Path) -> None:
    root = v1_root(tmp_path)
    (root / "cpuset" / "cpuset.cpus").unlink()
    (root / "cpuset" / "cpuset.mems").unlink()
    (root / "cpuset").rmdir()
    cm, _ = container_manager(root)
    with pytest.raises(CgroupError, match=r"Following Cgroup subsystem not mounted: \[cpuset\]"):
        await cm.run()


async def test_a_missing_cgroup_root_fails_the_start(tmp_path: Path) -> None:
    cm, _ = container_manager(v1_root(tmp_path), config=NodeConfig(cgroup_root="/absent"))
    with pytest.raises(CgroupError, match="cgroup-root '/absent' doesn't exist"):
        await cm.run()


async def test_a_custom_cgroup_root_holds_kubepods(tmp_path: Path, nursery: trio.Nursery) -> None:
    root = v1_root(tmp_path)
    cm, _ = container_manager(root, config=NodeConfig(cgroup_root="/node"))
    cm.cgroups.create(("node",))
    await nursery.start(cm.run)
    pod = best_effort(uid="e-1")
    await cm.ensure_pod_cgroup(pod)
    assert cm.pod_cgroup_parent(pod) == "/node/kubepods/besteffort/pode-1"
    assert read(root / "cpu/node/kubepods/besteffort/pode-1/cpu.shares") == "2"


async def test_without_cgroups_per_qos_nothing_is_made(tmp_path: Path, nursery: trio.Nursery) -> None:
    root = v1_root(tmp_path)
    cm, _ = container_manager(root, config=NodeConfig(cgroups_per_qos=False))
    await nursery.start(cm.run)
    pod = guaranteed()
    await cm.ensure_pod_cgroup(pod)
    assert cm.pod_cgroup_parent(pod) == ""
    assert not (root / "cpu/kubepods").exists()
    assert await cm.cleanup_orphaned_pod_cgroups(set()) == []


def reserved_config(**kw: Any) -> NodeConfig:
    return NodeConfig(
        enforce_node_allocatable=frozenset({"pods", "system-reserved", "kube-reserved"}),
        kube_reserved={"cpu": "250m", "memory": "256Mi", "pid": "1000"},
        system_reserved={"memory": "512Mi"},
        kube_reserved_cgroup="/kube-reserved",
        system_reserved_cgroup="/system-reserved",
        **kw,
    )


async def test_the_reserved_cgroups_are_limited_to_their_reservations(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    root = v1_root(tmp_path)
    for hierarchy in ("cpu", "cpuacct", "cpuset", "memory", "pids", "systemd"):
        (root / hierarchy / "kube-reserved").mkdir()
        (root / hierarchy / "system-reserved").mkdir()
    cm, events = container_manager(root, config=reserved_config())
    await nursery.start(cm.run)
    assert read(root / "cpu/kube-reserved/cpu.shares") == "256"
    assert read(root / "memory/kube-reserved/memory.limit_in_bytes") == str(256 * MI)
    assert read(root / "pids/kube-reserved/pids.max") == "1000"
    assert read(root / "memory/system-reserved/memory.limit_in_bytes") == str(512 * MI)
    assert not (root / "cpu/system-reserved/cpu.shares").exists()  # no cpu reserved: left as it is
    assert not (root / "pids/system-reserved/pids.max").exists()
    assert read(root / "memory/kubepods/memory.limit_in_bytes") == str(4 * GI - 768 * MI)
    assert events[-2:] == [
        ("Normal", "NodeAllocatableEnforced", "Updated limits on system reserved cgroup /system-reserved"),
        ("Normal", "NodeAllocatableEnforced", "Updated limits on kube reserved cgroup /kube-reserved"),
    ]


async def test_a_missing_reserved_cgroup_fails_the_start_with_gos_event(tmp_path: Path) -> None:
    root = v1_root(tmp_path)
    for hierarchy in ("cpu", "cpuacct", "cpuset", "memory", "pids", "systemd"):
        (root / hierarchy / "system-reserved").mkdir()
    (root / "memory" / "kube-reserved").mkdir()  # only in one hierarchy: not a whole cgroup
    cm, events = container_manager(root, config=reserved_config())
    missing = ", ".join(
        str(root / hierarchy / "kube-reserved")
        for hierarchy in ("cpu", "cpuacct", "cpuset", "pids", "systemd")
    )
    message = (
        'Failed to enforce Kube Reserved Cgroup Limits on "/kube-reserved": cgroup ["kube-reserved"] has'
        f" some missing paths: {missing}"
    )
    with pytest.RaisesGroup(
        pytest.RaisesExc(CgroupError, match=f"^{re.escape(message)}$"), flatten_subgroups=True
    ):
        async with trio.open_nursery() as nursery:
            await nursery.start(cm.run)
    assert events[-1] == ("Warning", "FailedNodeAllocatableEnforcement", message)
    assert (
        "Normal",
        "NodeAllocatableEnforced",
        "Updated limits on system reserved cgroup /system-reserved",
    ) in events
    assert not (root / "memory/kube-reserved/memory.limit_in_bytes").exists()


async def test_a_reserved_slice_on_v2_needs_the_kubelets_controllers(tmp_path: Path) -> None:
    root = v2_root(tmp_path)
    (root / "system.slice").mkdir()
    (root / "system.slice" / "cgroup.controllers").write_text("cpu memory\n")
    config = NodeConfig(
        cgroup_driver="systemd",
        enforce_node_allocatable=frozenset({"system-reserved"}),
        system_reserved={"memory": "1Gi"},
        system_reserved_cgroup="system.slice",
    )
    cm, events = container_manager(root, config=config)
    with pytest.RaisesGroup(
        pytest.RaisesExc(CgroupError, match="missing controllers: cpuset, hugetlb, pids$"),
        flatten_subgroups=True,
    ):
        async with trio.open_nursery() as nursery:
            await nursery.start(cm.run)
    assert events[-1][2].startswith(
        'Failed to enforce System Reserved Cgroup Limits on "system.slice": cgroup ["system"]'
    )
    (root / "system.slice" / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids\n")
    cm, events = container_manager(root, config=config)
    async with trio.open_nursery() as nursery:
        await nursery.start(cm.run)
        nursery.cancel_scope.cancel()
    assert read(root / "system.slice/memory.max") == str(GI)
    assert events[-1] == (
        "Normal",
        "NodeAllocatableEnforced",
        "Updated limits on system reserved cgroup system.slice",
    )


async def test_each_cgroup_create_update_and_destroy_is_timed(
    tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    root = v1_root(tmp_path)
    observed: list[tuple[str, float]] = []

    async def slow(fn: Any, *args: Any) -> Any:  # a thread that takes its time, on the virtual clock
        await trio.sleep(0.25)
        return fn(*args)

    cm, _ = container_manager(root, observe_operation=lambda *seen: observed.append(seen), run_sync=slow)
    await nursery.start(cm.run)
    assert {operation for operation, _ in observed} == {"create", "update"}
    assert all(seconds == pytest.approx(0.25) for _, seconds in observed)
    observed.clear()
    pod = guaranteed()
    await cm.ensure_pod_cgroup(pod)
    await cm.cleanup_orphaned_pod_cgroups(possibly_running=())
    *tiers, created, destroyed = observed  # the tiers count the pod first, then its cgroup comes and goes
    assert tiers and all(operation == "update" for operation, _ in tiers)
    assert (created, destroyed) == (("create", 0.25), ("destroy", 0.25))
