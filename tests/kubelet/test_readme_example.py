"""The embedding example of the README, kept honest."""

from __future__ import annotations

import trio
import trio.testing

from kubelet_trio.testing.node import open_sim_node


async def test_readme_embedding_example(autojump_clock: trio.testing.MockClock) -> None:
    async with open_sim_node("node-1") as node:
        (pod,) = await node.apply(
            {
                "metadata": {"name": "web", "annotations": {"sim.kubelet-trio.io/app": "exit 1 after 5s"}},
                "spec": {"containers": [{"name": "app", "image": "registry.sim/app:1"}]},
            }
        )
        status = await node.wait_for(
            pod, lambda s: bool(s.container_statuses) and s.container_statuses[0].restart_count == 3
        )
        assert status.phase == "Running"
        # three runs of 5 s and backoffs of 0 + 10 + 20 s, then the third restart is reported one relist later
        assert 45 <= trio.current_time() <= 47
