"""The simulated runtime's log writer: CRI records as containerd writes them, the file it holds open,
and ReopenContainerLog."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio.testing

from kubelet_trio.cri import errors
from kubelet_trio.fsio import run_inline
from kubelet_trio.sim.logwriter import cri_records
from kubelet_trio.sim.runtime import SimRuntime
from tests.sim.pods import IMAGE, WALL_START_NS, Pods

STAMP = "2023-11-14T22:13:20.123456Z"


@pytest.fixture
async def pods(tmp_path: Path) -> Pods:
    sim = SimRuntime(preloaded_images=[IMAGE], wall_clock_start_ns=WALL_START_NS, run_sync=run_inline)
    return Pods(sim, tmp_path / "logs")


def test_records() -> None:
    assert (
        cri_records("a\nb\n", "stdout", WALL_START_NS) == f"{STAMP} stdout F a\n{STAMP} stdout F b\n".encode()
    )
    assert (
        cri_records("a\nDONE", "stderr", WALL_START_NS)
        == f"{STAMP} stderr F a\n{STAMP} stderr P DONE\n".encode()
    )
    assert cri_records("", "stdout", WALL_START_NS) == b""


async def test_write_log_appends_records(autojump_clock: trio.testing.MockClock, pods: Pods) -> None:
    sandbox_id, config = await pods.sandbox({"app": 'print "hello"; run'})
    cid = await pods.container(sandbox_id, config, "app")
    log = Path(config.log_directory) / "app" / "0.log"
    await trio.sleep(1.5)
    await pods.sim.write_log(cid, "value-1")
    await pods.sim.write_log(cid, "oops\n", stream="stderr")
    assert log.read_text() == (
        f"{STAMP} stdout F hello\n"
        "2023-11-14T22:13:21.623456Z stdout P value-1\n"
        "2023-11-14T22:13:21.623456Z stderr F oops\n"
    )


async def test_the_open_file_is_followed_until_reopened(
    autojump_clock: trio.testing.MockClock, pods: Pods
) -> None:
    sandbox_id, config = await pods.sandbox({"app": "run"})
    cid = await pods.container(sandbox_id, config, "app")
    log = Path(config.log_directory) / "app" / "0.log"
    rotated = log.with_name("0.log.20231114-221320")
    os.rename(log, rotated)
    await pods.sim.write_log(cid, "to the renamed file\n")
    assert not log.exists() and rotated.read_text().endswith(" stdout F to the renamed file\n")
    await pods.sim.reopen_container_log(cid)
    assert log.read_text() == ""
    await pods.sim.write_log(cid, "to the new file\n")
    assert log.read_text().endswith(" stdout F to the new file\n")
    assert rotated.read_text().count("\n") == 1
    log.unlink()
    await pods.sim.write_log(cid, "lost\n")  # a deleted file, as for an open descriptor on it
    assert not log.exists() and os.listdir(log.parent) == [rotated.name]


async def test_reopen_and_write_need_a_running_container(
    autojump_clock: trio.testing.MockClock, pods: Pods
) -> None:
    sandbox_id, config = await pods.sandbox({"app": "exit 1 after 1s"})
    cid = await pods.container(sandbox_id, config, "app")
    await trio.sleep(1)
    with pytest.raises(errors.CriCallError, match="container is not running"):
        await pods.sim.reopen_container_log(cid)
    with pytest.raises(errors.CriCallError, match="is not running"):
        await pods.sim.write_log(cid, "too late\n")
    with pytest.raises(errors.NotFoundError, match="not found"):
        await pods.sim.reopen_container_log("f" * 64)
