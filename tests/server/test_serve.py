"""The servers on real sockets (kubelet_trio.httpserver.http11): ports, streaming, bind failures."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import trio

from kubelet_trio.testing.registry import free_port
from tests.server.harness import open_test_node, pod_manifest


async def test_servers_listen_where_configured_and_follow_streams(tmp_path: Path) -> None:
    healthz_port, read_only_port = free_port(), free_port()
    with trio.fail_after(20):
        async with open_test_node(
            tmp_path, healthz_port=healthz_port, read_only_port=read_only_port, address="127.0.0.1"
        ) as node:
            assert node.kubelet.http_urls == {
                "healthz": f"http://127.0.0.1:{healthz_port}",
                "readonly": f"http://127.0.0.1:{read_only_port}",
            }
            (pod,) = await node.apply(
                pod_manifest("job", {"app": 'print "first"; exit 0 after 4s'}, restart_policy="Never")
            )
            await node.wait_running(pod)
            async with httpx.AsyncClient(timeout=10) as client:
                healthz = await client.get(f"http://127.0.0.1:{healthz_port}/healthz")
                assert (healthz.status_code, healthz.text) == (200, "ok")
                # The healthz port serves nothing else.
                assert (await client.get(f"http://127.0.0.1:{healthz_port}/pods")).status_code == 404
                url = f"http://127.0.0.1:{read_only_port}/containerLogs/default/job/app"
                received: list[str] = []
                async with client.stream("GET", url, params={"follow": "true"}) as response:
                    chunks = response.aiter_text()
                    received.append(await anext(chunks))  # streamed while the container still runs
                    assert received == ["first\n"]
                    (pod_dir,) = node.logs_dir.glob("default_job_*")
                    with (pod_dir / "app" / "0.log").open("a") as f:
                        f.write("2024-01-01T00:00:00Z stdout F later\n")
                    received += [chunk async for chunk in chunks]  # ends when the container exits
                assert "".join(received) == "first\nlater\n"


async def test_healthz_port_in_use_is_retried_without_stopping_the_node(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with trio.fail_after(10):
            async with open_test_node(tmp_path, healthz_port=port) as node:
                assert node.kubelet.ready.value
                assert "healthz" not in node.kubelet.http_urls
