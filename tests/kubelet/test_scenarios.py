"""Node-level scenarios on SimRuntime under MockClock: the rules of the sync loop, pod workers and SyncPod.

Every expectation is exact: all periods (relist 1 s, sync tick 1 s) and scripted container lifetimes are
whole seconds from t = 0, so each restart lands on the exact second its backoff expires.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from kubelet_trio.api import Pod, PodStatus
from kubelet_trio.container.types import ContainerState
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.kubelet import Kubelet
from kubelet_trio.kuberuntime.labels import POD_UID_LABEL
from kubelet_trio.pleg.events import PodLifecycleEvent, PodLifecycleEventType
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.testing.node import SimNode, open_sim_node
from kubelet_trio.testing.pods import container_status, is_running, pod_manifest


def parse_time(value: str | None) -> float:
    assert value is not None
    return dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp()


def restart_count(status: PodStatus, name: str) -> int:
    try:
        return container_status(status, name).restart_count or 0
    except AssertionError:
        return -1


async def test_pod_runs_and_reports_status(autojump_clock: trio.testing.MockClock) -> None:
    async with open_sim_node() as node:
        (pod,) = await node.apply(pod_manifest("web", {"app": "run"}))
        status = await node.wait_for(pod, lambda s: s.phase == "Running" and is_running(s, "app"))
        conditions = {c.type: c.status for c in status.conditions or ()}
        assert conditions == {
            "PodReadyToStartContainers": "True",
            "Initialized": "True",
            "Ready": "True",
            "ContainersReady": "True",
            "PodScheduled": "True",
        }
        app = container_status(status, "app")
        assert app.ready is True and app.started is True and app.restart_count == 0
        assert app.container_id and app.container_id.startswith("containerd://")
        assert status.pod_ip and status.host_ip == "192.0.2.10"
        assert status.start_time is not None
        assert status.qos_class == "BestEffort"


async def test_crash_loop_backoff_schedule(autojump_clock: trio.testing.MockClock) -> None:
    """Restarts after each exit: at once, then 10, 20, 40, 80, 160, 300, 300 s after finishedAt."""
    async with open_sim_node() as node:
        (pod,) = await node.apply(pod_manifest("crash", {"app": "exit 1 after 5s"}))
        delays: list[float] = []
        backoff_messages: set[str] = set()
        for restarts in range(1, 9):
            status = await node.wait_for(
                pod, lambda s, n=restarts: restart_count(s, "app") == n and is_running(s, "app")
            )
            app = container_status(status, "app")
            assert app.last_state is not None and app.last_state.terminated is not None
            assert app.last_state.terminated.exit_code == 1
            assert app.last_state.terminated.reason == "Error"
            started = parse_time(app.state.running.started_at)
            finished = parse_time(app.last_state.terminated.finished_at)
            delays.append(started - finished)
            if restarts >= 2:
                waiting = await node.wait_for(
                    pod,
                    lambda s: (
                        (w := container_status(s, "app").state.waiting) is not None
                        and w.reason == "CrashLoopBackOff"
                    ),
                )
                backoff_messages.add(container_status(waiting, "app").state.waiting.message)
        assert delays == [0, 10, 20, 40, 80, 160, 300, 300]
        assert status.phase == "Running"  # restartPolicy Always: a crash-looping pod is Running
        assert any(
            "back-off 5m0s restarting failed container=app pod=crash_default(" in m for m in backoff_messages
        )


async def test_on_failure_exit_zero_succeeds(autojump_clock: trio.testing.MockClock) -> None:
    async with open_sim_node() as node:
        (pod,) = await node.apply(pod_manifest("job", {"app": "exit 0 after 2s"}, restart_policy="OnFailure"))
        status = await node.wait_for_phase(pod, "Succeeded")
        app = container_status(status, "app")
        assert app.state.terminated.exit_code == 0
        assert app.state.terminated.reason == "Completed"
        assert app.restart_count == 0
        ready = {c.type: (c.status, c.reason) for c in status.conditions or ()}
        assert ready["Ready"] == ("False", "PodCompleted")
        await node.wait_terminated(pod)


async def test_never_exit_one_fails(autojump_clock: trio.testing.MockClock) -> None:
    async with open_sim_node() as node:
        (pod,) = await node.apply(pod_manifest("once", {"app": "exit 1 after 1s"}, restart_policy="Never"))
        status = await node.wait_for_phase(pod, "Failed")
        app = container_status(status, "app")
        assert (app.state.terminated.exit_code, app.state.terminated.reason) == (1, "Error")
        await node.wait_terminated(pod)
        await trio.sleep(30)
        assert restart_count(node.status(pod), "app") == 0
        sandboxes = await node.sim.list_pod_sandbox()
        assert all(s.state.name == "SANDBOX_NOTREADY" for s in sandboxes)  # killed: the sandbox is stopped


async def test_init_failure_under_never_fails_pod(autojump_clock: trio.testing.MockClock) -> None:
    async with open_sim_node() as node:
        (pod,) = await node.apply(
            pod_manifest(
                "init-fail", {"app": "run"}, init={"setup": "exit 2 after 1s"}, restart_policy="Never"
            )
        )
        status = await node.wait_for_phase(pod, "Failed")
        assert container_status(status, "setup").state.terminated.exit_code == 2
        app = container_status(status, "app")
        assert app.state.waiting is not None and app.state.waiting.reason == "PodInitializing"
        await node.wait_terminated(pod)
        names = {c.metadata.name for c in await node.sim.list_containers()}
        assert names == {"setup"}  # the regular container was never created


async def test_init_containers_run_in_order(autojump_clock: trio.testing.MockClock) -> None:
    async with open_sim_node() as node:
        (pod,) = await node.apply(
            pod_manifest(
                "ordered", {"app": "run"}, init={"first": "exit 0 after 3s", "second": "exit 0 after 2s"}
            )
        )
        status = await node.wait_for(pod, lambda s: s.phase == "Running" and is_running(s, "app"))
        first = container_status(status, "first").state.terminated
        second = container_status(status, "second").state.terminated
        app_started = parse_time(container_status(status, "app").state.running.started_at)
        assert parse_time(first.finished_at) <= parse_time(second.started_at)
        assert parse_time(second.finished_at) <= app_started
        assert parse_time(second.finished_at) - parse_time(first.started_at) >= 5
        assert {c.type: c.status for c in status.conditions or ()}["Initialized"] == "True"


async def test_sandbox_death_recreates_sandbox_with_next_attempt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_sim_node() as node:
        (pod,) = await node.apply(pod_manifest("sbx", {"app": "run"}))
        await node.wait_for(pod, lambda s: is_running(s, "app"))
        (sandbox,) = await node.sim.list_pod_sandbox()
        assert sandbox.metadata.attempt == 0
        node.sim.kill_sandbox_process(sandbox.id)
        status = await node.wait_for(pod, lambda s: is_running(s, "app") and restart_count(s, "app") == 1)
        ready = [s for s in await node.sim.list_pod_sandbox() if s.state.name == "SANDBOX_READY"]
        assert [s.metadata.attempt for s in ready] == [1]
        assert container_status(status, "app").last_state.terminated.exit_code == 137


async def test_delete_during_slow_pull_cancels_pull(autojump_clock: trio.testing.MockClock) -> None:
    slow = "registry.sim/huge:1"
    sim = SimRuntime(pull_delays={slow: 3600})
    async with open_sim_node(sim=sim) as node:
        (pod,) = await node.apply(pod_manifest("slow", {"app": "run"}, image=slow, grace=30))
        await trio.sleep(5)
        status = node.status(pod)
        assert status is not None and status.phase == "Pending"
        deleted_at = trio.current_time()
        await node.delete(pod, grace_period_seconds=30)
        await node.wait_terminated(pod)
        assert trio.current_time() - deleted_at <= 2  # the pull was cancelled, not waited for
        assert await sim.image_status(pb_image(slow)) is None
        assert await sim.list_containers() == []


def pb_image(ref: str) -> Any:
    from kubelet_trio.cri.gen.runtime import v1 as pb

    return pb.ImageSpec(image=ref)


async def test_changed_image_recreates_container(autojump_clock: trio.testing.MockClock) -> None:
    async with open_sim_node() as node:
        manifest = pod_manifest("img", {"app": "run"}, image="registry.sim/app:1")
        (pod,) = await node.apply(manifest)
        first = await node.wait_for(pod, lambda s: is_running(s, "app"))
        manifest["spec"]["containers"][0]["image"] = "registry.sim/app:2"
        (pod,) = await node.apply(manifest)
        status = await node.wait_for(
            pod, lambda s: is_running(s, "app") and container_status(s, "app").image == "registry.sim/app:2"
        )
        app = container_status(status, "app")
        assert app.restart_count == 1
        assert app.container_id != container_status(first, "app").container_id


async def test_failing_pod_does_not_affect_others(autojump_clock: trio.testing.MockClock) -> None:
    async with open_sim_node() as node:
        bad, good = await node.apply(
            pod_manifest("bad", {"app": "run"}, image="sim.invalid/missing:1"),
            pod_manifest("good", {"app": "run"}),
        )
        status = await node.wait_for(
            bad,
            lambda s: (
                container_status(s, "app").state.waiting is not None
                and container_status(s, "app").state.waiting.reason == "ImagePullBackOff"
            ),
        )
        assert status.phase == "Pending"
        good_status = await node.wait_for(good, lambda s: s.phase == "Running" and is_running(s, "app"))
        assert container_status(good_status, "app").ready is True
        await trio.sleep(600)
        assert is_running(node.status(good), "app")
        assert restart_count(node.status(good), "app") == 0
        reasons = {container_status(node.status(bad), "app").state.waiting.reason}
        assert reasons <= {"ErrImagePull", "ImagePullBackOff"}


async def test_a_removed_pod_leaves_no_failed_start_reason_behind(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The runtime manager's record of why a container did not start (Go's reasonCache) is per pod:
    housekeeping drops it once the pod is gone, so a node that churns failing pods does not grow."""
    async with open_sim_node() as node:
        (bad,) = await node.apply(pod_manifest("bad", {"app": "run"}, image="sim.invalid/missing:1"))
        await node.wait_for(
            bad,
            lambda s: (
                container_status(s, "app").state.waiting is not None
                and container_status(s, "app").state.waiting.reason == "ImagePullBackOff"
            ),
        )
        runtime = node.kubelet._kube_runtime
        assert set(runtime.reasons(bad.uid)) == {"app"}
        await node.remove(bad)
        await node.wait_terminated(bad)
        await trio.sleep(5)  # a few housekeeping periods
        assert runtime.reasons(bad.uid) == {}
        assert bad.uid not in runtime._reasons


