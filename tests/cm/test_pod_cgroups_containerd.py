"""Pod cgroups on real containerd: the container manager makes each pod's cgroup, the sandbox is run
under it (``cgroup_parent``), and the kernel's files hold the pod's values; the cgroups go once the
pods are removed.

The tree is built under a cgroup root of its own (Go's ``--cgroup-root``) so that nothing else on the
machine (another kubelet's ``kubepods``) is touched, and removed at the end.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from pathlib import Path

import pytest
import trio
import trio_util

from kubelet_trio.api import Pod
from kubelet_trio.cm.cgroup_manager import CGROUP_ROOT, CgroupManager, cgroup_version
from kubelet_trio.cm.container_manager import ContainerManager, NodeConfig, runtime_cgroup_driver
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.remote import open_cri_runtime
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.kuberuntime.resources import linux_container_resources
from kubelet_trio.kuberuntime.sandbox import generate_pod_sandbox_config
from kubelet_trio.testing.env import LocalCriEnvironment, stop_and_remove_sandbox
from tests.cm.fakes import MI, pod

pytestmark = pytest.mark.containerd

SYSFS = Path(CGROUP_ROOT)
V2 = cgroup_version() == 2
#: v1 file (hierarchy, name) → its v2 equivalent in the unified hierarchy
V2_FILES = {
    ("memory", "memory.limit_in_bytes"): "memory.max",
    ("cpu", "cpu.shares"): "cpu.weight",
    ("cpu", "cpu.cfs_quota_us"): "cpu.max",
    ("pids", "pids.max"): "pids.max",
}
#: v1 value → v2 value where they differ (shares → weight, quota → "quota period")
V2_VALUES = {"cpu.shares": {"102": "4", "256": "10", "2": "1"}, "cpu.cfs_quota_us": {"10000": "10000 100000"}}
FOREVER = ["sh", "-c", "sleep 3600 & wait"]


@pytest.fixture
async def runtime(cri_env: LocalCriEnvironment) -> AsyncIterator[Runtime]:
    async with open_cri_runtime(cri_env.endpoint, request_timeout=60) as rt:
        yield rt


@pytest.fixture
def cgroup_root() -> Iterator[str]:
    """A fresh cgroup root under every hierarchy, removed with everything below it afterwards."""
    name = f"/kubelet-trio-test-{secrets.token_hex(4)}"
    manager = CgroupManager(root=CGROUP_ROOT)
    manager.create((name[1:],))
    yield name
    manager.destroy((name[1:],))


async def start_pod(
    runtime: Runtime, cm: ContainerManager, image: str, pod: Pod, tmp: Path, command: list[str]
) -> tuple[str, str]:
    """What the kubelet does for a new pod: its cgroup, then the sandbox under it, then the container."""
    await cm.ensure_pod_cgroup(pod)
    config = generate_pod_sandbox_config(
        pod, 0, node_name="cgroups-node", pod_logs_dir=str(tmp), cgroup_parent=cm.pod_cgroup_parent(pod)
    )
    await trio.Path(config.log_directory).mkdir(parents=True, exist_ok=True)
    sandbox_id = await runtime.run_pod_sandbox(config)
    assert pod.spec is not None and pod.spec.containers
    container = pod.spec.containers[0]
    container_id = await runtime.create_container(
        sandbox_id,
        pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=container.name or "c0"),
            image=pb.ImageSpec(image=image),
            command=command,
            log_path="c0/0.log",
            linux=pb.LinuxContainerConfig(resources=linux_container_resources(pod, container, 0)),
        ),
        config,
    )
    await runtime.start_container(container_id)
    return sandbox_id, container_id


def value(cgroup: str, hierarchy: str, filename: str) -> str:
    """A v1 file of ``cgroup``; on v2 the matching unified file's value, translated back to v1's terms."""
    if not V2:
        return (SYSFS / hierarchy / cgroup.lstrip("/") / filename).read_text().strip()
    text = (SYSFS / cgroup.lstrip("/") / V2_FILES[hierarchy, filename]).read_text().strip()
    back = {v2: v1 for v1, v2 in V2_VALUES.get(filename, {}).items()}
    return back.get(text, text)


def cgroup_dir(cgroup: str, hierarchy: str) -> Path:
    return SYSFS / ("" if V2 else hierarchy) / cgroup.lstrip("/")


async def wait_exited(runtime: Runtime, container_id: str) -> pb.ContainerStatus:
    with trio.fail_after(60):
        async with aclosing(trio_util.periodic(0.1)) as ticks:
            async for _ in ticks:
                status = (await runtime.container_status(container_id)).status
                assert status is not None
                if status.state is pb.ContainerState.CONTAINER_EXITED:
                    return status
    raise AssertionError("unreachable")


async def test_qos_pods_get_their_cgroups_and_lose_them_on_removal(
    runtime: Runtime, cri_env: LocalCriEnvironment, cgroup_root: str, tmp_path: Path
) -> None:
    with trio.fail_after(240):
        assert await runtime_cgroup_driver(runtime) == "cgroupfs"  # containerd's SystemdCgroup = false
        await runtime.pull_image(pb.ImageSpec(image=cri_env.images.busybox))
        both = {"cpu": "100m", "memory": "64Mi"}
        guaranteed = pod("guaranteed", {"requests": both, "limits": both}, uid=secrets.token_hex(8))
        burstable = pod(
            "burstable", {"requests": {"cpu": "250m", "memory": "32Mi"}}, uid=secrets.token_hex(8)
        )
        best_effort = pod("besteffort", {}, uid=secrets.token_hex(8))
        pods = [guaranteed, burstable, best_effort]
        cm = ContainerManager(
            config=NodeConfig(cgroup_root=cgroup_root, pod_pids_limit=64),
            active_pods=lambda: pods,
            runtime=runtime,
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(cm.run)
            sandboxes: list[str] = []
            try:
                containers = {}
                for p in pods:
                    sandbox_id, container_id = await start_pod(
                        runtime, cm, cri_env.images.busybox, p, tmp_path, FOREVER
                    )
                    sandboxes.append(sandbox_id)
                    containers[p.uid] = container_id
                parents = {p.uid: cm.pod_cgroup_parent(p) for p in pods}
                assert parents[guaranteed.uid] == f"{cgroup_root}/kubepods/pod{guaranteed.uid}"
                assert parents[burstable.uid] == f"{cgroup_root}/kubepods/burstable/pod{burstable.uid}"
                assert parents[best_effort.uid] == f"{cgroup_root}/kubepods/besteffort/pod{best_effort.uid}"

                g = parents[guaranteed.uid]
                assert value(g, "memory", "memory.limit_in_bytes") == str(64 * MI)
                assert value(g, "cpu", "cpu.shares") == "102"
                assert value(g, "cpu", "cpu.cfs_quota_us") == "10000"
                assert value(parents[burstable.uid], "cpu", "cpu.shares") == "256"
                assert value(parents[best_effort.uid], "cpu", "cpu.shares") == "2"
                for parent in parents.values():
                    assert value(parent, "pids", "pids.max") == "64"
                assert value(f"{cgroup_root}/kubepods/burstable", "cpu", "cpu.shares") == "256"
                assert value(f"{cgroup_root}/kubepods/besteffort", "cpu", "cpu.shares") == "2"
                for p in pods:  # the runtime put each container (and the pause process) in its pod's cgroup
                    container_dir = cgroup_dir(parents[p.uid], "memory") / containers[p.uid]
                    assert (container_dir / "cgroup.procs").read_text().split()
                assert value(f"{g}/{containers[guaranteed.uid]}", "memory", "memory.limit_in_bytes") == str(
                    64 * MI
                )
            finally:
                with trio.move_on_after(60, shield=True):
                    for sandbox_id in sandboxes:
                        await stop_and_remove_sandbox(runtime, sandbox_id)
            pods.clear()
            removed = await cm.cleanup_orphaned_pod_cgroups(set())
            assert sorted(removed) == sorted(p.uid for p in (guaranteed, burstable, best_effort))
            for parent in parents.values():
                for hierarchy in ("cpu", "memory", "pids", "cpuset", "freezer"):
                    assert not cgroup_dir(parent, hierarchy).exists()
            assert cgroup_dir(f"{cgroup_root}/kubepods/burstable", "memory").is_dir()
            nursery.cancel_scope.cancel()


async def test_a_container_over_its_pod_limit_is_oom_killed(
    runtime: Runtime, cri_env: LocalCriEnvironment, cgroup_root: str, tmp_path: Path
) -> None:
    with trio.fail_after(240):
        await runtime.pull_image(pb.ImageSpec(image=cri_env.images.busybox))
        both = {"cpu": "100m", "memory": "64Mi"}
        hog = pod("hog", {"requests": both, "limits": both}, uid=secrets.token_hex(8))
        cm = ContainerManager(
            config=NodeConfig(cgroup_root=cgroup_root), active_pods=lambda: [hog], runtime=runtime
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(cm.run)
            sandbox_id = ""
            try:
                sandbox_id, container_id = await start_pod(
                    runtime,
                    cm,
                    cri_env.images.busybox,
                    hog,
                    tmp_path,
                    ["dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1"],
                )
                status = await wait_exited(runtime, container_id)
                assert (status.exit_code, status.reason) == (137, "OOMKilled")
            finally:
                with trio.move_on_after(60, shield=True):
                    if sandbox_id:
                        await stop_and_remove_sandbox(runtime, sandbox_id)
            assert await cm.cleanup_orphaned_pod_cgroups(set()) == [hog.uid]
            nursery.cancel_scope.cancel()
