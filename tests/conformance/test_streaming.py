"""``kubectl exec``/``port-forward``/``cp`` through a real kube-apiserver (1.24) to the kubelet daemon:
the API server proxies the SPDY upgrade to the Kubelet API, which proxies it to containerd's streaming
server (the conformance suite's "should support remote command execution over websockets/SPDY",
"should support port-forward" and ``kubectl cp``)."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
import trio

from tests.conformance.conftest import Namespace, after, container_running
from tests.server.kubectl import read_until

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


async def test_exec_port_forward_and_cp_through_the_api_server(ns: Namespace, tmp_path: Path) -> None:
    script = "mkdir -p /www && echo 'hello from httpd' > /www/index.html && exec httpd -f -p 8080 -h /www"
    await ns.create_pod(ns.pod("web", containers=[ns.container("app", script)]))
    await ns.wait_pod("web", container_running("app"), deadline=after(60))
    base = ["kubectl", "--kubeconfig", str(ns.cluster.kubeconfig), "-n", ns.name]

    async def kubectl(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
        with trio.fail_after(60):
            return await trio.run_process(
                [*base, *args], stdin=stdin, capture_stdout=True, capture_stderr=True, check=False
            )

    done = await kubectl("exec", "web", "--", "sh", "-c", "echo out; echo err >&2; exit 7")
    assert (done.returncode, done.stdout) == (7, b"out\n"), done.stderr
    assert done.stderr.startswith(b"err\n")
    echoed = await kubectl("exec", "-i", "web", "--", "cat", stdin=b"a\nb\n" * 1000)
    assert (echoed.returncode, echoed.stdout) == (0, b"a\nb\n" * 1000), echoed.stderr

    payload = os.urandom(20_000).hex()
    (tmp_path / "up.txt").write_text(payload)
    up = await kubectl("cp", str(tmp_path / "up.txt"), f"{ns.name}/web:/tmp/up.txt")
    assert up.returncode == 0, up.stderr
    down = await kubectl("cp", f"{ns.name}/web:/tmp/up.txt", str(tmp_path / "down.txt"))
    assert down.returncode == 0, down.stderr
    assert (tmp_path / "down.txt").read_text() == payload

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            process: trio.Process = await nursery.start(
                functools.partial(
                    trio.run_process,
                    [*base, "port-forward", "--address", "127.0.0.1", "pod/web", ":8080"],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    check=False,
                )
            )
            try:
                assert process.stdout is not None
                pattern = rb"Forwarding from 127\.0\.0\.1:(\d+) -> 8080"
                banner = await read_until(process.stdout, lambda s: re.search(pattern, s))
                local = int(re.search(pattern, banner)[1])  # type: ignore[index]
                async with httpx.AsyncClient(timeout=20) as client:
                    page = await client.get(f"http://127.0.0.1:{local}/index.html")
                assert (page.status_code, page.text) == (200, "hello from httpd\n")
            finally:
                process.terminate()
