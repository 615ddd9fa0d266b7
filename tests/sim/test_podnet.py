"""The pod network of sim-cri: simulated servers answer on real sockets, and port-forward reaches them.

Real I/O on loopback (a random ``127.x.0.0/16`` pod CIDR, all of it the host's on Linux); every test has
an absolute deadline.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path
from typing import cast

import pytest
import trio
import trio.testing

from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.streaming.spdy import SpdyStream
from kubelet_trio.sim import shell
from kubelet_trio.sim.images import ImageConfig
from kubelet_trio.sim.podnet import PAGE, PodNetwork
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.sim.streaming import SimStreamingBackend
from kubelet_trio.sim.views import build_view
from tests.sim.pods import IMAGE, Pods

DEADLINE = 20.0
PORT = 8080
GET = b"GET / HTTP/1.1\r\nHost: pod\r\n\r\n"


def is_page(answer: bytes) -> bool:
    """The simulated server's answer: 200, the page, the connection closed after it."""
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.startswith(b"HTTP/1.1 200 OK\r\n") and b"Connection: close" in head and body == PAGE


@pytest.fixture
async def net_sim() -> SimRuntime:
    return SimRuntime(preloaded_images=[IMAGE], pod_cidr=f"127.{random.randint(64, 254)}.0.0/16")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def get(address: str, port: int) -> bytes:
    async with await trio.open_tcp_stream(address, port) as stream:
        await stream.send_all(GET)
        answer = b""
        while data := await stream.receive_some():
            answer += data
        return answer


async def refused(address: str, port: int) -> bool:
    """trio's ``open_tcp_stream`` reports a refusal as the cause of its own OSError."""
    try:
        await get(address, port)
    except OSError as err:
        causes = err.__cause__.exceptions if isinstance(err.__cause__, BaseExceptionGroup) else (err,)
        return all(isinstance(cause, ConnectionRefusedError) for cause in causes)
    return False


async def test_a_listening_container_answers_on_its_pod_ip_and_mapped_host_port_until_it_stops(
    net_sim: SimRuntime, tmp_path: Path
) -> None:
    pods = Pods(net_sim, tmp_path)
    host_port = free_port()
    config = pods.sandbox_config({"web": f"listen {PORT}"})
    config.port_mappings = [pb.PortMapping(container_port=PORT, host_port=host_port)]
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            await nursery.start(PodNetwork(net_sim).run)
            sandbox_id = await net_sim.run_pod_sandbox(config)
            container_id = await pods.container(sandbox_id, config, "web")
            ip = net_sim.pod_address(sandbox_id)
            assert ip is not None and ip.startswith("127.")
            await trio.testing.wait_all_tasks_blocked()

            assert is_page(await get(ip, PORT))
            assert (await get("127.0.0.1", host_port)).startswith(b"HTTP/1.1 200 OK\r\n")

            await net_sim.stop_container(container_id, 0)
            await trio.testing.wait_all_tasks_blocked()
            assert await refused(ip, PORT)
            assert await refused("127.0.0.1", host_port)
            nursery.cancel_scope.cancel()


async def test_port_forward_pipes_to_the_pods_server(net_sim: SimRuntime, tmp_path: Path) -> None:
    pods = Pods(net_sim, tmp_path)
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            await nursery.start(PodNetwork(net_sim).run)
            sandbox_id, config = await pods.sandbox({"web": f"listen {PORT}"})
            await pods.container(sandbox_id, config, "web")
            await trio.testing.wait_all_tasks_blocked()
            forward = SimStreamingBackend(net_sim, pod_network=True).forwarder(
                pb.PortForwardRequest(pod_sandbox_id=sandbox_id)
            )

            client, data = trio.testing.memory_stream_pair()
            async with trio.open_nursery() as session:
                session.start_soon(forward, PORT, cast("SpdyStream", data))
                await client.send_all(GET)
                answer = b""
                while chunk := await client.receive_some():
                    answer += chunk
            assert is_page(answer)

            with pytest.raises(ConnectionRefusedError):
                await forward(PORT + 1, cast("SpdyStream", trio.testing.memory_stream_pair()[1]))
            nursery.cancel_scope.cancel()


async def test_image_volume_shows_the_images_files_under_its_sub_path_read_only() -> None:
    mount = pb.Mount(container_path="/mnt/iv", readonly=True, image=pb.ImageSpec(image=IMAGE))
    with_sub_path = pb.Mount.parse(bytes(mount) + b"\x52\x03etc")  # image_sub_path = "etc" (field 10)
    sandbox = pb.PodSandboxConfig(metadata=pb.PodSandboxMetadata(name="p"))

    def view(mount: pb.Mount) -> shell.View:
        config = pb.ContainerConfig(mounts=[mount])
        return build_view(sandbox, config, ImageConfig(), processes=lambda: (), listening_ports=lambda: ())

    def run(view: shell.View, command: str) -> int:
        outcome = shell.run(["sh", "-c", command], view)
        assert outcome is not None
        return outcome.code

    whole = view(mount)
    assert run(whole, "ls -A /mnt/iv/bin/sh && /mnt/iv/bin/ls /mnt/iv") == 0
    assert run(whole, "touch /mnt/iv/x") == 1
    sub = view(with_sub_path)
    assert run(sub, "ls /mnt/iv/passwd") == 0
    assert run(sub, "ls /mnt/iv/etc/passwd") == 1
    assert "root:x:0:0" in (sub.read("/mnt/iv/passwd") or "")
