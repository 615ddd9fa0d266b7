"""``kubelet-trio --container-runtime managed``: the daemon brings its own containerd (real processes).

Only a loopback registry is provided; no containerd is running for the node before it starts. The node
starts containerd under ``<root-dir>/containerd``, runs a static pod on it, survives containerd being
killed (the supervisor restarts it, the pod's container keeps running under its shim and the node goes
on syncing new pods), and stops containerd when it stops.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from kubelet_trio.containerd import ContainerdLayout, PodNetwork, write_registry_hosts
from kubelet_trio.containerd.network import CLAIMS_DIR, bridge_name, host_links
from kubelet_trio.testing import images as test_images
from kubelet_trio.testing.containerd import PrivateContainerd
from kubelet_trio.testing.env import missing_prerequisites, remove_all_pods
from kubelet_trio.testing.registry import LocalRegistry, free_port
from tests.host_network import host_routes
from tests.runonce.pods import WEB, write_manifest

pytestmark = pytest.mark.containerd

NODE = "managed-1"


@pytest.fixture(scope="module")
def registry(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[LocalRegistry, test_images.TestImages]]:
    missing = missing_prerequisites()
    if missing:
        pytest.skip("containerd tier unavailable: " + "; ".join(missing))
    registry = LocalRegistry(tmp_path_factory.mktemp("registry"))
    registry.start()
    try:
        yield registry, test_images.push_test_images(registry.address)
    finally:
        registry.stop()


def containerd_pids(socket: Path) -> list[int]:
    """containerd processes (not shims) serving ``socket``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"containerd") and str(socket).encode() in argv:
            pids.append(int(entry.name))
    return pids


def wait_until(check: Callable[[], Any], proc: subprocess.Popen[str], log: Path, timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            result = check()
            if result:
                return result
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"condition not met in {timeout}s:\n{log.read_text()[-4000:]}")


def pod_states(port: int) -> dict[str, tuple[str | None, str | None, int]]:
    """name -> (phase, first container's id, its restart count), from the read-only Kubelet API."""
    out = {}
    for item in httpx.get(f"http://127.0.0.1:{port}/pods").json()["items"]:
        statuses = item["status"].get("containerStatuses") or [{}]
        out[item["metadata"]["name"]] = (
            item["status"].get("phase"),
            statuses[0].get("containerID"),
            statuses[0].get("restartCount", 0),
        )
    return out


def test_a_node_runs_on_its_own_containerd_and_survives_it_crashing(
    registry: tuple[LocalRegistry, test_images.TestImages], tmp_path: Path
) -> None:
    reg, images = registry
    root = tmp_path / "root"
    layout = ContainerdLayout(root / "containerd")
    write_registry_hosts(layout.certs_dir, [reg.address], docker_io_mirror=True)
    manifests = tmp_path / "manifests"
    write_manifest(manifests, WEB)
    links_before, routes_before = set(host_links()), set(host_routes())
    read_only = free_port()
    log = tmp_path / "kubelet.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kubelet_trio", "--container-runtime", "managed",
             "--root-dir", str(root), "--pod-manifest-path", str(manifests),
             "--pod-logs-dir", str(tmp_path / "logs"), "--pod-infra-container-image", images.pause,
             "--hostname-override", NODE, "--healthz-port", "0", "--port", "0",
             "--read-only-port", str(read_only), "--address", "127.0.0.1", "--sync-frequency", "2s"],
            stdout=out, stderr=out, text=True,
        )  # fmt: skip
    try:
        first = wait_until(
            lambda: (s := pod_states(read_only).get(f"web-{NODE}")) and s[0] == "Running" and s, proc, log
        )
        assert first[1].startswith("containerd://")
        (original,) = containerd_pids(layout.socket)
        assert (layout.workdir / "containerd.log").stat().st_size > 0

        os.kill(original, signal.SIGKILL)
        restarted = wait_until(
            lambda: [p for p in containerd_pids(layout.socket) if p != original], proc, log
        )
        assert restarted and original not in containerd_pids(layout.socket)
        # The node goes on: the container runs on (same id, no restart) and a new pod starts.
        write_manifest(manifests, ("web2", *WEB[1:]))
        states = wait_until(
            lambda: (s := pod_states(read_only)).get(f"web2-{NODE}", (None,))[0] == "Running" and s, proc, log
        )
        assert states[f"web-{NODE}"] == first
        assert "containerd exited; restarting" in log.read_text()

        trio.run(remove_all_pods, layout.endpoint, NODE)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, log.read_text()
        assert containerd_pids(layout.socket) == []  # stopped with the node
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in containerd_pids(layout.socket):
            os.kill(pid, signal.SIGKILL)
        private = PrivateContainerd(layout.workdir, sandbox_image=images.pause)
        private.kill_shims()
        private.unmount_all()
        claim = CLAIMS_DIR / f"{bridge_name(str(layout.workdir.resolve()))}.json"
        if claim.exists():
            PodNetwork.load(claim).release()
    # The node's network is gone with the release: nothing of it stays on the host.
    new_links = set(host_links()) - links_before
    assert not {link for link in new_links if link.startswith("kt-") and link.endswith(claim.stem[3:])}
    assert not [r for r in set(host_routes()) - routes_before if claim.stem in r]
