"""``kubectl exec``/``attach``/``port-forward``/``cp`` on real containerd, through the fake API server.

kubectl (``/usr/bin/kubectl``) talks to the fake API server over loopback TLS; the API server proxies the
upgrade to the node's Kubelet API (TLS, its kubelet client certificate), which asks containerd for a
streaming URL and proxies the connection there. Nothing in between decodes SPDY or WebSocket: what kubectl
sees is containerd's own streaming server. kubectl first tries WebSocket and falls back to SPDY/3.1 when
the upgrade is refused, as against a real 1.24-era cluster.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio
import trustme

from kubelet_trio.apimode import ApiModeOptions
from kubelet_trio.testing.env import LocalCriEnvironment
from kubelet_trio.testing.fakeapi import FakeApi
from tests.apiserver.harness import MACHINE, node_ready, open_containerd_api_node
from tests.apiserver.pod_status import api_container
from tests.kubeletapi.test_kubelet_api import free_port, server_files, tls_client
from tests.server.kubectl import (
    KUBECTL_LIMIT,
    Kubectl,
    apiserver_tls,
    container_running,
    open_kubectl_endpoint,
    read_until,
)

pytestmark = [
    pytest.mark.containerd,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]

NODE = "stream-node"


@attrs.frozen
class Cluster:
    api: FakeApi
    kubectl: Kubectl
    busybox: str

    async def run_pod(self, name: str, script: str, **container: Any) -> None:
        manifest = {
            "metadata": {"name": name},
            "spec": {
                "nodeName": NODE,
                "restartPolicy": container.pop("restart_policy", "Always"),
                "terminationGracePeriodSeconds": 1,
                "containers": [
                    {"name": "app", "image": self.busybox, "command": ["sh", "-c", script], **container}
                ],
            },
        }
        self.api.create_pod(manifest)
        with trio.fail_after(60):
            await self.api.wait_for(lambda: container_running(self.api, name))


@contextlib.asynccontextmanager
async def open_cluster(
    cri_env: LocalCriEnvironment, tmp_path: Path, ca: trustme.CA, **node_options: Any
) -> AsyncIterator[tuple[Cluster, int]]:
    """The node on containerd behind the fake API server (which proxies pods/exec|attach|portforward to
    it with a client certificate of ``ca``), Ready, with kubectl pointed at the fake; and its port."""
    port = free_port()
    async with open_containerd_api_node(
        cri_env,
        tmp_path,
        NODE,
        options=ApiModeOptions(machine=MACHINE, kubelet_port=port),
        port=port,
        address="127.0.0.1",
        node_ips=("127.0.0.1",),
        **server_files(ca, tmp_path),
        **node_options,
    ) as (api, _client, _runtime, _node):
        api.app.kubelet_tls = apiserver_tls(ca)
        with trio.fail_after(60):
            await api.wait_for(lambda: node_ready(api, NODE))
        async with open_kubectl_endpoint(api, ca, tmp_path) as kubeconfig:
            yield Cluster(api, Kubectl(api, kubeconfig), cri_env.images.busybox), port


@pytest.fixture
async def cluster(cri_env: LocalCriEnvironment, tmp_path: Path) -> AsyncIterator[Cluster]:
    async with open_cluster(cri_env, tmp_path, trustme.CA()) as (cluster, _port):
        yield cluster


async def test_exec_returns_stdout_stderr_and_the_exit_code(cluster: Cluster) -> None:
    await cluster.run_pod("sh", "sleep 3600")
    done = await cluster.kubectl.run("exec", "sh", "--", "sh", "-c", "echo out; echo err >&2; exit 7")
    assert done.returncode == 7, done.stderr
    assert done.stdout == b"out\n"
    assert done.stderr.startswith(b"err\n")

    ok = await cluster.kubectl.run("exec", "sh", "-c", "app", "--", "cat", "/proc/1/cmdline")
    assert (ok.returncode, ok.stdout) == (0, b"sleep\x003600\x00")  # the container's own process


async def test_exec_stdin_is_echoed_by_cat(cluster: Cluster) -> None:
    await cluster.run_pod("cat", "sleep 3600")
    text = b"".join(b"line %d\n" % i for i in range(2000))  # more than one SPDY frame
    done = await cluster.kubectl.run("exec", "-i", "cat", "--", "cat", stdin=text)
    assert (done.returncode, done.stdout) == (0, text), done.stderr


async def test_exec_with_a_tty_sees_the_terminal_and_its_size(cluster: Cluster) -> None:
    """``exec -it`` from a 31-row, 97-column terminal: the command runs on a pty that kubectl's resize
    message made the same size, and the exit code still comes back."""
    await cluster.run_pod("term", "sleep 3600")
    script = (
        'tty; for i in $(seq 100); do s=$(stty size); [ "$s" = "31 97" ] && break; sleep 0.1; done;'
        ' echo "size=$s"; exit 3'
    )
    code, text = await cluster.kubectl.on_terminal(
        "exec", "-it", "term", "--", "sh", "-c", script, rows=31, columns=97
    )
    assert code == 3, text
    assert re.search(r"/dev/pts/\d+", text), text
    assert "size=31 97" in text


async def test_attach_streams_a_running_containers_output_and_stdin(cluster: Cluster) -> None:
    await cluster.run_pod(
        "reader", "read line; echo got:$line; sleep 1", stdin=True, stdinOnce=True, restart_policy="Never"
    )
    done = await cluster.kubectl.run("attach", "-i", "reader", "-c", "app", stdin=b"hello\n")
    assert done.returncode == 0, done.stderr
    assert b"got:hello" in done.stdout

    await cluster.run_pod("ticker", "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done")
    with trio.fail_after(60):
        async with cluster.kubectl.background("attach", "ticker") as process:
            assert process.stdout is not None
            seen = await read_until(process.stdout, lambda s: re.search(rb"tick \d+\n", s))
    assert seen.startswith(b"tick ")


async def test_port_forward_reaches_busybox_httpd(cluster: Cluster) -> None:
    await cluster.run_pod(
        "web",
        "mkdir -p /www && echo 'hello from httpd' > /www/index.html && exec httpd -f -p 8080 -h /www",
        ports=[{"containerPort": 8080}],
    )
    with trio.fail_after(60):
        async with cluster.kubectl.background(
            "port-forward", "--address", "127.0.0.1", "pod/web", ":8080"
        ) as process:
            assert process.stdout is not None
            pattern = rb"Forwarding from 127\.0\.0\.1:(\d+) -> 8080"
            banner = await read_until(process.stdout, lambda s: re.search(pattern, s))
            local = int(re.search(pattern, banner)[1])  # type: ignore[index]
            async with httpx.AsyncClient(timeout=20) as client:
                for _ in range(2):  # two connections through the same forward
                    page = await client.get(f"http://127.0.0.1:{local}/index.html")
                    assert (page.status_code, page.text) == (200, "hello from httpd\n")


async def test_kubectl_cp_both_ways(cluster: Cluster, tmp_path: Path) -> None:
    await cluster.run_pod("files", "sleep 3600")
    source = tmp_path / "upload.txt"
    payload = os.urandom(100_000).hex()
    source.write_text(payload)
    up = await cluster.kubectl.run("cp", str(source), "default/files:/tmp/uploaded.txt", "-c", "app")
    assert up.returncode == 0, up.stderr
    listed = await cluster.kubectl.run("exec", "files", "--", "wc", "-c", "/tmp/uploaded.txt")
    assert listed.stdout.split()[0] == str(len(payload)).encode()

    back = tmp_path / "download.txt"
    with contextlib.suppress(FileNotFoundError):
        back.unlink()
    down = await cluster.kubectl.run("cp", "default/files:/tmp/uploaded.txt", str(back), "-c", "app")
    assert down.returncode == 0, down.stderr
    assert back.read_text() == payload


async def test_exec_into_a_missing_container_or_pod_fails_cleanly(cluster: Cluster) -> None:
    await cluster.run_pod("lonely", "sleep 3600")
    missing = await cluster.kubectl.run("exec", "lonely", "-c", "nope", "--", "true")
    assert missing.returncode != 0
    assert b"container nope is not valid for pod lonely" in missing.stderr
    gone = await cluster.kubectl.run("exec", "ghost", "--", "true")
    assert gone.returncode != 0
    assert b"not found" in gone.stderr


async def test_kubectl_debug_starts_an_ephemeral_container_and_attaches(cluster: Cluster) -> None:
    """``kubectl debug -i``: the API server adds the ephemeral container, the kubelet starts it in the
    running pod, kubectl attaches to it (stdin included) and its status is reported.

    kubectl's stdin stays open until the answer is back, as at a terminal. kubectl creates the container
    with ``stdin`` but not ``stdinOnce``, and for such a container the runtime ends the attach session as
    soon as the client's stdin ends (containerd detaches it, as docker does) and drops what the container
    writes afterwards: piping ``hi`` and EOF at once would race the container's answer.
    """
    await cluster.run_pod("target", "sleep 3600")
    argv = cluster.kubectl.argv(
        *("debug", "-i", "target", "--image", cluster.busybox, "--container", "dbg"),
        *("--", "sh", "-c", "read l; echo dbg:$l"),
    )
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with trio.fail_after(KUBECTL_LIMIT):
        async with trio.open_nursery() as nursery:
            process: trio.Process = await nursery.start(
                functools.partial(trio.run_process, argv, check=False, **pipes)
            )
            assert process.stdin is not None and process.stdout is not None and process.stderr is not None
            await process.stdin.send_all(b"hi\n")
            answer = await read_until(process.stdout, lambda seen: b"\n" in seen)
            await process.stdin.aclose()
            stderr = b"".join([chunk async for chunk in process.stderr])
            code = await process.wait()
    assert (code, answer) == (0, b"dbg:hi\n"), stderr.decode()[-1500:]
    logs = await cluster.kubectl.run("logs", "target", "-c", "dbg")  # through the kubelet's containerLogs
    assert (logs.returncode, logs.stdout) == (0, b"dbg:hi\n"), logs.stderr
    statuses = cluster.api.pod("target")["status"].get("ephemeralContainerStatuses") or []
    assert [s["name"] for s in statuses] == ["dbg"]
    assert api_container(cluster.api, "target", "app")["restartCount"] == 0  # nothing was restarted


async def test_exec_on_containerd_needs_authentication_and_authorization(
    cri_env: LocalCriEnvironment, tmp_path: Path
) -> None:
    """The Kubelet API's streaming routes are ``nodes/proxy`` requests: no client identity → 401, an
    identity the API server's SubjectAccessReview denies → 403, an allowed one reaches containerd."""
    ca = trustme.CA()
    alice, eve = ca.issue_cert("alice", common_name="alice"), ca.issue_cert("eve", common_name="eve")
    async with open_cluster(cri_env, tmp_path, ca, authorization_mode="Webhook") as (cluster, port):
        cluster.api.app.allowed.add(("alice", "create", "nodes/proxy"))
        await cluster.run_pod("guarded", "sleep 3600")
        upgrade = {"Connection": "Upgrade", "Upgrade": "SPDY/3.1"}
        path = "/exec/default/guarded/app?command=true&output=1"
        url = f"https://127.0.0.1:{port}"
        async with tls_client(ca, base_url=url) as nobody:
            answer = await nobody.post(path, headers=upgrade)
            assert (answer.status_code, answer.text) == (401, "Unauthorized\n")
        async with tls_client(ca, eve, base_url=url) as client:
            answer = await client.post(path, headers=upgrade)
            assert (answer.status_code, answer.text) == (
                403,
                "Forbidden (user=eve, verb=create, resource=nodes, subresource(s)=[proxy])\n",
            )
        async with tls_client(ca, alice, base_url=url) as client:
            run = await client.post("/run/default/guarded/app", params={"cmd": "echo through containerd"})
            assert (run.status_code, run.text) == (200, "through containerd\n")
