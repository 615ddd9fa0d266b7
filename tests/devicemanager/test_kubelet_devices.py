"""A node with device plugins on the simulated runtime: the plugin's answer reaches CreateContainer, and
a pod asking for more devices than are free is rejected with Go's reason and message."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import trio

from kubelet_trio.cm.devicemanager.sim import SimDevicePlugin
from kubelet_trio.testing.node import open_sim_node

WIDGET = "example.com/widget"


def manifest(name: str, count: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "busybox",
                    "env": [{"name": "OWN", "value": "1"}],
                    "resources": {"limits": {WIDGET: str(count)}},
                }
            ]
        },
    }


async def test_devices_reach_the_container_and_admission_rejects(tmp_path: Path) -> None:
    with trio.fail_after(20):
        async with open_sim_node(root_dir=str(tmp_path), device_plugins=True) as node:
            manager = node.kubelet._device_manager
            assert manager is not None
            async with trio.open_nursery() as nursery:
                plugin = SimDevicePlugin.with_devices(WIDGET, manager.plugin_dir, 3)
                await nursery.start(plugin.run)
                while node.kubelet.extended_resources() != ({WIDGET: "3"}, {WIDGET: "3"}):
                    await manager.generation.wait_value(
                        functools.partial(int.__lt__, manager.generation.value)
                    )

                (first,) = await node.apply(manifest("first", 2))
                await node.wait_for_phase(first, "Running")
                (container,) = await node.sim.list_containers()  # type: ignore[attr-defined]
                config = node.sim.container_config(container.id)  # type: ignore[attr-defined]
                envs = {e.key: e.value for e in config.envs}
                assert envs["WIDGETS"] == "dev-0,dev-1" and envs["OWN"] == "1"
                assert {m.container_path for m in config.mounts} >= {"/dev-info/dev-0", "/dev-info/dev-1"}

                (second,) = await node.apply(manifest("first", 2) | {"metadata": {"name": "second"}})
                status = await node.wait_for_phase(second, "Failed")
                assert status.reason == "UnexpectedAdmissionError"
                assert status.message == (
                    "Pod was rejected: Allocate failed due to requested number of devices unavailable for "
                    "example.com/widget. Requested: 2, Available: 1, which is unexpected"
                )
                nursery.cancel_scope.cancel()
