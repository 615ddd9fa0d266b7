"""The daemon as a process: it serves, and SIGTERM stops it at once, leaving its pods running."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import trio

from kubelet_trio.testing.env import LocalCriEnvironment, remove_all_pods, running_containers
from kubelet_trio.testing.registry import free_port
from tests.runonce.pods import WEB, write_manifests

STOP_WITHIN = 2.0


def start_daemon(tmp_path: Path, *flags: str) -> subprocess.Popen[str]:
    manifests = write_manifests(tmp_path / "m", WEB)
    with (tmp_path / "daemon.log").open("w") as log:  # the child keeps its own descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "kubelet_trio", "--pod-manifest-path", str(manifests),
             "--pod-logs-dir", str(tmp_path / "logs"), "--root-dir", str(tmp_path), "--port", "0", *flags],
            stdout=log, stderr=log, text=True,
        )  # fmt: skip


def wait_until(check: object, proc: subprocess.Popen[str], tmp_path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, (tmp_path / "daemon.log").read_text()
        try:
            if check():  # type: ignore[operator]
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"condition not met in {timeout}s:\n{(tmp_path / 'daemon.log').read_text()}")


def stop(proc: subprocess.Popen[str]) -> float:
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    return time.monotonic() - started


def test_sim_daemon_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    healthz, read_only = free_port(), free_port()
    proc = start_daemon(
        tmp_path, "--runtime", "sim", "--hostname-override", "d1", "--healthz-port", str(healthz),
        "--read-only-port", str(read_only), "--address", "127.0.0.1", "--log-format", "json",
    )  # fmt: skip
    try:
        wait_until(lambda: httpx.get(f"http://127.0.0.1:{healthz}/healthz").text == "ok", proc, tmp_path)

        def web_running() -> bool:
            items = httpx.get(f"http://127.0.0.1:{read_only}/pods").json()["items"]
            return [(i["metadata"]["name"], i["status"].get("phase")) for i in items] == [
                ("web-d1", "Running")
            ]

        wait_until(web_running, proc, tmp_path)
        logs = httpx.get(f"http://127.0.0.1:{read_only}/containerLogs/default/web-d1/app").text
        assert logs == "up\n"
    finally:
        took = stop(proc)
    assert proc.returncode == 0 and took < STOP_WITHIN, (tmp_path / "daemon.log").read_text()


def test_max_pods_is_enforced_standalone(tmp_path: Path) -> None:
    """``--max-pods 2`` and three static pods, no API server: two run, the third is rejected with Go's
    OutOfpods reason and message, in its status and in the log."""
    write_manifests(tmp_path / "m", ("web-2", *WEB[1:]), ("web-3", *WEB[1:]))  # and start_daemon's "web"
    read_only = free_port()
    proc = start_daemon(
        tmp_path, "--runtime", "sim", "--hostname-override", "d1", "--max-pods", "2", "--healthz-port", "0",
        "--read-only-port", str(read_only), "--address", "127.0.0.1",
    )  # fmt: skip
    phases: dict[str, tuple[str, str, str]] = {}
    try:

        def settled() -> bool:
            items = httpx.get(f"http://127.0.0.1:{read_only}/pods").json()["items"]
            phases.clear()
            for item in items:
                status = item["status"]
                phases[item["metadata"]["name"]] = (
                    status.get("phase", ""),
                    status.get("reason", ""),
                    status.get("message", ""),
                )
            return sorted(phase for phase, _, _ in phases.values()) == ["Failed", "Running", "Running"]

        wait_until(settled, proc, tmp_path)
    finally:
        stop(proc)
    message = "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"
    [(rejected, status)] = [(name, s) for name, s in phases.items() if s[0] == "Failed"]
    assert status == ("Failed", "OutOfpods", f"Pod was rejected: {message}")
    assert rejected in {"web-d1", "web-2-d1", "web-3-d1"}
    lines = [line for line in (tmp_path / "daemon.log").read_text().splitlines() if '"pod rejected"' in line]
    assert len(lines) == 1 and lines[0].startswith("W")
    assert f'pod="default/{rejected}"' in lines[0] and 'reason="OutOfpods"' in lines[0]
    assert f'message="{message}"' in lines[0]


async def cri_running(env: LocalCriEnvironment, node: str) -> list[str]:
    return [c.metadata.name for c in await running_containers(env.endpoint, node) if c.metadata]


async def remove_node_pods(env: LocalCriEnvironment, node: str) -> None:
    await remove_all_pods(env.endpoint, node)


@pytest.mark.containerd
def test_containerd_daemon_stops_within_2s_leaving_pods_running(
    cri_env: LocalCriEnvironment, tmp_path: Path
) -> None:
    node = "daemon-sigterm"
    proc = start_daemon(
        tmp_path, "--runtime", "cri", "--container-runtime-endpoint", cri_env.endpoint,
        "--hostname-override", node, "--healthz-port", str(free_port()),
    )  # fmt: skip
    try:
        try:
            wait_until(lambda: trio.run(cri_running, cri_env, node) == ["app"], proc, tmp_path)
            time.sleep(1)  # a steady state: the PLEG has seen it, a sync may be in flight
        finally:
            took = stop(proc)
        assert proc.returncode == 0, (tmp_path / "daemon.log").read_text()
        assert took < STOP_WITHIN
        assert trio.run(cri_running, cri_env, node) == ["app"]  # the pod outlives the kubelet
    finally:
        trio.run(remove_node_pods, cri_env, node)
