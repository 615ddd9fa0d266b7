"""ReopenContainerLog, the same on every runtime: a new file at the log path after a rotation renamed the
old one; refused for a container that does not run, NotFound for one that does not exist."""

from __future__ import annotations

import pytest
import trio

from kubelet_trio.cri import errors
from tests.contract.targets import EXIT_0, FOREVER, Target, eventually_status, exited, running


async def test_reopen_container_log(target: Target) -> None:
    rt = target.runtime
    sandbox_id, config = await target.new_sandbox({"app": FOREVER, "job": EXIT_0})
    cid = await target.new_container(sandbox_id, config, "app", FOREVER)
    status = await eventually_status(rt, cid, running)
    log = trio.Path(status.log_path)
    rotated = trio.Path(status.log_path + ".20240501-100000")
    await log.rename(rotated)
    assert not await log.exists()
    await rt.reopen_container_log(cid)
    assert await log.exists() and await rotated.exists()

    job = await target.new_container(sandbox_id, config, "job", EXIT_0)
    await eventually_status(rt, job, exited)
    with pytest.raises(errors.CriError, match="container is not running"):
        await rt.reopen_container_log(job)
    with pytest.raises(errors.NotFoundError):
        await rt.reopen_container_log("f" * 64)
