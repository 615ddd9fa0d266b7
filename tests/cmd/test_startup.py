"""Start-up is bounded and says what it waits for; SIGTERM stops it at any point.

A real ``kubelet-trio`` against a CRI socket that accepts connections and never answers: SIGTERM during
start-up ends it at once (status 0, pods left as they are), its log naming what start-up was waiting
for. Under MockClock: the runtime is asked again with backoff, each wait is reported at doubling
intervals, and start-up gives up at the runtime's deadline naming the endpoint and the last error."""

from __future__ import annotations

import json
import logging
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import trio
from trio.testing import MockClock

from kubelet_trio.cmd.kubelet import StartUp, StartupTimeout, wait_for_runtime
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.logs import FIELDS_ATTR

STOP_WITHIN = 15.0


@pytest.fixture
def silent_cri(tmp_path: Path) -> Iterator[Path]:
    """A unix socket that accepts connections (the kernel's backlog) and never answers a byte."""
    path = tmp_path / "cri.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen(64)
        yield path


def json_lines(log: Path) -> list[dict[str, Any]]:
    lines = []
    for line in log.read_text().splitlines():
        try:
            lines.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return lines


def test_sigterm_during_startup_against_a_silent_runtime_stops_the_daemon(
    tmp_path: Path, silent_cri: Path
) -> None:
    (tmp_path / "manifests").mkdir()
    log = tmp_path / "daemon.log"
    endpoint = f"unix://{silent_cri}"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kubelet_trio",
             "--runtime", "cri", "--container-runtime-endpoint", endpoint,
             "--pod-manifest-path", str(tmp_path / "manifests"), "--root-dir", str(tmp_path / "root"),
             "--pod-logs-dir", str(tmp_path / "logs"), "--hostname-override", "startup-sig",
             "--node-ip", "192.0.2.7", "--port", "0", "--healthz-port", "0", "--read-only-port", "0",
             "--cgroups-per-qos=false", "--enforce-node-allocatable=", "--fail-swap-on=false",
             "--log-format", "json"],
            stdout=out, stderr=out,
        )  # fmt: skip
    try:
        began = time.monotonic()
        while not any(line["msg"] == "waiting for the container runtime" for line in json_lines(log)):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() - began < 30, log.read_text()
            time.sleep(0.1)
        time.sleep(max(0.0, began + 2 - time.monotonic()))  # 2-5 s after start, waiting for the runtime
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(STOP_WITHIN)
        took = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and took < STOP_WITHIN, log.read_text()
    lines = json_lines(log)
    waiting = next(line for line in lines if line["msg"] == "waiting for the container runtime")
    assert waiting["endpoint"] == endpoint
    [stopping] = [line for line in lines if line["msg"] == "stopping during start-up, pods are left running"]
    assert stopping["signal"] == "SIGTERM"
    assert (stopping["waiting_for"], stopping["endpoint"]) == ("the container runtime", endpoint)


class FlakyRuntime:
    """A runtime whose Version fails as told: hangs (None) or raises, then answers."""

    def __init__(self, *failures: BaseException | None) -> None:
        self.failures = list(failures)
        self.calls: list[float] = []

    async def version(self) -> pb.VersionResponse:
        self.calls.append(trio.current_time())
        if not self.failures:
            return pb.VersionResponse(runtime_name="containerd", runtime_version="2.0")
        failure = self.failures.pop(0)
        if failure is None:
            await trio.sleep_forever()
        raise failure


def waiting_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[float, str | None]]:
    return [
        (getattr(r, FIELDS_ATTR)["waited"], getattr(r, FIELDS_ATTR).get("error"))
        for r in caplog.records
        if r.getMessage() == "waiting for the container runtime"
    ]


async def test_the_runtime_is_asked_again_with_backoff_until_it_answers(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kubelet_trio.cmd.kubelet")
    runtime = FlakyRuntime(ConnectionError(), None, ConnectionError())
    startup = StartUp()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(startup.watch)
        await wait_for_runtime(cast(Runtime, runtime), "unix:///run/cri.sock", 120.0, startup)
        nursery.cancel_scope.cancel()
    # attempts 0.5, 1, 2 s apart; the hung one is given up after 10 s
    assert runtime.calls == [0.0, 0.5, 11.5, 13.5]
    assert trio.current_time() == 13.5
    # reported at 1, 3 and 7 s with the last failure (the hung attempt fails only at 10.5 s)
    assert waiting_lines(caplog) == [
        (1.0, "ConnectionError"),
        (3.0, "ConnectionError"),
        (7.0, "ConnectionError"),
    ]
    assert startup.current.value is None


async def test_startup_gives_up_at_the_runtime_deadline_naming_it(autojump_clock: MockClock) -> None:
    runtime = FlakyRuntime(*[ConnectionError()] * 1000)
    startup = StartUp()
    with pytest.RaisesGroup(
        pytest.RaisesExc(
            StartupTimeout,
            match=r"^gave up waiting for the container runtime endpoint=unix:///run/cri.sock after 120s:"
            r" ConnectionError$",
        )
    ):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(startup.watch)
            await wait_for_runtime(cast(Runtime, runtime), "unix:///run/cri.sock", 120.0, startup)
    assert trio.current_time() == 120.0


async def test_each_wait_is_reported_at_doubling_intervals_up_to_30s(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kubelet_trio.cmd.kubelet")
    startup = StartUp()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(startup.watch)
        with startup.step("the API server", kubeconfig="/etc/kubelet.conf"):
            await trio.sleep(100)
        await trio.sleep(100)  # nothing more once the step is done
        nursery.cancel_scope.cancel()
    reports = [
        (r.getMessage(), getattr(r, FIELDS_ATTR)["kubeconfig"], getattr(r, FIELDS_ATTR)["waited"])
        for r in caplog.records
    ]
    assert reports == [
        ("waiting for the API server", "/etc/kubelet.conf", waited) for waited in (1, 3, 7, 15, 31, 61, 91)
    ]