async def test_graceful_delete_waits_for_grace_period(autojump_clock: trio.testing.MockClock) -> None:
    async with open_sim_node() as node:
        (pod,) = await node.apply(pod_manifest("stubborn", {"app": "ignore-sigterm"}, grace=7))
        await node.wait_for(pod, lambda s: is_running(s, "app"))
        deleted_at = node.kubelet.clock.wall_ns() / 1e9
        started = trio.current_time()
        await node.delete(pod)
        await node.wait_terminated(pod)
        app = container_status(node.status(pod), "app")
        assert app.state.terminated.exit_code == 137
        # SIGTERM is ignored, so SIGKILL comes 7 s after the kill, which starts at once; finishedAt has
        # whole seconds, so the deletion is compared at whole seconds too
        killed_after = parse_time(app.state.terminated.finished_at) - math.floor(deleted_at)
        assert 7 <= killed_after <= 8
        assert trio.current_time() - started <= 9  # + the relist the terminated-cleanup waits for


async def test_removed_pod_is_killed_and_cleaned_up(autojump_clock: trio.testing.MockClock) -> None:
    async with open_sim_node() as node:
        (pod,) = await node.apply(pod_manifest("gone", {"app": "run"}))
        await node.wait_for(pod, lambda s: is_running(s, "app"))
        await node.remove(pod)
        await node.wait_terminated(pod)
        await trio.sleep(61)  # container GC (every minute) collects the stopped sandbox and its containers
        assert await node.sim.list_containers() == []
        assert await node.sim.list_pod_sandbox() == []
        assert node.status(pod) is None


