"""UpdateContainerResources (in-place resize): the runtime applies the new CPU and memory to a running
container and reports them in its status, on every runtime implementation."""

from __future__ import annotations

import trio

from kubelet_trio.cri.gen.runtime import v1 as pb
from tests.contract.targets import FOREVER, Target, eventually_status, running


async def test_update_container_resources_is_reported_in_the_status(target: Target) -> None:
    sandbox_id, config = await target.new_sandbox({"app": FOREVER})
    cid = await target.new_container(sandbox_id, config, "app", FOREVER)
    await eventually_status(target.runtime, cid, running)
    wanted = pb.LinuxContainerResources(
        cpu_period=100000, cpu_quota=50000, cpu_shares=512, memory_limit_in_bytes=64 * 1024 * 1024
    )
    with trio.fail_after(30):
        await target.runtime.update_container_resources(cid, wanted)
    status = (await target.runtime.container_status(cid)).status
    assert status is not None and status.resources is not None and status.resources.linux is not None
    linux = status.resources.linux
    assert (linux.cpu_period, linux.cpu_quota, linux.cpu_shares, linux.memory_limit_in_bytes) == (
        100000,
        50000,
        512,
        64 * 1024 * 1024,
    )
    assert running(status)
