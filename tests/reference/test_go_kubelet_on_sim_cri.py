"""The Go kubelet (the reference implementation) on ``kubelet-trio sim-cri``: a real CRI client that the
sim did not grow up with, so what passes here is the CRI as Kubernetes speaks it, not as kubelet-trio does.

A real etcd + kube-apiserver (:mod:`kubelet_trio.testing.envtest`), sim-cri on a private socket and
``kubelet-go`` (Kubernetes 1.24, built by ``BUILD_ALL=1``) registering a node. Pods carry ``spec.nodeName``
(no scheduler). The kubelet runs as root with its own ``--root-dir`` and no cgroup management of its own
(``--cgroups-per-qos=false``, no allocatable enforcement); its cAdvisor still reads the host's cgroups and
stats the image filesystem sim-cri names, hence ``--image-fs-dir``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import attrs
import httpx
import pytest

from kubelet_trio.testing.envtest import DEFAULT_ASSETS, EnvtestCluster, assets, start_envtest
from kubelet_trio.testing.gokubelet import go_kubelet_command
from kubelet_trio.testing.registry import free_port

pytestmark = pytest.mark.reference

BUILD_HINT = "BUILD_ALL=1 bash ../shared/tools/build-envtest.sh <git dir of kubegc/liteKube>"
NODE = "go-kubelet-on-sim"
NAMESPACE = "default"
IMAGE = "busybox:1.36"
RUNNING_PODS = 30
CRASHING_POD = "crash-loop"
READY_TIMEOUT = 90.0  # seconds, wall clock: 30 pods through a real kubelet's sync loop
BACKOFF_TIMEOUT = 60.0  # the first two restarts wait 10 s and 20 s of back-off
DELETE_TIMEOUT = 60.0
POLL = 0.5

T = TypeVar("T")


def kubelet_go() -> Path | None:
    directory = assets() or DEFAULT_ASSETS
    binary = Path(directory) / "kubelet-go"
    return binary if os.access(binary, os.X_OK) else None


def wait_for(what: str, timeout: float, probe: Callable[[], T | None], log: Callable[[], str]) -> T:
    """Poll ``probe`` until it returns a value (a synchronous test driving real processes)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}\n{log()}")
        time.sleep(POLL)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _tail(path: Path, chars: int = 6000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


@attrs.define(eq=False)
class Node:
    """The running trio: the control plane, sim-cri and the Go kubelet, with their logs."""

    cluster: EnvtestCluster
    api: httpx.Client
    socket: Path
    workdir: Path

    def logs(self) -> str:
        return (
            f"--- kubelet-go ---\n{_tail(self.workdir / 'kubelet.log')}\n"
            f"--- sim-cri ---\n{_tail(self.workdir / 'sim-cri.log', 3000)}"
        )

    def pods(self) -> list[dict[str, Any]]:
        response = self.api.get(f"/api/v1/namespaces/{NAMESPACE}/pods")
        response.raise_for_status()
        items: list[dict[str, Any]] = response.json()["items"]
        return items

    def pod(self, name: str) -> dict[str, Any]:
        response = self.api.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")
        response.raise_for_status()
        pod: dict[str, Any] = response.json()
        return pod


def _start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:  # the child keeps its own descriptor
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)


