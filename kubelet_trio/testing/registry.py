"""Run the CNCF distribution registry (Debian's ``docker-registry``) on a loopback port.

With ``htpasswd`` (a file of ``user:bcrypt-hash`` lines, :func:`write_htpasswd`) every request needs
HTTP basic auth, which distribution accepts over plain HTTP on loopback (it answers ``401`` with
``WWW-Authenticate: Basic realm=...`` until given a valid user).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import attrs
import httpx

REGISTRY_BIN = "docker-registry"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@attrs.define(eq=False)
class LocalRegistry:
    """A registry process serving plain HTTP on 127.0.0.1 with storage under ``workdir``; with
    ``htpasswd``, only to the users of that file."""

    workdir: Path
    port: int = attrs.field(factory=free_port)
    htpasswd: Path | None = None
    _proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, *, ready_timeout: float = 20.0) -> None:
        binary = shutil.which(REGISTRY_BIN)
        if binary is None:
            raise FileNotFoundError(f"{REGISTRY_BIN} not found: apt-get install docker-registry")
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "config.yml"
        config.write_text(
            "version: 0.1\n"
            "log: {level: warn}\n"
            f"storage: {{filesystem: {{rootdirectory: {self.workdir / 'data'}}}, "
            "delete: {enabled: true}}\n"
            f"http: {{addr: '{self.address}'}}\n"
            + (
                f"auth: {{htpasswd: {{realm: kubelet-trio-test, path: '{self.htpasswd}'}}}}\n"
                if self.htpasswd is not None
                else ""
            )
        )
        log_path = self.workdir / "registry.log"
        with log_path.open("ab") as log:  # the child keeps its own descriptor
            self._proc = subprocess.Popen(
                [binary, "serve", str(config)], stdout=log, stderr=log, start_new_session=True
            )
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"registry exited with {self._proc.returncode}; see {log_path}")
            try:
                if httpx.get(f"http://{self.address}/v2/", timeout=1).status_code in (200, 401):
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"registry on {self.address} not ready after {ready_timeout}s")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None


def write_htpasswd(path: Path, users: dict[str, str]) -> Path:
    """An htpasswd file with a bcrypt hash per user (the one scheme distribution accepts); needs the
    ``bcrypt`` package (the test extra)."""
    import bcrypt

    lines = [
        f"{user}:{bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=5)).decode()}\n"
        for user, password in users.items()
    ]
    path.write_text("".join(lines))
    path.chmod(0o600)
    return path
