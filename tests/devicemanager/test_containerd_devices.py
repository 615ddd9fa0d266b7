"""Device plugins end to end on kubelet-trio: the ``kubelet-trio --kubeconfig`` daemon (a subprocess, as
users run it) on containerd and a real kube-apiserver, with Go's ``sample-device-plugin``; the scenario and
its checks are :mod:`tests.devicemanager.scenario`. Needs the envtest binaries and ``sample-device-plugin``
(skipped with the build command otherwise) and the containerd tier.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio

from kubelet_trio.testing.env import LocalCriEnvironment, private_cgroup_root, remove_all_pods
from kubelet_trio.testing.envtest import assets, skip_reason, start_envtest
from tests.devicemanager.scenario import PLUGIN_BUILD_HINT, run_scenario

pytestmark = pytest.mark.containerd

NODE = "device-plugin-node"


def _tail(path: Path, chars: int = 6000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


@attrs.define(eq=False)
class TrioKubelet:
    """The kubelet-trio daemon, restartable. Where its rejected pod differs from Go 1.24's (see
    tests/reference/test_devices_reference.py): the status message says ``"Pod was rejected: "`` (later
    Go) where Go 1.24 says ``"Pod "`` (the event's message is the bare reason in both); the status
    has ``qosClass`` and no ``startTime``, Go 1.24's the other way round."""

    api: httpx.Client
    kubeconfig: Path
    endpoint: str
    workdir: Path
    image: str
    node: str = NODE
    rejection_prefix: str = "Pod was rejected: "
    rejected_status_keys: frozenset[str] = frozenset({"phase", "reason", "message", "qosClass"})
    cgroup_root: str = ""  # --cgroup-root ("": the default)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def root_dir(self) -> Path:
        return self.workdir / "root"

    @property
    def plugin_dir(self) -> Path:
        return self.root_dir / "device-plugins"

    @property
    def log(self) -> Path:
        return self.workdir / "kubelet.log"

    def start_kubelet(self) -> None:
        command = [
            sys.executable, "-m", "kubelet_trio",
            "--kubeconfig", str(self.kubeconfig),
            "--container-runtime-endpoint", self.endpoint,
            "--hostname-override", self.node,
            "--root-dir", str(self.root_dir),
            *(("--cgroup-root", self.cgroup_root) if self.cgroup_root else ()),
            "--pod-logs-dir", str(self.workdir / "pods"),
            "--healthz-port", "0", "--port", "0",
            "-v", "4",
        ]  # fmt: skip
        with self.log.open("ab") as out:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def kill_kubelet(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def output(self, pod: dict[str, Any]) -> str | None:
        meta = pod["metadata"]
        path = self.workdir / "pods" / f"{meta['namespace']}_{meta['name']}_{meta['uid']}" / "app" / "0.log"
        try:
            lines = path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return ""
        return "\n".join(line.split(" ", 3)[3] for line in lines if line.count(" ") >= 3)

    def logs(self) -> str:
        plugin = _tail(self.workdir / "plugin.log", 2000)
        return f"--- kubelet-trio ---\n{_tail(self.log)}\n--- plugin ---\n{plugin}"


@pytest.fixture
def plugin_binary() -> Path:
    """``sample-device-plugin``, or a skip with the way to build it (before containerd is started)."""
    directory = assets()
    if directory is None:
        pytest.skip(skip_reason("device plugins"))
    binary = Path(directory) / "sample-device-plugin"
    if not binary.exists():
        pytest.skip(
            f"device plugins tier skipped: no sample-device-plugin in {directory}; {PLUGIN_BUILD_HINT}"
        )
    return binary


@pytest.fixture
def kubelet(plugin_binary: Path, cri_env: LocalCriEnvironment) -> Iterator[TrioKubelet]:
    directory = assets()
    assert directory is not None
    workdir = Path(tempfile.mkdtemp(prefix="kt-dev-"))  # short: unix socket paths are limited
    with start_envtest(directory) as cluster, cluster.http_client() as api, private_cgroup_root() as cgroups:
        harness = TrioKubelet(api, cluster.kubeconfig, cri_env.endpoint, workdir, cri_env.images.busybox)
        harness.cgroup_root = cgroups  # not the session's other daemons' /kubepods
        try:
            harness.start_kubelet()
            yield harness
        finally:
            harness.stop()
            trio.run(remove_all_pods, cri_env.endpoint, NODE)
            subprocess.run(["rm", "-rf", str(workdir)], check=False)


def test_device_plugin_scenario(plugin_binary: Path, kubelet: TrioKubelet) -> None:
    run_scenario(kubelet, plugin_binary, kubelet.workdir)