async def test_orphans_are_killed_by_housekeeping(autojump_clock: trio.testing.MockClock) -> None:
    sim = SimRuntime()
    async with open_sim_node(sim=sim) as node:
        (pod,) = await node.apply(pod_manifest("orphan", {"app": "run"}))
        await node.wait_for(pod, lambda s: is_running(s, "app"))
    # a new node process over the same runtime, where the pod no longer exists in config
    async with open_sim_node(sim=sim) as node:
        await trio.sleep(61)  # housekeeping kills the orphan at once; container GC removes it
        assert [c for c in await sim.list_containers() if c.state.name == "CONTAINER_RUNNING"] == []
        assert await sim.list_pod_sandbox() == []


async def test_new_kubelet_adopts_running_pods(autojump_clock: trio.testing.MockClock) -> None:
    sim = SimRuntime()
    async with open_sim_node(sim=sim) as node:
        pods = await node.apply(*(pod_manifest(f"p{i}", {"app": "run"}) for i in range(3)))
        (crash,) = await node.apply(pod_manifest("crash", {"app": "exit 1 after 1s"}))
        for pod in pods:
            await node.wait_for(pod, lambda s: is_running(s, "app"))
        await node.wait_for(crash, lambda s: restart_count(s, "app") >= 2)
        before = {
            c.id
            for c in await sim.list_containers()
            if c.state.name == "CONTAINER_RUNNING" and "p" in c.labels.get("io.kubernetes.pod.name", "")
        }
    async with open_sim_node(sim=sim) as node:
        await node.apply(
            *(pod_manifest(f"p{i}", {"app": "run"}) for i in range(3)),
            pod_manifest("crash", {"app": "exit 1 after 1s"}),
        )
        for pod in pods:
            status = await node.wait_for(pod, lambda s: is_running(s, "app"))
            assert restart_count(status, "app") == 0
        status = await node.wait_for(crash, lambda s: restart_count(s, "app") >= 3)
        after = {
            c.id
            for c in await sim.list_containers()
            if c.state.name == "CONTAINER_RUNNING" and "p" in c.labels.get("io.kubernetes.pod.name", "")
        }
        assert before <= after  # the same containers, not restarted


