"""Container GC under its policy (Go ``kuberuntime_gc.go``) on the simulated runtime under MockClock:
MinAge, MaxPerPodContainer, MaxContainers (evenly across pods, then oldest first), sandboxes and log
directories of removed pods."""

from __future__ import annotations

from pathlib import Path

import attrs
import trio
from trio.testing import MockClock

from kubelet_trio.api import Pod
from kubelet_trio.container.types import ContainerState, ContainerStatus
from kubelet_trio.kuberuntime import running_pod_from_status
from kubelet_trio.kuberuntime.gc import GCPolicy
from kubelet_trio.testing.node import open_sim_node
from kubelet_trio.testing.pods import pod_manifest
from tests.kuberuntime.conftest import Env, app, make_pod


@attrs.define
class PodStates:
    """Pods whose content should go (deleted and terminated) and pods that are terminated."""

    removed: set[str] = attrs.Factory(set)
    terminated: set[str] = attrs.Factory(set)

    def should_pod_content_be_removed(self, uid: str) -> bool:
        return uid in self.removed

    def should_pod_runtime_be_removed(self, uid: str) -> bool:
        return uid in self.terminated or uid in self.removed


def crashing(name: str = "web", uid: str = "uid-1") -> Pod:
    return make_pod([app("crash"), app("steady")], scripts={"crash": "exit 1 after 1s"}, name=name, uid=uid)


async def crash_until(env: Env, pod: Pod, dead: int) -> list[ContainerStatus]:
    """Sync the pod (waiting out crash-loop backoffs) until ``dead`` exited instances of ``crash`` exist."""
    while True:
        result = await env.sync(pod)
        until = result.earliest_backoff()
        await trio.sleep_until(until if until is not None else trio.current_time() + 1)
        instances = (await env.status(pod)).instances("crash")
        if len(instances) == dead and instances[0].state is ContainerState.EXITED:
            return instances  # newest first


async def collect(
    env: Env, policy: GCPolicy, states: PodStates | None = None, *, ready: bool = True
) -> list[str]:
    result = await env.mgr.garbage_collect(policy, states or PodStates(), all_sources_ready=ready)
    return list(result.containers)


async def crash_ids(env: Env, pod: Pod) -> list[str]:
    return [c.id for c in (await env.status(pod)).instances("crash")]


async def test_max_per_pod_container_keeps_the_newest(env: Env, autojump_clock: MockClock) -> None:
    pod = crashing()
    dead = await crash_until(env, pod, 4)
    assert await collect(env, GCPolicy(max_per_pod_container=-1)) == []  # no limit
    removed = await collect(env, GCPolicy(max_per_pod_container=2))
    assert removed == [dead[3].id, dead[2].id]  # oldest first
    assert await crash_ids(env, pod) == [dead[0].id, dead[1].id]
    assert len((await env.status(pod)).instances("steady")) == 1  # running: never a candidate
    log_dir = env.logs / "default_web_uid-1" / "crash"
    assert sorted(p.name for p in log_dir.iterdir()) == sorted(f"{c.restart_count}.log" for c in dead[:2])


async def test_min_age_spares_young_dead_containers(env: Env, autojump_clock: MockClock) -> None:
    pod = crashing()
    dead = await crash_until(env, pod, 3)
    now = env.clock.wall_ns()
    ages = [(now - c.created_at) / 1e9 for c in dead]
    assert ages[0] < ages[1] < ages[2]
    assert await collect(env, GCPolicy(min_age=ages[2] + 1, max_per_pod_container=0)) == []
    # only the instances created more than min_age ago are candidates; the others are not counted
    removed = await collect(env, GCPolicy(min_age=(ages[0] + ages[1]) / 2, max_per_pod_container=1))
    assert removed == [dead[2].id]
    assert await crash_ids(env, pod) == [dead[0].id, dead[1].id]


async def test_max_containers_evens_out_then_removes_the_oldest(env: Env, autojump_clock: MockClock) -> None:
    a, b = crashing("a", "uid-a"), crashing("b", "uid-b")
    dead_a = await crash_until(env, a, 3)
    dead_b = await crash_until(env, b, 3)
    unlimited = {"max_per_pod_container": -1}
    assert await collect(env, GCPolicy(max_containers=6, **unlimited)) == []
    # 6 dead in 2 units, at most 4: each unit keeps 4 // 2 = 2
    removed = await collect(env, GCPolicy(max_containers=4, **unlimited))
    assert sorted(removed) == sorted([dead_a[2].id, dead_b[2].id])
    # at most 1: each unit keeps max(1 // 2, 1) = 1, then the oldest of the two newest goes
    removed = await collect(env, GCPolicy(max_containers=1, **unlimited))
    assert sorted(removed) == sorted([dead_a[1].id, dead_b[1].id, dead_a[0].id])
    assert await crash_ids(env, a) == []
    assert await crash_ids(env, b) == [dead_b[0].id]


