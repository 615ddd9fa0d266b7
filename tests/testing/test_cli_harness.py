"""``kubelet-trio fake-apiserver`` and ``kubelet-trio sim-nodes`` as processes, checked with kubectl."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

KUBECTL = shutil.which("kubectl")
START_LIMIT = 60.0
needs_kubectl = pytest.mark.skipif(
    KUBECTL is None and os.environ.get("CI") != "true", reason="kubectl is not installed"
)


def _kubelet_trio(*args: str, log: IO[bytes]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kubelet_trio", *args], stdout=subprocess.PIPE, stderr=log, text=True
    )


def _first_line(proc: subprocess.Popen[str], log: Path) -> str:
    """The process's first stdout line: it prints one when it is ready."""
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line:
        proc.wait(10)
        raise AssertionError(f"exited with {proc.returncode} before it was ready: {log.read_text()}")
    return line


@contextlib.contextmanager
def _running(args: list[str], log_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    with log_path.open("wb") as log:
        proc = _kubelet_trio(*args, log=log)
    try:
        yield proc, _first_line(proc, log_path)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _kubectl(kubeconfig: Path, *args: str) -> str:
    assert KUBECTL is not None, "CI=true: kubectl must be installed"
    done = subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _wait_until(check: object, what: str) -> None:
    deadline = time.monotonic() + START_LIMIT
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {START_LIMIT:g}s: {what}")
        time.sleep(0.2)


@needs_kubectl
def test_kubectl_sees_the_sim_nodes_joined_to_the_fake_apiserver(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    api_args = ["fake-apiserver", "--listen", "127.0.0.1:0", "--kubeconfig-out", str(kubeconfig)]
    with _running(api_args, tmp_path / "api.log") as (api, url):
        assert url.startswith("http://127.0.0.1:")
        assert url in kubeconfig.read_text()
        nodes_args = ["sim-nodes", "--kubeconfig", str(kubeconfig), "--nodes", "3"]
        nodes_args += ["--name-prefix", "edge-", "--max-pods", "20", "--node-labels", "tier=sim,zone=a"]
        with _running(nodes_args, tmp_path / "nodes.log") as (sim, ready):
            assert ready == "3 nodes running"
            out = _kubectl(kubeconfig, "get", "nodes", "-o", "name")
            assert sorted(out.split()) == ["node/edge-0", "node/edge-1", "node/edge-2"]
            listed = json.loads(_kubectl(kubeconfig, "get", "nodes", "-l", "zone=a", "-o", "json"))
            [node] = [n for n in listed["items"] if n["metadata"]["name"] == "edge-1"]
            assert node["metadata"]["labels"]["tier"] == "sim"
            assert node["status"]["capacity"]["pods"] == "20"
            assert node["status"]["addresses"][0] == {"type": "InternalIP", "address": "198.18.0.2"}

            def ready_and_running() -> bool:
                out = _kubectl(
                    kubeconfig,
                    "get",
                    "pods",
                    "-o",
                    "jsonpath={.items[0].status.phase}/{.items[0].status.containerStatuses[0].ready}",
                )
                return out == "Running/true"

            # A pod bound to a sim node behaves as its annotation scripts (here: a passing readiness probe).
            (tmp_path / "pod.json").write_text(json.dumps(_probed_pod("edge-2")))
            _kubectl(kubeconfig, "create", "--validate=false", "-f", str(tmp_path / "pod.json"))
            _wait_until(ready_and_running, "the pod Running and Ready")
            assert _kubectl(kubeconfig, "get", "pod", "web", "-o", "jsonpath={.status.podIP}").startswith(
                "10.128.2."
            )
            sim.send_signal(signal.SIGTERM)
            assert sim.wait(30) == 0
        api.send_signal(signal.SIGTERM)
        assert api.wait(30) == 0


def _probed_pod(node: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "annotations": {"sim.kubelet-trio.io/app": 'exec cat /ready -> 0 "ok"'}},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "app",
                    "image": "busybox",
                    "readinessProbe": {"exec": {"command": ["cat", "/ready"]}, "periodSeconds": 1},
                }
            ],
        },
    }


def test_fake_apiserver_rejects_a_bad_listen_address(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kubelet_trio",
            "fake-apiserver",
            "--listen",
            "localhost",
            "--kubeconfig-out",
            "x",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--listen: expected HOST:PORT, got 'localhost'" in done.stderr


def test_sim_nodes_names_an_unreadable_kubeconfig(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    done = subprocess.run(
        [sys.executable, "-m", "kubelet_trio", "sim-nodes", "--kubeconfig", str(missing), "--nodes", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "kubelet-trio sim-nodes: --kubeconfig: " in done.stderr
    assert str(missing) in done.stderr


def test_sim_nodes_rejects_a_bad_node_count() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kubelet_trio", "sim-nodes", "--kubeconfig", "k", "--nodes", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--nodes: must be at least 1, got 0" in done.stderr