@pytest.fixture
def node() -> Iterator[Node]:
    binary = kubelet_go()
    directory = assets()
    if binary is None or directory is None:
        pytest.skip(
            f"reference tier skipped: no kubelet-go, etcd and kube-apiserver in {DEFAULT_ASSETS}; "
            f"build them: {BUILD_HINT}"
        )
    if os.geteuid() != 0:
        pytest.skip("reference tier skipped: the Go kubelet needs root (it mounts under its --root-dir)")
    workdir = Path(tempfile.mkdtemp(prefix="go-kubelet-"))  # short: unix socket paths are limited
    socket = workdir / "sim.sock"
    image_fs = workdir / "imagefs"
    image_fs.mkdir()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with start_envtest(directory) as cluster, cluster.http_client() as api:
            try:
                procs.append(
                    _start(
                        [
                            sys.executable,
                            "-m",
                            "kubelet_trio",
                            "sim-cri",
                            "--listen",
                            f"unix://{socket}",
                            "--idempotent-stops",
                            "--image-fs-dir",
                            str(image_fs),
                        ],
                        workdir / "sim-cri.log",
                    )
                )
                wait_for(
                    "sim-cri's socket",
                    30,
                    lambda: socket.exists() or None,
                    lambda: _tail(workdir / "sim-cri.log"),
                )
                procs.append(
                    _start(
                        go_kubelet_command(
                            binary,
                            kubeconfig=cluster.kubeconfig,
                            root_dir=workdir / "root",
                            cert_dir=workdir / "pki",
                            node=NODE,
                            endpoint=f"unix://{socket}",
                            port=free_port(),
                            healthz_port=free_port(),
                            extra=["--v=2"],
                        ),
                        workdir / "kubelet.log",
                    )
                )
                yield Node(cluster, api, socket, workdir)
            finally:
                for proc in reversed(procs):
                    _stop(proc)
    finally:
        # the Go kubelet bind-mounts its root directory onto itself (and volumes under it)
        subprocess.run(["umount", "-R", "-l", str(workdir / "root")], check=False, capture_output=True)
        shutil.rmtree(workdir, ignore_errors=True)


def _pod(name: str, command: list[str], *, ready_probe: bool) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": IMAGE, "command": command}
    if ready_probe:
        container["readinessProbe"] = {"exec": {"command": ["true"]}, "periodSeconds": 2}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "nodeName": NODE,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 2,
            "containers": [container],
        },
    }


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _node_ready(api: httpx.Client) -> bool | None:
    response = api.get(f"/api/v1/nodes/{NODE}")
    if response.status_code != 200:
        return None
    conditions = response.json().get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) or None


def test_go_kubelet_runs_backs_off_and_deletes_pods_on_sim_cri(node: Node) -> None:
    api = node.api
    wait_for("the node to register Ready", 60, lambda: _node_ready(api), node.logs)

    names = [f"sleeper-{i:02d}" for i in range(RUNNING_PODS)]
    for name in names:
        pod = _pod(name, ["sleep", "3600"], ready_probe=True)
        api.post(f"/api/v1/namespaces/{NAMESPACE}/pods", json=pod).raise_for_status()
    crash = _pod(CRASHING_POD, ["sh", "-c", "echo crashing; exit 1"], ready_probe=False)
    api.post(f"/api/v1/namespaces/{NAMESPACE}/pods", json=crash).raise_for_status()

    def all_ready() -> bool | None:
        ready = {p["metadata"]["name"] for p in node.pods() if _ready(p)}
        return set(names) <= ready or None

    wait_for(f"{RUNNING_PODS} pods to be Ready", READY_TIMEOUT, all_ready, node.logs)

    def backing_off() -> dict[str, Any] | None:
        statuses = node.pod(CRASHING_POD).get("status", {}).get("containerStatuses") or []
        if not statuses:
            return None
        status: dict[str, Any] = statuses[0]
        waiting = status.get("state", {}).get("waiting") or {}
        backing = status.get("restartCount", 0) >= 2 and waiting.get("reason") == "CrashLoopBackOff"
        return status if backing else None

    status = wait_for("the crashing pod to be in CrashLoopBackOff", BACKOFF_TIMEOUT, backing_off, node.logs)
    assert status["lastState"]["terminated"]["exitCode"] == 1
    assert not status["ready"]
    assert all(_ready(p) for p in node.pods() if p["metadata"]["name"] in names)  # nothing else restarted

    for name in [*names, CRASHING_POD]:
        api.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}").raise_for_status()
    wait_for(
        "every pod to be removed from the API", DELETE_TIMEOUT, lambda: (not node.pods()) or None, node.logs
    )
