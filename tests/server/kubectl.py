"""kubectl against the fake API server, for the streaming tests (sim and containerd).

kubectl sends no bearer token over plain HTTP, so :func:`open_kubectl_endpoint` serves the fake API
server's app over TLS as well and writes a kubeconfig for it. The API server reaches the node's Kubelet
API with the client certificate of :func:`apiserver_tls`.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import pty
import ssl
import struct
import subprocess
import termios
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import attrs
import trio
import trustme
import yaml

from kubelet_trio.testing.fakeapi import FakeApi, serve_fake_api
from tests.apiserver.harness import write_kubeconfig
from tests.apiserver.pod_status import api_container

KUBECTL_LIMIT = 60
APISERVER_USER = "kube-apiserver-kubelet-client"


def apiserver_tls(ca: trustme.CA) -> ssl.SSLContext:
    """The API server's TLS towards kubelets: trusts ``ca``, presents its kubelet client certificate."""
    cert = ca.issue_cert(APISERVER_USER, common_name=APISERVER_USER, organization_name="system:masters")
    context = ssl.create_default_context()
    ca.configure_trust(context)
    cert.configure_cert(context)
    return context


@contextlib.asynccontextmanager
async def open_kubectl_endpoint(api: FakeApi, ca: trustme.CA, tmp_path: Path) -> AsyncIterator[Path]:
    """The fake API server's app on a TLS port too; yields a kubeconfig for it."""
    leaf = ca.issue_cert("127.0.0.1")
    leaf.cert_chain_pems[0].write_to_path(str(tmp_path / "apiserver.crt"))
    leaf.private_key_pem.write_to_path(str(tmp_path / "apiserver.key"))
    ca.cert_pem.write_to_path(str(tmp_path / "apiserver-ca.crt"))
    async with serve_fake_api(
        api.app, certfile=tmp_path / "apiserver.crt", keyfile=tmp_path / "apiserver.key"
    ) as url:
        kubeconfig = write_kubeconfig(tmp_path / "kubectl-config", url, api.app.token or "none")
        config = yaml.safe_load(kubeconfig.read_text())
        config["clusters"][0]["cluster"]["certificate-authority"] = str(tmp_path / "apiserver-ca.crt")
        kubeconfig.write_text(yaml.safe_dump(config))
        yield kubeconfig


def container_running(api: FakeApi, name: str, container: str = "app") -> bool:
    try:
        return "running" in api_container(api, name, container)["state"]
    except (AssertionError, KeyError):
        return False


@attrs.frozen
class Kubectl:
    api: FakeApi
    kubeconfig: Path

    def argv(self, *args: str) -> list[str]:
        return ["kubectl", "--kubeconfig", str(self.kubeconfig), *args]

    async def run(self, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
        with trio.fail_after(KUBECTL_LIMIT):
            return await trio.run_process(
                self.argv(*args), stdin=stdin, capture_stdout=True, capture_stderr=True, check=False
            )

    @contextlib.asynccontextmanager
    async def background(self, *args: str) -> AsyncIterator[trio.Process]:
        """kubectl running alongside the test (stdout and stderr are pipes), terminated at the end."""
        async with trio.open_nursery() as nursery:
            process: trio.Process = await nursery.start(
                functools.partial(
                    trio.run_process,
                    self.argv(*args),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    check=False,
                )
            )
            try:
                yield process
            finally:
                process.terminate()

    async def on_terminal(self, *args: str, rows: int, columns: int) -> tuple[int, str]:
        """kubectl with a pseudo-terminal of ``rows`` x ``columns`` as stdin/stdout/stderr; returns its
        exit code and everything it wrote."""
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        output = bytearray()

        def read_all() -> None:
            while True:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # EIO: the last writer closed
                    return
                if not chunk:
                    return
                output.extend(chunk)

        try:
            with trio.fail_after(KUBECTL_LIMIT):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(trio.to_thread.run_sync, read_all)
                    process = await trio.lowlevel.open_process(
                        self.argv(*args), stdin=slave, stdout=slave, stderr=slave
                    )
                    os.close(slave)
                    slave = -1
                    code = await process.wait()
        finally:
            if slave >= 0:
                os.close(slave)
            os.close(master)
        return code, output.decode(errors="replace")


async def read_until(stream: trio.abc.ReceiveStream, done: Callable[[bytes], Any]) -> bytes:
    """Read ``stream`` until ``done(everything so far)`` is truthy (AssertionError at EOF first)."""
    seen = b""
    while not done(seen):
        chunk = await stream.receive_some()
        assert chunk, f"stream ended early after {seen!r}"
        seen += chunk
    return seen
