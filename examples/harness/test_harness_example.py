"""A worked example of the kubelet-trio pytest plugin: kubelet behaviour checked in milliseconds.

``sim_node`` starts nodes on the simulated runtime; containers behave as the scripts in their pod's
``sim.kubelet-trio.io/<container>`` annotations say (``run``, ``exit 1 after 5s``, ``ignore-sigterm``...).
With pytest-trio's ``autojump_clock`` the node's timers (restart back-off, probes, grace periods) run
on a virtual clock. ``fake_apiserver`` and ``api_node`` do the same with a node in API-server mode.
"""

from __future__ import annotations

import trio

from kubelet_trio.api import PodStatus
from kubelet_trio.testing.fakeapi import ServedFakeApi
from kubelet_trio.testing.pods import container_status, is_running, pod_manifest
from kubelet_trio.testing.pytest_plugin import ApiNodeFactory, SimNodeFactory


def restarts(status: PodStatus) -> int:
    return container_status(status).restart_count or 0


def exit_code(status: PodStatus | None, *, last: bool = False) -> int | None:
    """The app container's exit code: of its current state, or of its previous run (``last``)."""
    if status is None:
        return None
    container = container_status(status)
    state = container.last_state if last else container.state
    return state.terminated.exit_code if state is not None and state.terminated is not None else None


async def test_a_crashing_container_backs_off_exponentially(
    sim_node: SimNodeFactory, autojump_clock: trio.testing.MockClock
) -> None:
    node = await sim_node("node-1")
    [pod] = await node.apply(pod_manifest("crasher", {"app": "exit 1 after 1s"}))
    start = trio.current_time()
    status = await node.wait_for(pod, lambda s: restarts(s) >= 4)
    # The kubelet's crash-loop back-off: 10 s, 20 s, 40 s between restarts (plus 1 s of running each).
    assert trio.current_time() - start >= 10 + 20 + 40
    assert exit_code(status, last=True) == 1


async def test_readiness_follows_the_probe(
    sim_node: SimNodeFactory, autojump_clock: trio.testing.MockClock
) -> None:
    node = await sim_node("node-1")
    probe = {"exec": {"command": ["cat", "/tmp/ready"]}, "periodSeconds": 5}
    manifest = pod_manifest("web", {"app": 'exec cat /tmp/ready -> 0 "ok"'})
    manifest["spec"]["containers"][0]["readinessProbe"] = probe
    [pod] = await node.apply(manifest)
    status = await node.wait_for(pod, lambda s: bool(container_status(s).ready))
    assert status.phase == "Running"


async def test_graceful_deletion_waits_for_a_container_that_ignores_sigterm(
    sim_node: SimNodeFactory, autojump_clock: trio.testing.MockClock
) -> None:
    node = await sim_node("node-1")
    [pod] = await node.apply(pod_manifest("stubborn", {"app": "ignore-sigterm"}, grace=30))
    await node.wait_for(pod, is_running)
    start = trio.current_time()
    await node.delete(pod, grace_period_seconds=30)
    await node.wait_terminated(pod)
    assert trio.current_time() - start >= 30  # the whole grace period, then SIGKILL
    assert exit_code(node.status(pod)) == 137


async def test_a_pod_bound_through_the_api_server_runs(
    fake_apiserver: ServedFakeApi, api_node: ApiNodeFactory, autojump_clock: trio.testing.MockClock
) -> None:
    await api_node("node-1")
    fake_apiserver.seed_namespace()
    fake_apiserver.create_pod(pod_manifest("web", {"app": "run"}, node="node-1"))
    with trio.fail_after(60):
        await fake_apiserver.wait_for(
            lambda: fake_apiserver.pod("web").get("status", {}).get("phase") == "Running"
        )
    node = fake_apiserver.node("node-1")
    assert node["status"]["nodeInfo"]["kubeletVersion"].startswith("v1.")
    assert fake_apiserver.kubeconfig.exists()  # for kubectl and other clients: fake_apiserver.url
