"""``kubectl exec``/``attach``/``port-forward`` on the simulated runtime, through sim-cri.

The whole path is real: kubectl → the fake API server (TLS) → the Kubelet API (TLS, client certificate)
→ ``CriRuntime`` → the SimRuntime served over a CRI socket (``serve_sim_cri``) → its SPDY streaming server
(:mod:`kubelet_trio.sim.streaming`). Then the Kubelet API's own rules: 401, 403, 400 for a request that
does not upgrade, ``/run``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import attrs
import httpx
import pytest
import trio
import trustme

from kubelet_trio.apimode import ApiModeOptions
from kubelet_trio.cri.remote import open_cri_runtime
from kubelet_trio.fsio import run_in_thread
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.sim.server import serve_sim_cri
from kubelet_trio.testing.fakeapi import FakeApi, open_fake_api
from tests.apiserver.harness import MACHINE, ApiNode, eventually, node_ready, open_api_node, pod_manifest
from tests.kubeletapi.test_kubelet_api import api_node, free_port, server_files, tls_client
from tests.server.kubectl import Kubectl, apiserver_tls, container_running, open_kubectl_endpoint, read_until

NODE = "sim-stream"
needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
STREAMING_FILES = ("httpserver/http11.py", "server/proxy.py", "cri/streaming/", "sim/streaming.py")


@attrs.frozen
class SimCluster:
    api: FakeApi
    kubectl: Kubectl
    sim: SimRuntime
    node: ApiNode

    async def run_pod(self, name: str, script: str) -> None:
        self.api.create_pod(pod_manifest(name, {"app": script}, node=NODE))
        with trio.fail_after(30):
            await self.api.wait_for(lambda: container_running(self.api, name))


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[SimCluster]:
    ca = trustme.CA()
    port = free_port()
    sim = SimRuntime()
    socket_path = str(tmp_path / "sim-cri.sock")
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_sim_cri, sim, socket_path)
        async with (
            open_fake_api() as api,
            open_cri_runtime("unix://" + socket_path, request_timeout=30) as runtime,
            open_api_node(
                api,
                NODE,
                sim=runtime,
                run_sync=run_in_thread,
                options=ApiModeOptions(machine=MACHINE, kubelet_port=port),
                port=port,
                address="127.0.0.1",
                node_ips=("127.0.0.1",),
                memory_backed_volumes=False,
                **server_files(ca, tmp_path),
            ) as node,
        ):
            api.app.kubelet_tls = apiserver_tls(ca)
            with trio.fail_after(30):
                await api.wait_for(lambda: node_ready(api, NODE))
            async with open_kubectl_endpoint(api, ca, tmp_path) as kubeconfig:
                yield SimCluster(api, Kubectl(api, kubeconfig), sim, node)
        nursery.cancel_scope.cancel()


def streaming_tasks() -> list[str]:
    """The live Trio tasks running streaming code (connection handlers, proxies, SPDY sessions)."""
    found: list[str] = []
    pending = [trio.lowlevel.current_root_task()]
    while pending:
        task = pending.pop()
        pending += [child for nursery in task.child_nurseries for child in nursery.child_tasks]
        code = getattr(task.coro, "cr_code", None)
        if code is None or code.co_name == "run":
            continue  # listeners (HttpServer.run, StreamingServer.run) live as long as their server
        if any(part in code.co_filename for part in STREAMING_FILES):
            found.append(code.co_qualname)
    return sorted(found)


def open_sockets() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):  # closed since the listing
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return count


async def settle(check: Callable[[], bool]) -> None:
    """Wait (bounded) until ``check()`` holds: the far ends close asynchronously."""
    await eventually(check, limit=10, period=0.02)


@needs_kubectl
async def test_exec_stdout_stderr_and_exit_codes_follow_the_script(cluster: SimCluster) -> None:
    await cluster.run_pod("sh", 'run; exec sh -c "exit 7" -> 7 "out"')
    scripted = await cluster.kubectl.run("exec", "sh", "--", "sh", "-c", "exit 7")
    assert (scripted.returncode, scripted.stdout) == (7, b"out"), scripted.stderr
    echo = await cluster.kubectl.run("exec", "sh", "-c", "app", "--", "echo", "hi", "there")
    assert (echo.returncode, echo.stdout) == (0, b"hi there\n"), echo.stderr
    unscripted = await cluster.kubectl.run("exec", "sh", "--", "whoami")
    assert (unscripted.returncode, unscripted.stdout) == (126, b"")
    assert unscripted.stderr.startswith(b"sim: no scripted result for exec whoami\n")


@needs_kubectl
async def test_exec_stdin_is_echoed_by_cat(cluster: SimCluster) -> None:
    await cluster.run_pod("cat", "run")
    text = b"".join(b"line %d\n" % i for i in range(5000))  # many SPDY DATA frames each way
    done = await cluster.kubectl.run("exec", "-i", "cat", "--", "cat", stdin=text)
    assert (done.returncode, done.stdout) == (0, text), done.stderr


@needs_kubectl
async def test_exec_on_a_tty_gets_the_terminal_size_from_resize(cluster: SimCluster) -> None:
    await cluster.run_pod("term", "run")
    code, text = await cluster.kubectl.on_terminal(
        "exec", "-it", "term", "--", "stty", "size", rows=31, columns=97
    )
    assert (code, text.strip()) == (0, "31 97")


@needs_kubectl
async def test_attach_streams_scripted_output_and_a_disconnect_leaves_nothing_behind(
    cluster: SimCluster,
) -> None:
    await cluster.run_pod("talk", 'print "hello" "world"; run')
    warm = await cluster.kubectl.run("exec", "talk", "--", "true")  # pools and caches are warm now
    assert warm.returncode == 0, warm.stderr
    await settle(lambda: not streaming_tasks())
    sockets = open_sockets()
    streaming = cluster.sim.streaming
    assert streaming is not None and streaming.active == 0

    with trio.fail_after(30):
        async with cluster.kubectl.background("attach", "talk") as process:
            assert process.stdout is not None
            seen = await read_until(process.stdout, lambda s: b"world\n" in s)
            assert seen == b"hello\nworld\n"
            assert streaming.active == 1
            assert "StreamProxy._copy_both_ways.<locals>.copy" in streaming_tasks()
        # kubectl is gone mid-stream: every proxy, session and connection it used ends with it
    # at most as many sockets as before: an idle pooled connection may also have expired meanwhile
    await settle(lambda: not streaming_tasks() and streaming.active == 0 and open_sockets() <= sockets)
    assert len(cluster.sim.streaming._cache) == 0  # no token left waiting either


@needs_kubectl
async def test_port_forward_echoes_a_listening_port_and_refuses_others(cluster: SimCluster) -> None:
    await cluster.run_pod("echo", "listen 8080; run")
    forward = ("port-forward", "--address", "127.0.0.1", "pod/echo", ":8080", ":9090")
    with trio.fail_after(30):
        async with cluster.kubectl.background(*forward) as process:
            assert process.stdout is not None and process.stderr is not None
            banner = await read_until(process.stdout, lambda s: s.count(b"Forwarding from") == 2)
            ports = {int(remote): int(local) for local, remote in re.findall(rb":(\d+) -> (\d+)", banner)}
            for _ in range(2):  # two connections through the same forward
                client = await trio.open_tcp_stream("127.0.0.1", ports[8080])
                async with client:
                    await client.send_all(b"ping\n")
                    assert await read_until(client, lambda s: s.endswith(b"\n")) == b"ping\n"
            refused = await trio.open_tcp_stream("127.0.0.1", ports[9090])
            async with refused:
                await refused.send_all(b"anyone?\n")
                assert await refused.receive_some() == b""
            errors = await read_until(process.stderr, lambda s: b"connection refused" in s)
            assert b"error forwarding port 9090 to pod" in errors


async def test_exec_needs_authentication_authorization_and_an_upgrade(tmp_path: Path) -> None:
    ca = trustme.CA()
    alice = ca.issue_cert("alice", common_name="alice")
    eve = ca.issue_cert("eve", common_name="eve")
    with trio.fail_after(30):
        async with open_fake_api() as api, api.client() as api_client:
            api.app.allowed.add(("alice", "create", "nodes/proxy"))
            async with api_node(
                tmp_path,
                authorization_mode="Webhook",
                webhook_client=api_client,
                **server_files(ca, tmp_path),
            ) as (node, url):
                (pod,) = await node.apply(
                    {
                        "metadata": {"name": "p", "annotations": {"sim.kubelet-trio.io/app": "run"}},
                        "spec": {"containers": [{"name": "app", "image": "registry.sim/busybox:1.36"}]},
                    }
                )
                await node.wait_for(pod, lambda s: s.phase == "Running")
                upgrade = {"Connection": "Upgrade", "Upgrade": "SPDY/3.1"}
                path = "/exec/default/p/app?command=true&output=1"
                async with tls_client(ca, base_url=url) as nobody:
                    answer = await nobody.post(path, headers=upgrade)
                    assert (answer.status_code, answer.text) == (401, "Unauthorized\n")
                async with tls_client(ca, eve, base_url=url) as client:
                    answer = await client.post(path, headers=upgrade)
                    assert answer.status_code == 403
                    assert (
                        answer.text
                        == "Forbidden (user=eve, verb=create, resource=nodes, subresource(s)=[proxy])\n"
                    )
                async with tls_client(ca, alice, base_url=url) as client:
                    plain = await client.post(path)  # allowed, but no upgrade
                    assert (plain.status_code, plain.text) == (400, "Upgrade request required\n")
                    none = await client.post("/exec/default/p/app?command=true", headers=upgrade)
                    assert none.text == "you must specify at least 1 of stdin, stdout, stderr\n"
                    gone = await client.post("/exec/default/ghost/app?command=true&output=1", headers=upgrade)
                    assert (gone.status_code, gone.text) == (404, "pod does not exist\n")
                    run = await client.post("/run/default/p/app", params={"cmd": "echo hi there"})
                    assert (run.status_code, run.text) == (200, "hi there\n")
                    assert run.headers["content-type"] == "text/plain; charset=utf-8"  # sniffed, as in Go
                    failed = await client.post("/run/default/p/app", params={"cmd": "whoami"})
                    assert failed.status_code == 500
                    assert failed.text.startswith("command 'whoami' exited with 126: sim: no scripted result")


async def test_streaming_routes_are_not_on_the_read_only_port(tmp_path: Path) -> None:
    async with api_node(tmp_path, read_only_port=free_port()) as (node, _):
        client = httpx.AsyncClient(base_url=node.kubelet.http_urls["readonly"])
        async with client:
            answer = await client.post("/exec/default/p/app?command=true&output=1")
            assert answer.status_code == 404
