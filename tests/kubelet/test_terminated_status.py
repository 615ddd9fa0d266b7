"""The status a finished pod is left with, on SimRuntime under MockClock: the one written after its pod
worker's terminated cleanup (Go ``SyncTerminatedPod`` → ``TerminatePod``), not only the first Failed one."""

from __future__ import annotations

import trio
import trio.testing

from kubelet_trio.api import PodStatus
from kubelet_trio.testing.node import SimNode, open_sim_node
from kubelet_trio.testing.pods import container_status, pod_manifest


async def final_status(node: SimNode, manifest: dict[str, object]) -> PodStatus:
    (pod,) = await node.apply(manifest)
    await node.wait_for_phase(pod, "Failed", "Succeeded")
    await node.wait_terminated(pod)
    await trio.sleep(30)  # sync ticks and relists after the worker finished rewrite nothing
    status = node.status(pod)
    assert status is not None
    return status


async def test_never_pod_whose_init_container_fails(autojump_clock: trio.testing.MockClock) -> None:
    """The app container never ran: it stays waiting with PodInitializing (Go 1.24 and 1.33 alike)."""
    async with open_sim_node() as node:
        manifest = pod_manifest(
            "init-fails", {"app": "run"}, init={"setup": "exit 1 after 1s"}, restart_policy="Never"
        )
        status = await final_status(node, manifest)
        assert status.phase == "Failed"
        setup = container_status(status, "setup")
        assert setup.state.terminated is not None
        assert (setup.state.terminated.exit_code, setup.state.terminated.reason) == (1, "Error")
        assert setup.state.terminated.container_id and setup.restart_count == 0
        app = container_status(status, "app")
        assert app.state.terminated is None and app.state.running is None
        assert app.state.waiting is not None and app.state.waiting.reason == "PodInitializing"
        assert app.restart_count == 0 and app.ready is False
        initialized = {c.type: (c.status, c.reason, c.message) for c in status.conditions or ()}[
            "Initialized"
        ]
        assert initialized == (
            "False",
            "ContainersNotInitialized",
            "containers with incomplete status: [setup]",
        )


async def test_init_containers_after_the_failed_one_keep_waiting(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_sim_node() as node:
        manifest = pod_manifest(
            "second-fails",
            {"app": "run"},
            init={"first": "exit 0 after 1s", "second": "exit 1 after 1s", "third": "exit 0 after 1s"},
            restart_policy="Never",
        )
        status = await final_status(node, manifest)
        assert status.phase == "Failed"
        first, second, third = status.init_container_statuses or ()
        assert first.state.terminated is not None and first.state.terminated.exit_code == 0
        assert second.state.terminated is not None and second.state.terminated.exit_code == 1
        assert third.state.waiting is not None and third.state.waiting.reason == "PodInitializing"
        assert container_status(status, "app").state.waiting.reason == "PodInitializing"
        names = {c.metadata.name for c in await node.sim.list_containers()}
        assert names == {"first", "second"}
