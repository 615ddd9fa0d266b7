"""The read-only server of a node on real containerd: logs of real processes, streamed while they run."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import trio

from kubelet_trio.cri.remote import open_cri_runtime
from kubelet_trio.testing.env import LocalCriEnvironment, remove_all_pods
from kubelet_trio.testing.node import open_node
from kubelet_trio.testing.registry import free_port

pytestmark = pytest.mark.containerd

NODE = "server-logs"
SCRIPT = "echo one; echo two; sleep 1; echo three; sleep 1; echo four >&2; exit 0"


async def test_container_logs_of_a_real_container(cri_env: LocalCriEnvironment, tmp_path: Path) -> None:
    port = free_port()
    manifest = {
        "metadata": {"name": "talker"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "app", "image": cri_env.images.docker_busybox, "command": ["sh", "-c", SCRIPT]}
            ],
        },
    }
    with trio.fail_after(90):
        async with open_cri_runtime(cri_env.endpoint, request_timeout=30) as runtime:
            try:
                async with (
                    open_node(
                        runtime,
                        NODE,
                        read_only_port=port,
                        address="127.0.0.1",
                        pod_logs_dir=str(tmp_path / "l"),
                    ) as node,
                    httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client,
                ):
                    (pod,) = await node.apply(manifest)
                    await node.wait_for(
                        pod, lambda s: any(c.state and c.state.running for c in s.container_statuses or ())
                    )
                    url = "/containerLogs/default/talker/app"
                    chunks: list[str] = []
                    async with client.stream("GET", url, params={"follow": "true"}) as response:
                        chunks += [chunk async for chunk in response.aiter_text()]
                    # Streamed as printed, ended by the container's exit.
                    assert "".join(chunks) == "one\ntwo\nthree\nfour\n"
                    assert len(chunks) >= 2
                    await node.wait_for_phase(pod, "Succeeded")
                    assert (await client.get(url)).text == "one\ntwo\nthree\nfour\n"
                    assert (await client.get(url, params={"tailLines": 2})).text == "three\nfour\n"
                    assert (await client.get(url, params={"stream": "stderr"})).text == "four\n"
                    stamped = (await client.get(url, params={"timestamps": "1", "tailLines": 1})).text
                    assert stamped.endswith("Z four\n")
            finally:
                await remove_all_pods(cri_env.endpoint, NODE)
