"""A private containerd (own socket, root, state and CNI config) for tests, benchmarks and demos.

The configuration applies the facts in shared/RUNTIME-NOTES.md: ``restrict_oom_score_adj`` (this
machine lacks CAP_SYS_RESOURCE), CNI binaries in /usr/lib/cni, a local pause image, and plain-HTTP
access to the loopback registry through a ``hosts.toml`` (which also serves as the ``docker.io`` mirror).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import attrs

CNI_BIN_DIRS = ("/usr/lib/cni", "/opt/cni/bin")
CNI_NETWORK = "kubelet-trio"
CNI_BRIDGE = "ktrio0"
CNI_SUBNET = "10.88.0.0/16"


def cni_bin_dir() -> str:
    for d in CNI_BIN_DIRS:
        if Path(d, "bridge").exists():
            return d
    raise FileNotFoundError("CNI plugins not found: apt-get install containernetworking-plugins")


def _set(text: str, key: str, value: str) -> str:
    """Replace the first ``key = ...`` line, keeping its indentation."""
    new, count = re.subn(rf"(?m)^(\s*){re.escape(key)} = .*$", rf"\g<1>{key} = {value}", text, count=1)
    if count != 1:
        raise ValueError(f"containerd default config has no {key!r}")
    return new


def render_config(default_config: str, *, sandbox_image: str, cni_conf_dir: Path, certs_dir: Path) -> str:
    text = _set(default_config, "restrict_oom_score_adj", "true")
    text = _set(text, "sandbox_image", json.dumps(sandbox_image))
    text = _set(text, "bin_dir", json.dumps(cni_bin_dir()))
    text = _set(text, "conf_dir", json.dumps(str(cni_conf_dir)))
    text = _set(text, "config_path", json.dumps(str(certs_dir)))
    return text


def cni_conflist() -> dict[str, object]:
    return {
        "cniVersion": "0.4.0",
        "name": CNI_NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": CNI_BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": CNI_SUBNET}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            }
        ],
    }


@attrs.define(eq=False)
class PrivateContainerd:
    """One containerd process; ``stop``/``start`` again keeps its root, so state survives a restart."""

    workdir: Path
    sandbox_image: str
    registries: list[str] = attrs.Factory(list)
    #: Resolve ``docker.io`` references (``busybox:1.36``) from the first of ``registries``, so manifests
    #: written for a real cluster run offline (the harness pushes ``library/busybox:1.36`` there).
    docker_io_mirror: bool = True
    _proc: subprocess.Popen[bytes] | None = None

    @property
    def socket(self) -> Path:
        return self.workdir / "containerd.sock"

    @property
    def endpoint(self) -> str:
        return f"unix://{self.socket}"

    def _write_config(self) -> Path:
        cni_dir = self.workdir / "cni"
        certs_dir = self.workdir / "certs.d"
        cni_dir.mkdir(parents=True, exist_ok=True)
        (cni_dir / "10-kubelet-trio.conflist").write_text(json.dumps(cni_conflist(), indent=2))
        for registry in self.registries:
            host_dir = certs_dir / registry
            host_dir.mkdir(parents=True, exist_ok=True)
            (host_dir / "hosts.toml").write_text(
                f'server = "http://{registry}"\n\n'
                f'[host."http://{registry}"]\n'
                '  capabilities = ["pull", "resolve", "push"]\n'
                "  skip_verify = true\n"
            )
        if self.docker_io_mirror and self.registries:
            mirror, mirror_dir = self.registries[0], certs_dir / "docker.io"
            mirror_dir.mkdir(parents=True, exist_ok=True)
            (mirror_dir / "hosts.toml").write_text(
                f'server = "http://{mirror}"\n\n'
                f'[host."http://{mirror}"]\n'
                '  capabilities = ["pull", "resolve"]\n'
                "  skip_verify = true\n"
            )
        default = subprocess.run(
            ["containerd", "config", "default"], check=True, capture_output=True, text=True
        ).stdout
        config = self.workdir / "config.toml"
        config.write_text(
            render_config(
                default, sandbox_image=self.sandbox_image, cni_conf_dir=cni_dir, certs_dir=certs_dir
            )
        )
        return config

    def start(self, *, ready_timeout: float = 30.0) -> None:
        if shutil.which("containerd") is None:
            raise FileNotFoundError("containerd not found: apt-get install containerd runc")
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self._write_config()
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()
        log_path = self.workdir / "containerd.log"
        with log_path.open("ab") as log:  # the child keeps its own descriptor
            self._proc = subprocess.Popen(
                [
                    "containerd",
                    "--config", str(config),
                    "--address", str(self.socket),
                    "--root", str(self.workdir / "root"),
                    "--state", str(self.workdir / "state"),
                ],
                stdout=log,
                stderr=log,
                start_new_session=True,
            )  # fmt: skip
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
        needle = str(self.socket).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"containerd-shim" in cmdline and needle in cmdline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(entry.name), signal.SIGKILL)

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
