"""The device plugin scenario (:mod:`tests.devicemanager.scenario`) against the Go kubelet 1.24
(``kubelet-go``) on ``kubelet-trio sim-cri``, with the same checks as kubelet-trio passes on containerd:
the Node's capacity and allocatable, the rejected pod's status, the pod resources API's answers, across a
SIGKILL of the kubelet and the plugin's departure. sim-cri runs no commands, so what the containers see is
checked on containerd only. The differences are stated, not hidden. The rejected pod: Go 1.24's status
message is ``"Pod " + <reason>``, kubelet-trio's ``"Pod was rejected: " + <reason>`` (later Go); the
event's message is the bare reason in both; Go 1.24's status has ``startTime``
and no ``qosClass``, kubelet-trio's ``qosClass`` and no ``startTime``. Go's plugins register in
``/var/lib/kubelet/device-plugins`` whatever its ``--root-dir``, kubelet-trio's in
``<root-dir>/device-plugins`` (so two nodes can share a machine). So that the Go kubelets of other tests
cannot clear this one's plugin directory (and the other way round), kubelet-go runs in a mount namespace
of its own where a private directory is bind-mounted on ``/var/lib/kubelet/device-plugins``; the plugin
reaches it from the host under that private directory's name.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest

from kubelet_trio.cm.devicemanager import checkpoint
from kubelet_trio.testing.envtest import DEFAULT_ASSETS, assets, start_envtest
from kubelet_trio.testing.gokubelet import go_kubelet_command
from kubelet_trio.testing.registry import free_port
from tests.devicemanager.scenario import (
    DEVICES,
    NAMESPACE,
    PLUGIN_BUILD_HINT,
    WAIT,
    WIDGET,
    call_pod_resources,
    devices_by_pod,
    get_pod,
    pod_manifest,
    run_scenario,
    running,
    start_plugin,
    wait_for,
)
from tests.reference.test_go_kubelet_on_sim_cri import BUILD_HINT, kubelet_go

pytestmark = pytest.mark.reference

NODE = "go-devices"
GO_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"  # Go's pluginapi.DevicePluginPath


def _tail(path: Path, chars: int = 6000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


@attrs.define(eq=False)
class GoKubelet:
    api: httpx.Client
    kubeconfig: Path
    binary: Path
    socket: Path  # sim-cri's
    workdir: Path
    image: str = "busybox:1.36"
    node: str = NODE
    rejection_prefix: str = "Pod "
    rejected_status_keys: frozenset[str] = frozenset({"phase", "reason", "message", "startTime"})
    ports: tuple[int, int] = attrs.Factory(lambda: (free_port(), free_port()))
    proc: subprocess.Popen[bytes] | None = None

    holder: int = 0  # a process in the mount namespace kubelet-go runs in

    @property
    def root_dir(self) -> Path:
        return self.workdir / "root"

    @property
    def plugin_dir(self) -> Path:
        """Mounted on Go's ``/var/lib/kubelet/device-plugins`` in kubelet-go's mount namespace."""
        return self.workdir / "device-plugins"

    def start_kubelet(self) -> None:
        command = [
            *("nsenter", "-t", str(self.holder), "-m", "--"),  # execs kubelet-go: SIGKILL reaches it
            *go_kubelet_command(
                self.binary,
                kubeconfig=self.kubeconfig,
                root_dir=self.root_dir,
                cert_dir=self.workdir / "pki",
                node=self.node,
                endpoint=f"unix://{self.socket}",
                port=self.ports[0],
                healthz_port=self.ports[1],
                extra=["--v=2"],
            ),
        ]
        with (self.workdir / "kubelet.log").open("ab") as out:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)

    def kill_kubelet(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def output(self, pod: dict[str, Any]) -> str | None:
        return None  # sim-cri runs no commands

    def logs(self) -> str:
        return (
            f"--- kubelet-go ---\n{_tail(self.workdir / 'kubelet.log')}\n"
            f"--- plugin ---\n{_tail(self.workdir / 'plugin.log', 2000)}\n"
            f"--- sim-cri ---\n{_tail(self.workdir / 'sim-cri.log', 2000)}"
        )


def _mount_namespace(plugin_dir: Path) -> subprocess.Popen[bytes]:
    """A process holding a mount namespace where ``plugin_dir`` is Go's device plugin directory."""
    plugin_dir.mkdir()
    script = f'mount --bind "$0" {GO_PLUGIN_DIR} && echo ready && exec sleep infinity'
    holder = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(plugin_dir)],
        stdout=subprocess.PIPE,
    )
    assert holder.stdout is not None
    with holder.stdout:
        ready = holder.stdout.readline()
    if ready != b"ready\n":
        holder.kill()
        holder.wait()
        pytest.fail(f"could not bind-mount {plugin_dir} on {GO_PLUGIN_DIR} in a mount namespace")
    return holder