async def test_active_deadline_fails_pod(autojump_clock: trio.testing.MockClock) -> None:
    async with open_sim_node() as node:
        (pod,) = await node.apply(pod_manifest("deadline", {"app": "run"}, activeDeadlineSeconds=30))
        await node.wait_for(pod, lambda s: is_running(s, "app"))
        status = await node.wait_for_phase(pod, "Failed")
        assert (status.reason, status.message) == (
            "DeadlineExceeded",
            "Pod was active on the node longer than the specified deadline",
        )
        await node.wait_terminated(pod)
        assert not [c for c in await node.sim.list_containers() if c.state.name == "CONTAINER_RUNNING"]


async def test_dead_containers_pruned_to_one_per_container(autojump_clock: trio.testing.MockClock) -> None:
    async with open_sim_node() as node:
        (pod,) = await node.apply(pod_manifest("prune", {"app": "exit 1 after 1s"}))
        await node.wait_for(pod, lambda s: restart_count(s, "app") >= 4)
        await trio.sleep(3)
        exited = [c for c in await node.sim.list_containers() if c.state.name == "CONTAINER_EXITED"]
        assert len(exited) <= 1


async def test_a_deleted_pods_containers_are_removed_as_they_die(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Go's deletor removes every dead container of a deleted pod once its worker has terminated it,
    not a container GC period (60 s) later; a pod that stays keeps its newest dead instance."""
    async with open_sim_node() as node:
        gone, kept = await node.apply(
            pod_manifest("gone", {"app": "run", "side": "run"}),
            pod_manifest("kept", {"app": "exit 1 after 1s"}),
        )
        await node.wait_for(gone, lambda s: is_running(s, "app") and is_running(s, "side"))
        await node.wait_for(kept, lambda s: restart_count(s, "app") >= 1)
        await node.delete(gone, grace_period_seconds=0)
        await node.wait_terminated(gone)

        async def containers_of(pod: Pod) -> list[pb.Container]:
            return await node.sim.list_containers(pb.ContainerFilter(label_selector={POD_UID_LABEL: pod.uid}))

        await trio.sleep(5)  # the next relist or two, not the 60 s GC
        assert await containers_of(gone) == []
        assert await containers_of(kept)  # its newest dead instance at least


async def test_a_deleted_pods_containers_are_removed_when_it_ends_if_they_died_before(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A container seen dead while its pod was still terminating is kept by the deletor (the pod could
    yet run again); once the deleted pod's worker has terminated it, its dead containers go."""
    handle_pleg = Kubelet._handle_pleg

    def died_early(self: Kubelet, event: PodLifecycleEvent) -> None:  # every death seen before the end
        if event.type is PodLifecycleEventType.CONTAINER_DIED:
            event = attrs.evolve(event, type=PodLifecycleEventType.CONTAINER_CHANGED)
        handle_pleg(self, event)

    monkeypatch.setattr(Kubelet, "_handle_pleg", died_early)
    async with open_sim_node() as node:
        (pod,) = await node.apply(pod_manifest("gone", {"app": "run"}))
        await node.wait_for(pod, lambda s: is_running(s, "app"))
        await node.delete(pod, grace_period_seconds=0)
        await node.wait_terminated(pod)
        await trio.sleep(1)
        assert (
            await node.sim.list_containers(pb.ContainerFilter(label_selector={POD_UID_LABEL: pod.uid})) == []
        )


@attrs.define(eq=False, kw_only=True)
class SlowRemoveSim(SimRuntime):
    """RemoveContainer answers after 0.5 s (a loaded runtime); every call is recorded."""

    removals: list[str] = attrs.field(factory=list, init=False)

    async def remove_container(self, container_id: str) -> None:
        self.removals.append(container_id)
        await trio.sleep(0.5)
        await super().remove_container(container_id)


async def test_a_dead_container_is_removed_with_one_call_when_its_death_and_its_pods_end_come_together(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The deletor is asked for by each container's death and by the pod's end, while a removal runs:
    one removal per pod at a time, and each dead container is removed with one RemoveContainer."""
    sim = SlowRemoveSim()
    async with open_sim_node(sim=sim) as node:
        (pod,) = await node.apply(pod_manifest("gone", {"app": "run", "side": "run", "third": "run"}))
        await node.wait_for(pod, lambda s: all(is_running(s, c) for c in ("app", "side", "third")))
        await node.delete(pod, grace_period_seconds=0)
        await node.wait_terminated(pod)
        await trio.sleep(5)
        assert (
            await node.sim.list_containers(pb.ContainerFilter(label_selector={POD_UID_LABEL: pod.uid})) == []
        )
        assert len(sim.removals) == 3 and len(set(sim.removals)) == 3
        assert node.kubelet._dead_container_removals == {}


async def test_two_nodes_share_one_runtime(autojump_clock: trio.testing.MockClock) -> None:
    sim = SimRuntime()
    async with open_sim_node("node-a", sim=sim) as a, open_sim_node("node-b", sim=sim) as b:
        (pa,) = await a.apply(pod_manifest("pa", {"app": "run"}))
        (pb,) = await b.apply(pod_manifest("pb", {"app": "run"}))
        await a.wait_for(pa, lambda s: is_running(s, "app"))
        await b.wait_for(pb, lambda s: is_running(s, "app"))
        await trio.sleep(60)  # housekeeping on each node must leave the other's pods alone
        assert is_running(a.status(pa), "app") and restart_count(a.status(pa), "app") == 0
        assert is_running(b.status(pb), "app") and restart_count(b.status(pb), "app") == 0


__all__ = ["ContainerState", "Pod", "SimNode"]


async def test_back_off_entries_of_gone_pods_are_forgotten(autojump_clock: trio.testing.MockClock) -> None:
    """Go's housekeeping calls ``backOff.GC()``: an entry not updated for twice the maximum (10 min) goes,
    so a node that saw many crash-looping pods does not keep one entry per container forever."""
    async with open_sim_node() as node:
        (pod,) = await node.apply(pod_manifest("crash", {"app": "exit 1 after 5s"}))
        await node.wait_for(pod, lambda s: restart_count(s, "app") == 2)
        backoff = node.kubelet._kube_runtime.crash_backoff
        assert len(backoff) == 1
        await node.remove(pod)
        await node.wait_terminated(pod)
        await trio.sleep(599)
        assert len(backoff) == 1  # still within twice the maximum back-off
        await trio.sleep(5)  # the next housekeeping (every 2 s) after the 10 minutes
        assert len(backoff) == 0
