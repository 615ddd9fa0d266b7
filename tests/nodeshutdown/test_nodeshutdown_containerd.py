"""Graceful node shutdown on real containerd, triggered the documented way (``kubelet-trio shutdown-node``
in a subprocess, through the kubelet's socket): three pods of different priority stop in order, each
within its budget (shutdownGracePeriod 20 s, 6 s of it for critical pods), are Failed with reason
``Terminated``, the node reports "node is shutting down" and admits no new pod.

The containers run ``sleep`` as PID 1, which ignores SIGTERM, so each is stopped by SIGKILL at the end of
its grace period: ``low`` (priority 0, terminationGracePeriodSeconds 3) after 3 s, ``mid`` (priority 1000,
60 s capped to the non-critical budget of 14 s) after 14 s, ``crit`` (system-critical priority, 60 s
capped to 6 s) 6 s after the non-critical group's budget is spent. Priorities are set in the manifests
(standalone: no PriorityClass to resolve). Real clock, real processes.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet_trio.api import Pod
from kubelet_trio.cri.remote import open_cri_runtime
from kubelet_trio.nodeshutdown import NODE_SHUTDOWN_MESSAGE, NODE_SHUTDOWN_REASON, SHUTTING_DOWN, socket_path
from kubelet_trio.nodeshutdown.manager import SYSTEM_CRITICAL_PRIORITY
from kubelet_trio.testing.env import LocalCriEnvironment, remove_all_pods
from kubelet_trio.testing.node import SimNode, open_node

pytestmark = pytest.mark.containerd

NODE = "shutdown-node"
SLACK = 1.5  # to notice the kill (one relist) and for runc to report the exit


@pytest.fixture
async def node(cri_env: LocalCriEnvironment) -> AsyncIterator[SimNode]:
    try:
        async with (
            open_cri_runtime(cri_env.endpoint, request_timeout=30) as runtime,
            open_node(
                runtime, NODE, shutdown_grace_period=20.0, shutdown_grace_period_critical_pods=6.0
            ) as node,
        ):
            yield node
    finally:
        with trio.move_on_after(60, shield=True):
            await remove_all_pods(cri_env.endpoint, NODE)


def manifest(cri_env: LocalCriEnvironment, name: str, priority: int, grace: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "priority": priority,
            "terminationGracePeriodSeconds": grace,
            "containers": [{"name": "app", "image": cri_env.images.busybox, "command": ["sleep", "3600"]}],
        },
    }


async def finished_at(node: SimNode, pod: Pod) -> tuple[float, int]:
    """(Trio time, exit code) of the pod's container, from the runtime's finishedAt (ns)."""
    status = await node.kubelet._kube_runtime.get_pod_status(pod.uid, pod.name, pod.namespace)
    container = status.find("app")
    assert container is not None and container.finished_at
    return node.kubelet.clock.to_trio(container.finished_at), container.exit_code


async def test_three_pods_stop_in_priority_order_within_their_budgets(
    node: SimNode, cri_env: LocalCriEnvironment
) -> None:
    low, mid, crit = await node.apply(
        manifest(cri_env, "low", 0, 3),
        manifest(cri_env, "mid", 1000, 60),
        manifest(cri_env, "crit", SYSTEM_CRITICAL_PRIORITY, 60),
    )
    for pod in (low, mid, crit):
        await node.wait_for_phase(pod, "Running")
    kubelet = node.kubelet
    assert kubelet.health_errors() == []

    start = trio.current_time()
    command = [sys.executable, "-m", "kubelet_trio", "shutdown-node", "--root-dir", kubelet.config.root_dir]
    done = await trio.run_process(command, capture_stdout=True, capture_stderr=True, check=False)
    assert (done.returncode, done.stdout.decode().splitlines()) == (0, ["shutting down", "done"]), done.stderr
    assert socket_path(kubelet.config.root_dir).startswith(kubelet.config.root_dir)
    [(low_priority, non_critical_start), (critical_priority, critical_start)] = (
        kubelet._shutdown_manager.group_starts
    )
    assert (low_priority, critical_priority) == (0, SYSTEM_CRITICAL_PRIORITY)
    assert (
        start <= non_critical_start and non_critical_start + 14 <= critical_start <= non_critical_start + 14.5
    )

    for pod in (low, mid, crit):
        await node.wait_terminated(pod)
        status = await node.wait_for_phase(pod, "Failed")
        assert (status.reason, status.message) == (NODE_SHUTDOWN_REASON, NODE_SHUTDOWN_MESSAGE)
    (low_end, low_code), (mid_end, mid_code) = await finished_at(node, low), await finished_at(node, mid)
    crit_end, crit_code = await finished_at(node, crit)
    assert low_end < mid_end < crit_end  # in priority order
    assert (low_code, mid_code, crit_code) == (137, 137, 137)  # sleep ignores SIGTERM: SIGKILL at the grace
    assert non_critical_start + 3 <= low_end <= non_critical_start + 3 + SLACK  # its own grace period
    assert non_critical_start + 14 <= mid_end <= non_critical_start + 14 + SLACK  # the non-critical budget
    assert critical_start + 6 <= crit_end <= critical_start + 6 + SLACK  # the critical budget

    assert kubelet.health_errors() == [SHUTTING_DOWN]  # the Ready condition's message in API mode
    [late] = await node.apply(manifest(cri_env, "late", 0, 1))
    assert (await node.wait_for_phase(late, "Failed")).reason == "NodeShutdown"


def test_shutdown_node_without_a_kubelet_fails_naming_the_socket(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kubelet_trio", "shutdown-node", "--root-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert f"no kubelet listens on {tmp_path}/nodeshutdown.sock" in done.stderr
    assert "shutdownGracePeriod" in done.stderr