async def test_removed_pods_lose_containers_sandboxes_and_logs(env: Env, autojump_clock: MockClock) -> None:
    gone, kept = crashing("gone", "uid-gone"), crashing("kept", "uid-kept")
    await crash_until(env, gone, 2)
    await crash_until(env, kept, 2)
    status = await env.status(gone)
    assert (await env.mgr.kill_pod(gone, running_pod_from_status(status))).ok
    logs = env.logs / "default_gone_uid-gone"
    states = PodStates(removed={gone.uid})
    policy = GCPolicy(max_per_pod_container=-1)
    # until every source has spoken nothing is taken for removed
    result = await env.mgr.garbage_collect(policy, states, all_sources_ready=False)
    assert result.containers == () and result.log_dirs == () and logs.is_dir()
    result = await env.mgr.garbage_collect(policy, states, all_sources_ready=True)
    assert sorted(result.containers) == sorted(c.id for c in status.container_statuses)
    assert result.sandboxes == tuple(s.id for s in status.sandbox_statuses)
    assert result.log_dirs == (str(logs),) and not logs.exists()
    assert {p.uid for p in await env.mgr.get_pods()} == {kept.uid}
    assert len(await crash_ids(env, kept)) == 2


async def test_terminated_pods_go_only_when_reclaiming_for_eviction(
    env: Env, autojump_clock: MockClock
) -> None:
    pod = crashing()
    await crash_until(env, pod, 2)
    status = await env.status(pod)
    await env.mgr.kill_pod(pod, running_pod_from_status(status))
    states = PodStates(terminated={pod.uid})
    policy = GCPolicy(max_per_pod_container=-1)
    assert (await env.mgr.garbage_collect(policy, states, all_sources_ready=True)).containers == ()
    result = await env.mgr.garbage_collect(
        policy, states, all_sources_ready=True, evict_non_deleted_pods=True
    )
    assert len(result.containers) == 3 and len(result.sandboxes) == 1
    assert result.log_dirs == ()  # the pod is still wanted: its logs stay


async def test_dead_sandboxes_of_a_wanted_pod_keep_the_newest(env: Env, autojump_clock: MockClock) -> None:
    pod = make_pod([app()], scripts={"app": "run"})
    await env.sync(pod)
    for _ in range(2):
        old = (await env.status(pod)).sandbox_statuses[0]
        await env.sim.stop_pod_sandbox(old.id)
        await env.sync(pod)
        await trio.sleep(1)
    status = await env.status(pod)
    assert [s.attempt for s in status.sandbox_statuses] == [2, 1, 0]
    result = await env.mgr.garbage_collect(
        GCPolicy(max_per_pod_container=0), PodStates(), all_sources_ready=True
    )
    # the dead containers went first, so both older sandboxes were empty
    assert len(result.containers) == 2
    assert sorted(result.sandboxes) == sorted(s.id for s in status.sandbox_statuses[1:])
    after = await env.status(pod)
    assert [s.attempt for s in after.sandbox_statuses] == [2] and after.sandbox_statuses[0].ready


async def test_a_node_keeps_at_most_the_configured_dead_instances(autojump_clock: MockClock) -> None:
    """--maximum-dead-containers-per-container reaches both the ContainerDied pruning and the minute GC;
    a removed pod's containers, sandbox and log directory go with the next collection."""
    async with open_sim_node(maximum_dead_containers_per_container=3) as node:
        [pod] = await node.apply(pod_manifest("crash", {"app": "exit 1 after 1s"}))
        await trio.sleep(600)  # restarts at 10, 20, 40, 80, 160, 300 s back-off
        status = await node.kubelet._kube_runtime.get_pod_status(pod.uid, pod.name, pod.namespace)
        dead = [c for c in status.instances("app") if c.state is ContainerState.EXITED]
        assert len(dead) == 3
        logs = Path(node.kubelet.config.pod_logs_dir) / f"default_crash_{pod.uid}"
        assert logs.is_dir()
        await node.remove(pod)
        await node.wait_terminated(pod)
        await trio.sleep(61)  # past the next container GC (every minute)
        assert await node.kubelet._kube_runtime.get_pods() == []
        assert not logs.exists()