@pytest.fixture
def go_kubelet() -> Iterator[GoKubelet]:
    binary = kubelet_go()
    directory = assets()
    plugin = None if directory is None else Path(directory) / "sample-device-plugin"
    if binary is None or directory is None:
        pytest.skip(
            f"reference tier skipped: no kubelet-go, etcd and kube-apiserver in {DEFAULT_ASSETS}; "
            f"build them: {BUILD_HINT}"
        )
    if plugin is None or not plugin.exists():
        pytest.skip(f"reference tier skipped: no sample-device-plugin in {directory}; {PLUGIN_BUILD_HINT}")
    if os.geteuid() != 0:
        pytest.skip("reference tier skipped: the Go kubelet needs root (it mounts under its --root-dir)")
    workdir = Path(tempfile.mkdtemp(prefix="go-dev-"))  # short: unix socket paths are limited
    socket = workdir / "sim.sock"
    image_fs = workdir / "imagefs"
    image_fs.mkdir()
    sim: subprocess.Popen[bytes] | None = None
    holder = _mount_namespace(workdir / "device-plugins")
    try:
        with start_envtest(directory) as cluster, cluster.http_client() as api:
            with (workdir / "sim-cri.log").open("wb") as out:
                sim = subprocess.Popen(
                    [
                        sys.executable, "-m", "kubelet_trio", "sim-cri",
                        "--listen", f"unix://{socket}", "--idempotent-stops", "--image-fs-dir", str(image_fs),
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )  # fmt: skip
            harness = GoKubelet(api, cluster.kubeconfig, binary, socket, workdir, holder=holder.pid)
            wait_for("sim-cri's socket", 30, lambda: socket.exists() or None, harness.logs)
            try:
                yield harness
            finally:
                harness.stop()
    finally:
        if sim is not None:
            sim.terminate()
            sim.wait(10)
        holder.kill()  # its mounts (the Go kubelet's included) go with the namespace
        holder.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def test_go_kubelet_device_plugin_scenario(go_kubelet: GoKubelet) -> None:
    directory = assets()
    assert directory is not None
    go_kubelet.start_kubelet()
    run_scenario(go_kubelet, Path(directory) / "sample-device-plugin", go_kubelet.workdir)


def test_go_kubelet_reads_kubelet_trios_checkpoint(go_kubelet: GoKubelet) -> None:
    """A checkpoint written by kubelet-trio's encoder gives a pod ``dev-2`` before the Go kubelet starts:
    the Go kubelet reads it without complaint (a checksum it disagrees with makes it log "Continue after
    failing to read checkpoint file" and choose on its own) and the pod runs with ``dev-2``."""
    directory = assets()
    assert directory is not None
    api = go_kubelet.api
    manifest = pod_manifest(NODE, "holder", go_kubelet.image, 1)
    created = api.post(f"/api/v1/namespaces/{NAMESPACE}/pods", json=manifest)
    created.raise_for_status()
    uid = created.json()["metadata"]["uid"]
    held = checkpoint.PodDevices()
    held.insert(uid, "app", WIDGET, checkpoint.DeviceEntry(("dev-2",)))
    raw = checkpoint.encode(held, {WIDGET: sorted(DEVICES)})
    (go_kubelet.plugin_dir / checkpoint.CHECKPOINT_NAME).write_bytes(raw)

    go_kubelet.start_kubelet()
    plugin_log = go_kubelet.workdir / "plugin.log"
    plugin = start_plugin(Path(directory) / "sample-device-plugin", go_kubelet.plugin_dir, plugin_log)
    try:
        wait_for("the pod to run", WAIT, lambda: running(get_pod(api, "holder")) or None, go_kubelet.logs)
        listed, _ = call_pod_resources(go_kubelet.root_dir)
        assert devices_by_pod(listed)["holder"] == {"app": {"dev-2"}}
        log = (go_kubelet.workdir / "kubelet.log").read_text(errors="replace")
        assert "Continue after failing to read checkpoint file" not in log, log
    finally:
        plugin.terminate()
        plugin.wait(20)
