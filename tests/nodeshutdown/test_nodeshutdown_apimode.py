"""Graceful node shutdown in API server mode (SimRuntime + the in-process fake API, MockClock): the Node's
Ready condition turns False with Go's message, a NodeShutdown event is posted on the Node, and the pod's
status on the API server is Failed with reason ``Terminated``."""

from __future__ import annotations

import trio
import trio.testing

from kubelet_trio.clock import WallClock
from kubelet_trio.nodeshutdown import NODE_SHUTDOWN_MESSAGE, NODE_SHUTDOWN_REASON
from kubelet_trio.testing.apinode import open_api_node
from kubelet_trio.testing.fakeapi import open_fake_api


async def test_node_not_ready_and_pods_failed_on_the_api_server(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = WallClock()
    async with (
        open_fake_api(now=clock.now) as api,
        open_api_node(
            api, clock=clock, shutdown_grace_period=10.0, shutdown_grace_period_critical_pods=2.0
        ) as node,
    ):
        api.create_pod(
            {
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {
                    "nodeName": "node-1",
                    "containers": [{"name": "app", "image": "registry.sim/app:1"}],
                },
            }
        )
        await api.wait_for(lambda: api.pod("web").get("status", {}).get("phase") == "Running")
        await node.kubelet._shutdown_manager.shutdown()
        await trio.sleep(11)  # the next node status update (nodeStatusUpdateFrequency 10 s)

        ready = {c["type"]: c for c in api.node("node-1")["status"]["conditions"]}["Ready"]
        assert (ready["status"], ready["reason"], ready["message"]) == (
            "False",
            "KubeletNotReady",
            "node is shutting down",
        )
        status = api.pod("web")["status"]
        assert (status["phase"], status["reason"], status["message"]) == (
            "Failed",
            NODE_SHUTDOWN_REASON,
            NODE_SHUTDOWN_MESSAGE,
        )
        node_events = [
            (e["type"], e["reason"], e["message"])
            for e in api.events("default")
            if e["involvedObject"]["kind"] == "Node" and e["reason"] == "NodeShutdown"
        ]
        assert node_events == [("Normal", "NodeShutdown", "Shutdown manager detected shutdown event")]
