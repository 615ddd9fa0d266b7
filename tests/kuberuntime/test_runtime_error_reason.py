"""A runtime error always says why: an exception whose ``str()`` is empty (``trio.TooSlowError()`` from
the status call's deadline, a bare ``ConnectionError``) is named by its type, in the runtime status
loop's message and in the daemon's last line."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from trio.testing import MockClock

from kubelet_trio.cmd import kubelet as cmd_kubelet
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.logs import error_text
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.testing.node import open_sim_node


async def _hangs(self: SimRuntime, verbose: bool = False) -> pb.StatusResponse:
    await trio.sleep_forever()
    raise AssertionError("unreachable")


async def _refused(self: SimRuntime, verbose: bool = False) -> pb.StatusResponse:
    raise ConnectionError()


@pytest.mark.parametrize(
    ("status", "reason"), [(_hangs, "TooSlowError"), (_refused, "ConnectionError")], ids=["hangs", "bare"]
)
async def test_runtime_down_names_the_exception_when_its_text_is_empty(
    autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch, status: object, reason: str
) -> None:
    async with open_sim_node() as node:
        assert node.kubelet.runtime_error is None
        monkeypatch.setattr(SimRuntime, "status", status)
        await trio.sleep(11)  # the next status call (every 5 s), and its 5 s deadline
        assert node.kubelet.runtime_error == f"container runtime is down: {reason}"


def test_error_text() -> None:
    assert error_text(trio.TooSlowError()) == "TooSlowError"
    assert error_text(ConnectionError()) == "ConnectionError"
    assert error_text(RuntimeError("test outage")) == "test outage"


def test_the_daemon_names_a_failure_without_text(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    async def fails(*args: object) -> int:
        raise ConnectionError()

    monkeypatch.setattr(cmd_kubelet, "serve", fails)
    argv = ["--runtime", "sim", "--pod-manifest-path", str(tmp_path), "--root-dir", str(tmp_path / "root")]
    assert cmd_kubelet.main(argv) == 1
    assert capsys.readouterr().err.splitlines()[-1] == "kubelet-trio: ConnectionError"
