"""The pod resources API over its socket, with Go's answers: every pod the kubelet was given and the
devices each container holds (one ``ContainerDevices`` per device), the healthy devices, ``Get`` behind
its gate, the rate limit. Real I/O (an in-process device plugin and a grpclib client), so each test has an
absolute deadline; the limiter's arithmetic runs on a MockClock."""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from grpclib import GRPCError, Status
from grpclib.client import Channel

from kubelet_trio.aiobridge import AsyncioThread, open_asyncio_thread, open_lazy_asyncio_thread
from kubelet_trio.api import Pod
from kubelet_trio.apis.podresources import Limiter, PodResourcesServer, serve_pod_resources
from kubelet_trio.boundary import BoundaryErrors
from kubelet_trio.cm.devicemanager import DeviceManager
from kubelet_trio.cm.devicemanager.sim import SimDevicePlugin
from kubelet_trio.cri.gen import v1 as pr
from kubelet_trio.cri.gen.v1 import services

WIDGET = "example.com/widget"
DEADLINE = 10.0


def pod(name: str, count: int) -> Pod:
    containers = [
        {"name": "app", "image": "busybox", "resources": {"limits": {WIDGET: str(count)}}},
        {"name": "side", "image": "busybox"},
    ]
    return Pod.from_dict(
        {
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"containers": containers},
        }
    )


@attrs.define
class Pods:
    """The kubelet's side: all pods it was given, and the active ones."""

    all: list[Pod] = attrs.Factory(list)
    active: list[Pod] = attrs.Factory(list)


@attrs.define
class Client:
    bridge: AsyncioThread
    stub: services.PodResourcesListerStub

    async def call(self, method: Callable[..., Any], request: Any) -> Any:
        return await self.bridge.call(method, request)


@pytest.fixture
async def client_factory(nursery: trio.Nursery) -> AsyncIterator[Callable[[str], Any]]:
    async with open_asyncio_thread() as bridge:
        channels: list[Channel] = []

        async def connect(path: str) -> Client:
            channel = await bridge.run_sync(Channel, path=path)
            channels.append(channel)
            return Client(bridge, services.PodResourcesListerStub(channel))

        yield connect
        for channel in channels:
            await bridge.run_sync(channel.close)


async def wait_for(predicate: Callable[[], bool], manager: DeviceManager) -> None:
    while not predicate():
        await manager.generation.wait_value(functools.partial(int.__lt__, manager.generation.value))


def devices(*ids: str) -> list[pr.ContainerDevices]:
    return [pr.ContainerDevices(resource_name=WIDGET, device_ids=[i]) for i in ids]


async def test_list_allocatable_and_get(
    tmp_path: Path, nursery: trio.Nursery, client_factory: Callable[[str], Any]
) -> None:
    with trio.fail_after(DEADLINE):
        pods = Pods()
        manager = DeviceManager(
            str(tmp_path), pods=lambda: pods.all, active_pods=lambda: pods.active, pod_resources_get=True
        )
        await nursery.start(manager.run)
        assert manager.pod_resources_socket == os.path.join(tmp_path, "pod-resources", "kubelet.sock")
        plugin = SimDevicePlugin.with_devices(WIDGET, manager.plugin_dir, 3)
        await nursery.start(plugin.run)
        await wait_for(lambda: manager.capacity()[1].get(WIDGET) == "3", manager)

        first, second = pod("first", 2), pod("second", 2)
        pods.all = [first, second]
        assert manager.admit(first, []) is None
        assert manager.admit(second, [first]) is not None  # rejected, still among the kubelet's pods
        pods.active = [first]

        client = await client_factory(manager.pod_resources_socket)
        listed = await client.call(client.stub.list, pr.ListPodResourcesRequest())
        assert listed == pr.ListPodResourcesResponse(
            pod_resources=[
                pr.PodResources(
                    name="first",
                    namespace="default",
                    containers=[
                        pr.ContainerResources(name="app", devices=devices("dev-0", "dev-1")),
                        pr.ContainerResources(name="side"),
                    ],
                ),
                pr.PodResources(
                    name="second",
                    namespace="default",
                    containers=[pr.ContainerResources(name="app"), pr.ContainerResources(name="side")],
                ),
            ]
        )
        allocatable = await client.call(
            client.stub.get_allocatable_resources, pr.AllocatableResourcesRequest()
        )
        assert allocatable == pr.AllocatableResourcesResponse(devices=devices("dev-0", "dev-1", "dev-2"))

        got = await client.call(
            client.stub.get, pr.GetPodResourcesRequest(pod_name="first", pod_namespace="default")
        )
        assert got.pod_resources == listed.pod_resources[0]
        with pytest.raises(GRPCError) as exc:
            await client.call(
                client.stub.get, pr.GetPodResourcesRequest(pod_name="x", pod_namespace="default")
            )
        assert (exc.value.status, exc.value.message) == (
            Status.UNKNOWN,
            "pod x in namespace default not found",
        )

        # a pod no longer active gives its devices back before List answers
        pods.active = []
        listed = await client.call(client.stub.list, pr.ListPodResourcesRequest())
        assert [c.devices for p in listed.pod_resources for c in p.containers] == [[], [], [], []]
        assert manager.admit(pod("third", 3), []) is None


