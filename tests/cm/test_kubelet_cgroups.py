"""The container manager wired into a node: on a simulated runtime and a stand-in cgroup tree, each pod's
cgroup is made before its sandbox, the sandbox runs under it, housekeeping removes it once the pod is
gone, a pod running outside its cgroup is restarted inside it, and a cgroup that cannot be made fails
the sync with Go's event."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import trio

from kubelet_trio.api import Pod
from kubelet_trio.clock import WallClock
from kubelet_trio.cm.container_manager import NodeConfig
from kubelet_trio.config.podconfig import PodConfig
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.fsio import run_inline
from kubelet_trio.kubelet import KubeletConfig
from kubelet_trio.kubelet_builder import KubeletDeps, open_kubelet
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.testing.node import TEST_SOURCE, SimNode
from tests.cm.fakes import MI, best_effort, burstable, guaranteed, read, v1_root

RUNNING = "Running"


@attrs.define
class CgroupNode:
    node: SimNode
    sim: SimRuntime
    root: Path
    events: list[tuple[str, str, str]]

    async def sandbox_parent(self, pod: Pod) -> str:
        [sandbox] = [s for s in await self.sim.list_pod_sandbox() if s.metadata and s.metadata.uid == pod.uid]
        return self.sim.sandbox_cgroup_parent(sandbox.id)


@contextlib.asynccontextmanager
async def open_cgroup_node(tmp_path: Path, **cgroups: Any) -> AsyncIterator[CgroupNode]:
    """A node with ``cgroupsPerQOS`` on a simulated runtime, its cgroups in a stand-in v1 tree."""
    root = v1_root(tmp_path)
    clock = WallClock()
    sim = SimRuntime(clock=clock, run_sync=run_inline)
    events: list[tuple[str, str, str]] = []
    config = KubeletConfig(
        node_name="cgroups-node",
        root_dir=str(tmp_path / "root"),
        pod_logs_dir=str(tmp_path / "logs"),
        node_ips=("192.0.2.10",),
        memory_backed_volumes=False,
        cgroups=NodeConfig(enforce_node_allocatable=frozenset(), **cgroups),
    )
    pod_config = PodConfig(sources=(TEST_SOURCE,), now=clock.now)
    source = pod_config.source_channel(TEST_SOURCE)
    deps = KubeletDeps(
        runtime=sim,
        pod_config=pod_config,
        clock=clock,
        run_sync=run_inline,
        event_sink=lambda pod, kind, reason, message: events.append((pod.name, reason, message)),
        cgroup_fs_root=str(root),
    )
    async with source, open_kubelet(config, deps) as built:
        node = SimNode(built.kubelet, sim, source, clock=clock)
        await node.apply()
        yield CgroupNode(node, sim, root, events)


async def test_each_qos_class_runs_under_its_pod_cgroup_until_the_pod_is_gone(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    pods = [guaranteed(uid="g-1"), burstable(uid="b-1"), best_effort(uid="e-1")]
    async with open_cgroup_node(tmp_path, pod_pids_limit=64) as env:
        assert read(env.root / "cpu/kubepods/besteffort/cpu.shares") == "2"  # the tiers, at start
        await env.node.apply(*pods)
        for pod in pods:
            await env.node.wait_for_phase(pod, RUNNING)
        assert [await env.sandbox_parent(p) for p in pods] == [
            "/kubepods/podg-1",
            "/kubepods/burstable/podb-1",
            "/kubepods/besteffort/pode-1",
        ]
        assert read(env.root / "memory/kubepods/podg-1/memory.limit_in_bytes") == str(64 * MI)
        assert read(env.root / "cpu/kubepods/podg-1/cpu.cfs_quota_us") == "10000"
        assert read(env.root / "cpu/kubepods/burstable/podb-1/cpu.shares") == "256"
        assert read(env.root / "pids/kubepods/besteffort/pode-1/pids.max") == "64"
        assert read(env.root / "cpu/kubepods/burstable/cpu.shares") == "256"  # the tier counts the pod

        await env.node.remove(pods[1])
        await env.node.wait_terminated(pods[1])
        await trio.sleep(5)  # housekeeping
        assert not (env.root / "cpu/kubepods/burstable/podb-1").exists()
        assert (env.root / "cpu/kubepods/podg-1").is_dir()


async def test_a_pod_running_outside_its_cgroup_is_restarted_inside_it(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """Go: a pod with running containers but no pod cgroup (a kubelet restarted with cgroupsPerQOS) is
    killed and comes back under the cgroup."""
    pod = guaranteed(uid="g-2")
    async with open_cgroup_node(tmp_path) as env:
        await env.node.apply(pod)
        await env.node.wait_for_phase(pod, RUNNING)
        [first] = await env.sim.list_pod_sandbox()
        for hierarchy in env.root.iterdir():
            shutil.rmtree(hierarchy / "kubepods/podg-2", ignore_errors=True)
        env.node.kubelet.request_sync(pod.uid)
        await trio.sleep(5)
        sandboxes = {s.id: s.state for s in await env.sim.list_pod_sandbox()}
        assert sandboxes.pop(first.id) == pb.PodSandboxState.SANDBOX_NOTREADY
        [(second, state)] = sandboxes.items()
        assert state == pb.PodSandboxState.SANDBOX_READY
        assert env.sim.sandbox_cgroup_parent(second) == "/kubepods/podg-2"
        assert read(env.root / "memory/kubepods/podg-2/memory.limit_in_bytes") == str(64 * MI)


async def test_a_cgroup_that_cannot_be_made_fails_the_sync_with_gos_event(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    pod = best_effort(uid="e-3")
    async with open_cgroup_node(tmp_path) as env:
        (env.root / "memory/kubepods/besteffort").rmdir()
        (env.root / "memory/kubepods/besteffort").write_text("not a directory")
        await env.node.apply(pod)
        await trio.sleep(3)
        failed = [e for e in env.events if e[1] == "FailedCreatePodContainer"]
        assert failed and failed[0][2].startswith("unable to ensure pod container exists: ")
        assert await env.sim.list_pod_sandbox() == []
