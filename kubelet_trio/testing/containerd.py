"""A private containerd (own socket, root, state, CNI config and pod network) for tests, benchmarks and demos.

The files come from :mod:`kubelet_trio.containerd.config` (the product's managed runtime writes the same
ones); the pod network is a claimed bridge and subnet (:mod:`kubelet_trio.containerd.network`) that
:meth:`PrivateContainerd.release_network` removes again, so a test run leaves the host's links and routes
as it found them (and the next run cleans up after one that crashed).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from pathlib import Path

import attrs

from kubelet_trio.containerd.config import (
    CNI_BIN_DIRS,
    ContainerdLayout,
    cni_bin_dir,
    render_config,
    write_config,
)
from kubelet_trio.containerd.network import PodNetwork, claim_network, kill_shims

__all__ = ["CNI_BIN_DIRS", "PrivateContainerd", "cni_bin_dir", "render_config"]


@attrs.define(eq=False)
class PrivateContainerd:
    """One containerd process; ``stop``/``start`` again keeps its root and network, so state survives a
    restart. :meth:`release_network` (after the pods are gone) gives the bridge and subnet back."""

    workdir: Path
    sandbox_image: str
    registries: list[str] = attrs.Factory(list)
    #: Resolve ``docker.io`` references (``busybox:1.36``) from the first of ``registries``, so manifests
    #: written for a real cluster run offline (the harness pushes ``library/busybox:1.36`` there).
    docker_io_mirror: bool = True
    #: The pod subnet (default: a free /24 of the benchmarking range, see containerd.network).
    subnet: str | None = None
    network: PodNetwork | None = None
    _proc: subprocess.Popen[bytes] | None = None

    @property
    def layout(self) -> ContainerdLayout:
        return ContainerdLayout(self.workdir)

    @property
    def socket(self) -> Path:
        return self.layout.socket

    @property
    def endpoint(self) -> str:
        return self.layout.endpoint

    def _write_config(self) -> Path:
        if self.network is None:
            self.network = claim_network(str(self.workdir.resolve()), subnet=self.subnet)
        return write_config(
            self.layout,
            self.network,
            sandbox_image=self.sandbox_image,
            registries=self.registries,
            docker_io_mirror=self.docker_io_mirror,
        )

    def start(self, *, ready_timeout: float = 30.0) -> None:
        if shutil.which("containerd") is None:
            raise FileNotFoundError("containerd not found: apt-get install containerd runc")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        assert self.network is not None
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()
        log_path = self.layout.log
        with log_path.open("ab") as log:  # the child keeps its own descriptor
            self._proc = subprocess.Popen(
                self.layout.command(), stdout=log, stderr=log, start_new_session=True
            )
        self.network = self.network.with_containerd(self._proc.pid, str(self.socket))
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"containerd exited with {self._proc.returncode}; see {log_path}")
            if self.socket.exists() and self._cri_plugin_ok():
                return
            time.sleep(0.1)
        raise TimeoutError(f"containerd at {self.socket} not ready after {ready_timeout}s")

    def _cri_plugin_ok(self) -> bool:
        res = subprocess.run(
            ["ctr", "--address", str(self.socket), "plugins", "ls"],
            capture_output=True,
            text=True,
            check=False,
        )
        return any(
            "io.containerd.grpc.v1" in line and " cri " in f" {line} " and line.rstrip().endswith("ok")
            for line in res.stdout.splitlines()
        )

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        """Stop containerd only; like a real restart, running containers' shims keep going."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def kill_shims(self) -> None:
        """Kill leftover shims started by this containerd (matched by its socket in their command line)."""
        kill_shims(str(self.socket))

    def unmount_all(self) -> None:
        """Unmount anything still mounted below the workdir (overlay rootfs, shm) before deleting it."""
        prefix = str(self.workdir.resolve())
        mounts = [
            line.split()[1]
            for line in Path("/proc/self/mounts").read_text().splitlines()
            if line.split()[1].startswith(prefix)
        ]
        for mountpoint in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", mountpoint], check=False, capture_output=True)

    def release_network(self) -> None:
        """Remove the bridge, its routes and NAT rules, and the claim (call after the pods are removed)."""
        if self.network is not None:
            self.network.release()
            self.network = None