async def test_get_is_off_by_default(
    tmp_path: Path, nursery: trio.Nursery, client_factory: Callable[[str], Any]
) -> None:
    with trio.fail_after(DEADLINE):
        manager = DeviceManager(str(tmp_path), pods=lambda: [pod("first", 1)])
        await nursery.start(manager.run)
        client = await client_factory(manager.pod_resources_socket)
        with pytest.raises(GRPCError) as exc:
            await client.call(
                client.stub.get, pr.GetPodResourcesRequest(pod_name="first", pod_namespace="default")
            )
        assert (exc.value.status, exc.value.message) == (
            Status.UNKNOWN,
            "PodResources API Get method disabled",
        )


async def test_no_socket_without_the_kubelets_pods(tmp_path: Path, nursery: trio.Nursery) -> None:
    with trio.fail_after(DEADLINE):
        manager = DeviceManager(str(tmp_path))
        await nursery.start(manager.run)
        assert not await trio.Path(manager.pod_resources_socket).exists()


async def test_calls_over_the_rate_are_refused(tmp_path: Path, client_factory: Callable[[str], Any]) -> None:
    with trio.fail_after(DEADLINE):
        manager = DeviceManager(str(tmp_path))
        server = PodResourcesServer(lambda: [], manager, limiter=Limiter(qps=0, burst=2))
        path = str(tmp_path / "pod-resources" / "kubelet.sock")
        async with open_asyncio_thread() as bridge, trio.open_nursery() as nursery:
            await nursery.start(serve_pod_resources, bridge, path, server)
            client = await client_factory(path)
            for _ in range(2):
                await client.call(client.stub.list, pr.ListPodResourcesRequest())
            with pytest.raises(GRPCError) as exc:
                await client.call(client.stub.get_allocatable_resources, pr.AllocatableResourcesRequest())
            assert (exc.value.status, exc.value.message) == (
                Status.RESOURCE_EXHAUSTED,
                "rejected by rate limit",
            )
            nursery.cancel_scope.cancel()


async def test_clients_are_bounded(tmp_path: Path, client_factory: Callable[[str], Any]) -> None:
    """A request over 4 MiB is refused from its length prefix and counted; a huge name a client sent is
    echoed truncated (whole, it would cost minutes of the shared thread in hpack's Huffman coder)."""
    with trio.fail_after(DEADLINE):
        errors = BoundaryErrors()
        manager = DeviceManager(str(tmp_path))
        server = PodResourcesServer(lambda: [], manager, get_enabled=True)
        path = str(tmp_path / "pod-resources" / "kubelet.sock")
        async with open_asyncio_thread() as bridge, trio.open_nursery() as nursery:
            await nursery.start(
                functools.partial(serve_pod_resources, bridge, path, server, boundary_errors=errors)
            )
            client = await client_factory(path)
            oversize = pr.GetPodResourcesRequest(pod_name="p", pod_namespace="n" * (5 * 1024 * 1024))
            with pytest.raises(GRPCError) as exc:
                await client.call(client.stub.get, oversize)
            assert exc.value.status == Status.RESOURCE_EXHAUSTED
            assert exc.value.message == (
                f"grpc: received message larger than max ({len(bytes(oversize))} vs. {4 * 1024 * 1024})"
            )
            assert errors.counts == {"pod-resources": 1}

            name = "p" * (512 * 1024)
            with trio.fail_after(2), pytest.raises(GRPCError) as exc:
                await client.call(
                    client.stub.get, pr.GetPodResourcesRequest(pod_name=name, pod_namespace="n")
                )
            assert (exc.value.status, exc.value.message) == (
                Status.UNKNOWN,
                f"pod {name[:256]}... ({len(name)} bytes) in namespace n not found",
            )
            nursery.cancel_scope.cancel()


