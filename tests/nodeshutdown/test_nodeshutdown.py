"""Graceful node shutdown (Go ``nodeshutdown_manager_linux.go``) under MockClock: the priority groups, the
order and budgets, pod status, the Node's Ready error, admission, and that stopping the kubelet is not a
node shutdown."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing
from trio.testing import MockClock

from kubelet_trio.api import Pod
from kubelet_trio.nodeshutdown import (
    NODE_SHUTDOWN_MESSAGE,
    NODE_SHUTDOWN_REASON,
    SHUTTING_DOWN,
    NodeShutdownManager,
    PriorityGroup,
    group_by_priority,
    migrate_config,
)
from kubelet_trio.nodeshutdown.manager import SYSTEM_CRITICAL_PRIORITY
from kubelet_trio.testing.node import SimNode, as_pod, open_sim_node
from kubelet_trio.testing.pods import container_status, is_running, pod_manifest

CRITICAL = SYSTEM_CRITICAL_PRIORITY


def prio_pod(
    name: str, priority: int | None, grace: int | None = None, script: str = "ignore-sigterm"
) -> Pod:
    extra: dict[str, Any] = {} if priority is None else {"priority": priority}
    return as_pod(pod_manifest(name, {"app": script}, grace=grace, **extra))


def test_migrate_config_as_go() -> None:
    assert migrate_config(30, 10) == [PriorityGroup(0, 20), PriorityGroup(CRITICAL, 10)]
    assert migrate_config(30, 0) == [PriorityGroup(0, 30), PriorityGroup(CRITICAL, 0)]
    assert migrate_config(0, 0) == []  # off
    assert migrate_config(10, 20) == []  # critical more than the whole: off, as Go


def test_group_by_priority() -> None:
    groups = [PriorityGroup(0, 20), PriorityGroup(1000, 5), PriorityGroup(CRITICAL, 10)]
    pods = [prio_pod("none", None), prio_pod("neg", -5), prio_pod("mid", 1000), prio_pod("hi", 1001)]
    pods += [prio_pod("crit", CRITICAL), prio_pod("above", CRITICAL + 1)]
    members = [[p.name for p in group] for group in group_by_priority(groups, pods)]
    # the highest group at or below the pod's priority; below all: the lowest
    assert members == [["none", "neg"], ["mid", "hi"], ["crit", "above"]]


@attrs.define
class FakeTerminator:
    """Takes ``durations[name]`` seconds to stop a pod; records (start, name, grace, end)."""

    durations: dict[str, float]
    calls: list[tuple[float, str, int, float]] = attrs.Factory(list)

    async def terminate_pod_abnormally(
        self, pod: Pod, *, grace_period: int, reason: str, message: str
    ) -> None:
        assert (reason, message) == (NODE_SHUTDOWN_REASON, NODE_SHUTDOWN_MESSAGE)
        start = trio.current_time()
        await trio.sleep(min(self.durations[pod.name], grace_period))
        self.calls.append((start, pod.name, grace_period, trio.current_time()))


async def test_groups_run_lowest_priority_first_within_their_budgets(
    autojump_clock: MockClock, nursery: trio.Nursery
) -> None:
    pods = [
        prio_pod("slow", 0, grace=60),  # capped to the group's 20 s
        prio_pod("quick", 10, grace=3),  # its own shorter grace period
        prio_pod("crit", CRITICAL, grace=60),  # capped to 10 s
    ]
    terminator = FakeTerminator({"slow": 100, "quick": 1, "crit": 100})
    events: list[tuple[str, str, str]] = []
    manager = NodeShutdownManager.from_settings(
        30, 10, active_pods=lambda: pods, terminator=terminator, events=lambda *e: events.append(e)
    )
    await nursery.start(manager.run)
    await trio.sleep(5)
    assert manager.shutdown_status() is None
    await manager.shutdown()
    assert trio.current_time() == 5 + 20 + 10
    await trio.testing.wait_all_tasks_blocked()
    assert manager.shutdown_status() == SHUTTING_DOWN
    assert manager.group_starts == [(0, 5.0), (CRITICAL, 25.0)]
    assert sorted(terminator.calls) == [
        (5.0, "quick", 3, 6.0),
        (5.0, "slow", 20, 25.0),
        (25.0, "crit", 10, 35.0),
    ]
    assert events == [("Normal", "NodeShutdown", "Shutdown manager detected shutdown event")]
    rejected = manager.admit(prio_pod("late", 0))
    assert rejected is not None
    assert (rejected.reason, rejected.message) == (
        "NodeShutdown",
        "Pod was rejected as the node is shutting down.",
    )


async def test_a_group_that_finishes_early_lets_the_next_start(
    autojump_clock: MockClock, nursery: trio.Nursery
) -> None:
    pods = [prio_pod("a", 0, grace=30), prio_pod("crit", CRITICAL, grace=30)]
    terminator = FakeTerminator({"a": 4, "crit": 2})
    manager = NodeShutdownManager.from_settings(30, 10, active_pods=lambda: pods, terminator=terminator)
    await nursery.start(manager.run)
    await manager.shutdown()
    assert manager.group_starts == [(0, 0.0), (CRITICAL, 4.0)]
    assert trio.current_time() == 6.0
    # a second trigger waits for (and does not repeat) the first
    await manager.shutdown()
    assert len(terminator.calls) == 2


async def test_empty_groups_are_not_waited_for(autojump_clock: MockClock, nursery: trio.Nursery) -> None:
    terminator = FakeTerminator({"crit": 1})
    pods = [prio_pod("crit", CRITICAL)]
    manager = NodeShutdownManager.from_settings(30, 10, active_pods=lambda: pods, terminator=terminator)
    await nursery.start(manager.run)
    await manager.shutdown()
    assert manager.group_starts == [(CRITICAL, 0.0)] and trio.current_time() == 1.0


# -- on a node ------------------------------------------------------------------------------------------


async def finished_at(node: SimNode, pod: Pod) -> float:
    """The Trio time the pod's container finished (the runtime's finishedAt, in ns)."""
    status = await node.kubelet._kube_runtime.get_pod_status(pod.uid, pod.name, pod.namespace)
    container = status.find("app")
    assert container is not None and container.finished_at
    return node.kubelet.clock.to_trio(container.finished_at)


async def test_node_shutdown_stops_pods_by_priority_and_fails_them(autojump_clock: MockClock) -> None:
    async with open_sim_node(shutdown_grace_period=30.0, shutdown_grace_period_critical_pods=10.0) as node:
        low = prio_pod("low", None, grace=60)  # SIGTERM ignored: stopped by SIGKILL at its capped grace
        mid = prio_pod("mid", 1000, grace=5)
        crit = prio_pod("crit", CRITICAL, grace=60)
        await node.apply(low, mid, crit)
        for pod in (low, mid, crit):
            await node.wait_for(pod, is_running)
        kubelet = node.kubelet
        assert kubelet.health_errors() == []
        start = trio.current_time()
        await kubelet._shutdown_manager.shutdown()
        assert kubelet._shutdown_manager.group_starts[0] == (0, start)
        critical_start = kubelet._shutdown_manager.group_starts[1][1]
        assert start + 20 <= critical_start <= start + 22
        for pod in (low, mid, crit):
            await node.wait_terminated(pod)
            status = await node.wait_for_phase(pod, "Failed")
            assert (status.reason, status.message) == (NODE_SHUTDOWN_REASON, NODE_SHUTDOWN_MESSAGE)
            assert any(c.type == "DisruptionTarget" and c.status == "True" for c in status.conditions or ())
        # in order, each within its budget (a relist period of slack to notice the kill)
        assert start + 5 <= await finished_at(node, mid) <= start + 6
        assert start + 20 <= await finished_at(node, low) <= start + 21
        assert critical_start + 10 <= await finished_at(node, crit) <= critical_start + 11
        crit_status = node.status(crit)
        assert crit_status is not None
        state = container_status(crit_status).state
        assert state is not None and state.terminated is not None and state.terminated.exit_code == 137
        assert kubelet.health_errors() == [SHUTTING_DOWN]
        [late] = await node.apply(prio_pod("late", 0))
        status = await node.wait_for_phase(late, "Failed")
        assert status.reason == "NodeShutdown"


async def test_stopping_the_kubelet_is_not_a_node_shutdown(autojump_clock: MockClock) -> None:
    async with open_sim_node(shutdown_grace_period=30.0) as node:
        [pod] = await node.apply(prio_pod("web", None))
        await node.wait_for(pod, is_running)
        sim = node.sim
    # the kubelet is gone (cancelled, as SIGTERM does): its pod still runs
    containers = await sim.list_containers()
    assert [c.state.name for c in containers] == ["CONTAINER_RUNNING"]


async def test_without_a_grace_period_there_is_no_shutdown_manager(autojump_clock: MockClock) -> None:
    async with open_sim_node() as node:
        assert not node.kubelet._shutdown_manager.enabled


@pytest.mark.parametrize("period", [0.0, 30.0])
async def test_shutdown_settings_reach_the_manager(autojump_clock: MockClock, period: float) -> None:
    async with open_sim_node(shutdown_grace_period=period, shutdown_grace_period_critical_pods=0.0) as node:
        assert node.kubelet._shutdown_manager.groups == tuple(migrate_config(period, 0.0))