async def test_limiter_is_gos_token_bucket(autojump_clock: trio.testing.MockClock) -> None:
    limiter = Limiter()  # Go's defaults: 100 per second, bursts of 10
    assert [limiter.allow() for _ in range(11)] == [True] * 10 + [False]
    await trio.sleep(0.01)  # one token back
    assert [limiter.allow(), limiter.allow()] == [True, False]
    await trio.sleep(1)  # never more than the burst
    assert sum(limiter.allow() for _ in range(20)) == 10


@attrs.define
class FakeDevices:
    held: dict[tuple[str, str], dict[str, list[str]]] = attrs.Factory(dict)
    updates: int = 0

    def update_allocated_devices(self) -> None:
        self.updates += 1

    def container_devices(self, uid: str, container: str) -> dict[str, list[str]]:
        return self.held.get((uid, container), {})

    def allocatable_devices(self) -> dict[str, list[str]]:
        return {WIDGET: ["b", "a"], "example.com/gadget": ["g"]}


def test_sidecars_are_listed_before_the_containers() -> None:
    spec = {
        "initContainers": [
            {"name": "setup", "image": "busybox"},
            {"name": "proxy", "image": "busybox", "restartPolicy": "Always"},
        ],
        "containers": [{"name": "app", "image": "busybox"}],
    }
    p = Pod.from_dict({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": spec})
    devices = FakeDevices({("u", "proxy"): {WIDGET: ["b", "a"]}})
    server = PodResourcesServer(lambda: [p], devices)
    listed = server.list()
    assert devices.updates == 1  # devices of pods gone are released before the answer
    assert listed.pod_resources == [
        pr.PodResources(
            name="p",
            namespace="ns",
            containers=[
                pr.ContainerResources(name="proxy", devices=devices_of(WIDGET, "a", "b")),
                pr.ContainerResources(name="app"),
            ],
        )
    ]
    assert server.get_allocatable_resources().devices == [
        *devices_of("example.com/gadget", "g"),
        *devices_of(WIDGET, "a", "b"),
    ]


def devices_of(resource: str, *ids: str) -> list[pr.ContainerDevices]:
    return [pr.ContainerDevices(resource_name=resource, device_ids=[i]) for i in ids]


async def test_peers_that_hang_up_or_send_garbage_before_the_grpc_stack_loads_harm_no_one(
    tmp_path: Path, client_factory: Callable[[str], Any]
) -> None:
    """The socket is listened on before grpclib is loaded; the first peers to knock (one hanging up at once,
    one sending bytes that are no HTTP/2, one connecting and saying nothing) are handed to the server with
    the listening socket, and a real client still gets its answer."""
    with trio.fail_after(DEADLINE):
        manager = DeviceManager(str(tmp_path))
        server = PodResourcesServer(lambda: [pod("a", 0)], manager)
        path = str(tmp_path / "pod-resources" / "kubelet.sock")
        async with open_lazy_asyncio_thread() as threads, trio.open_nursery() as nursery:
            await nursery.start(serve_pod_resources, threads, path, server)
            assert not threads.started  # nothing loaded until a peer comes
            hang_up = await trio.open_unix_socket(path)
            await hang_up.aclose()
            garbage = await trio.open_unix_socket(path)
            await garbage.send_all(b"GET / HTTP/1.1\r\n\r\n" + b"\xff" * 4096)
            silent = await trio.open_unix_socket(path)
            client = await client_factory(path)
            answer = await client.call(client.stub.list, pr.ListPodResourcesRequest())
            assert [p.name for p in answer.pod_resources] == ["a"]
            assert threads.started
            await garbage.aclose()
            await silent.aclose()
            nursery.cancel_scope.cancel()
        assert not await trio.Path(path).exists()
