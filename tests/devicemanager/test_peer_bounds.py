"""The device manager's servers against peers that try to cost it more than a request: a registration
with a huge field, a message over the size limit, an endpoint outside the plugin directory, connections
that never speak HTTP/2, a plugin whose devices flap. Real unix sockets; the tests on the real clock carry
an absolute deadline, the flapping one runs on a MockClock."""

from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trio
import trio.testing
from grpclib import GRPCError, Status
from grpclib.client import Channel

from kubelet_trio.aiobridge import AsyncioThread, open_asyncio_thread
from kubelet_trio.boundary import BoundaryErrors, LogBudget
from kubelet_trio.cm.devicemanager import HEALTHY, UNHEALTHY, DeviceManager, checkpoint
from kubelet_trio.cm.devicemanager import manager as manager_module
from kubelet_trio.cm.devicemanager.sim import SimDevicePlugin
from kubelet_trio.cri import grpcserver
from kubelet_trio.cri.gen import v1 as pr
from kubelet_trio.cri.gen import v1beta1 as dp
from kubelet_trio.cri.gen.v1 import services as pr_services
from kubelet_trio.cri.gen.v1beta1 import services as dp_services
from kubelet_trio.fsio import run_inline
from kubelet_trio.logs import KlogTextFormatter, record_fields

WIDGET = "example.com/widget"
DEADLINE = 20.0
BOUNDARY = "device-plugin-registration"
MAX_LINE = 64 * 1024


async def wait_for(predicate: Callable[[], bool], manager: DeviceManager) -> None:
    while not predicate():
        await manager.generation.wait_transition()


async def register(bridge: AsyncioThread, socket: str, request: dp.RegisterRequest) -> None:
    channel = await bridge.run_sync(Channel, path=socket)
    try:
        await bridge.call(dp_services.RegistrationStub(channel).register, request)
    finally:
        await bridge.run_sync(channel.close)


async def list_pod_resources(bridge: AsyncioThread, socket: str) -> pr.ListPodResourcesResponse:
    channel = await bridge.run_sync(Channel, path=socket)
    try:
        stub = pr_services.PodResourcesListerStub(channel)
        response: pr.ListPodResourcesResponse = await bridge.call(stub.list, pr.ListPodResourcesRequest())
        return response
    finally:
        await bridge.run_sync(channel.close)


@pytest.fixture
def all_logs(caplog: pytest.LogCaptureFixture) -> Iterator[Callable[[], list[str]]]:
    """Every record of every logger, formatted as the node writes them."""
    formatter = KlogTextFormatter()
    with caplog.at_level(logging.DEBUG):
        yield lambda: [formatter.format(record) for record in caplog.records]


async def test_a_huge_registration_is_refused_at_once_and_stalls_no_one(
    tmp_path: Path, nursery: trio.Nursery, all_logs: Callable[[], list[str]]
) -> None:
    """hpack's Huffman coder is quadratic in a header: echoing a 512 KiB name into ``grpc-message`` held
    the shared asyncio thread for over a minute, and every plugin and the pod resources API with it."""
    errors = BoundaryErrors()
    manager = DeviceManager(str(tmp_path), boundary_errors=errors, pods=list)
    await nursery.start(manager.run)
    huge = "example.com/" + "w" * (512 * 1024)
    refusal: list[GRPCError] = []
    refused = trio.Event()

    async with open_asyncio_thread() as bridge:

        async def send_huge() -> None:
            request = dp.RegisterRequest(version="v1beta1", endpoint="huge.sock", resource_name=huge)
            with pytest.raises(GRPCError) as exc:
                await register(bridge, manager.socket_path, request)
            refusal.append(exc.value)
            refused.set()

        with trio.fail_after(DEADLINE):
            nursery.start_soon(send_huge)
            await trio.sleep(1)  # the attacker's gap: the well-formed one comes a second later
            started = trio.current_time()
            plugin = SimDevicePlugin.with_devices(WIDGET, manager.plugin_dir, 2)
            await nursery.start(plugin.run)  # registers: answered
            await list_pod_resources(bridge, manager.pod_resources_socket)
            answered = trio.current_time() - started
            await wait_for(lambda: manager.capacity()[0].get(WIDGET) == "2", manager)
            await refused.wait()

    assert answered < 2.0
    [error] = refusal
    assert error.status == Status.UNKNOWN
    assert error.message == f'the ResourceName "{huge[:256]}... ({len(huge)} bytes)" is invalid'
    assert errors.counts[BOUNDARY] == 1
    lines = all_logs()
    assert max(map(len, lines)) < MAX_LINE
    assert any("Peer refused" in line and "(524300 bytes)" in line for line in lines)


async def test_a_message_over_the_limit_is_refused_and_counted(tmp_path: Path, nursery: trio.Nursery) -> None:
    errors = BoundaryErrors()
    manager = DeviceManager(str(tmp_path), boundary_errors=errors)
    await nursery.start(manager.run)
    request = dp.RegisterRequest(
        version="v1beta1", endpoint="x.sock", resource_name="example.com/" + "w" * (5 * 1024 * 1024)
    )
    size = len(bytes(request))
    with trio.fail_after(DEADLINE):
        async with open_asyncio_thread() as bridge:
            with pytest.raises(GRPCError) as exc:
                await register(bridge, manager.socket_path, request)
    assert exc.value.status == Status.RESOURCE_EXHAUSTED
    assert exc.value.message == f"grpc: received message larger than max ({size} vs. {4 * 1024 * 1024})"
    assert errors.counts == {BOUNDARY: 1}


@pytest.mark.parametrize("endpoint", ["../outside.sock", "/abs/outside.sock", "sub/x.sock", "..", ""])
async def test_an_endpoint_must_be_a_file_name_in_the_plugin_directory(
    tmp_path: Path, nursery: trio.Nursery, endpoint: str
) -> None:
    """The kubelet dials the endpoint a plugin names: one outside ``device-plugins/`` is refused, even
    when a device plugin answers there."""
    errors = BoundaryErrors()
    manager = DeviceManager(str(tmp_path), boundary_errors=errors)
    await nursery.start(manager.run)
    with trio.fail_after(DEADLINE):
        outside = SimDevicePlugin.with_devices(WIDGET, str(tmp_path), 1)  # serves tmp/sim-….sock
        await nursery.start(functools.partial(outside.run, register=False))
        name = endpoint.replace("outside.sock", Path(outside.socket).name)
        async with open_asyncio_thread() as bridge:
            with pytest.raises(GRPCError) as exc:
                request = dp.RegisterRequest(version="v1beta1", endpoint=name, resource_name=WIDGET)
                await register(bridge, manager.socket_path, request)
    assert exc.value.status == Status.UNKNOWN
    assert exc.value.message == (
        f'the Endpoint "{name}" is invalid: it must be the file name of a socket in {manager.plugin_dir}'
    )
    assert manager.capacity() == ({}, {})
    assert errors.counts == {BOUNDARY: 1}


async def test_connections_without_the_http2_preface_are_closed(
    tmp_path: Path, nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A peer that connects and says nothing holds a descriptor until the preface timeout; a peer that
    speaks HTTP/2 is not affected. Every refusal is counted, a few are logged."""
    timeout = 0.5
    monkeypatch.setattr(grpcserver, "PREFACE_TIMEOUT", timeout)
    errors = BoundaryErrors()
    manager = DeviceManager(str(tmp_path), boundary_errors=errors)
    await nursery.start(manager.run)
    count = 50
    with trio.fail_after(DEADLINE):
        opened = trio.current_time()
        silent = [await trio.open_unix_socket(manager.socket_path) for _ in range(count)]
        speaking = await trio.open_unix_socket(manager.socket_path)
        await speaking.send_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        closed_after: list[float] = []

        async def until_closed(stream: trio.SocketStream) -> None:
            while await stream.receive_some():  # the server's SETTINGS first, then end of file
                pass
            closed_after.append(trio.current_time() - opened)

        async with trio.open_nursery() as waiting:
            for stream in silent:
                waiting.start_soon(until_closed, stream)
        assert len(closed_after) == count
        assert min(closed_after) >= timeout * 0.9
        with trio.move_on_after(timeout * 2):  # the speaking peer is still connected
            await until_closed(speaking)
            pytest.fail("a connection that sent the preface was closed")
        for stream in [*silent, speaking]:
            await stream.aclose()
    assert errors.counts == {BOUNDARY: count}
    logged = [r for r in caplog.records if r.getMessage() == "Peer refused"]
    assert len(logged) == LogBudget().burst
    assert record_fields(logged[0])["reason"] == "no HTTP/2 preface in time"


@pytest.fixture
def slow_clock() -> trio.testing.MockClock:
    """Virtual time that stands still while the plugin's messages cross the real socket (they take
    milliseconds), and jumps to the next timer once everything has been idle a while."""
    return trio.testing.MockClock(autojump_threshold=0.5)


async def test_flapping_health_is_summarised_and_checkpointed_at_most_once_a_second(
    tmp_path: Path,
    slow_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    writes: list[float] = []
    write = checkpoint.write

    def counting_write(path: str, data: bytes) -> None:
        writes.append(trio.current_time())
        write(path, data)

    monkeypatch.setattr(checkpoint, "write", counting_write)
    flips = 401  # dev-0 ends unhealthy
    with caplog.at_level(logging.INFO, logger="kubelet_trio.cm.devicemanager"):
        async with trio.open_nursery() as nursery:
            manager = DeviceManager(str(tmp_path), run_sync=run_inline)
            await nursery.start(manager.run)
            plugin = SimDevicePlugin.with_devices(WIDGET, manager.plugin_dir, 2)
            with trio.fail_after(600):
                await nursery.start(plugin.run)
                await wait_for(lambda: manager.capacity()[0].get(WIDGET) == "2", manager)
                start = trio.current_time()
                for i in range(flips):
                    await plugin.set_health(["dev-0"], UNHEALTHY if i % 2 == 0 else HEALTHY)
                await plugin.set_health(["dev-last"], HEALTHY)  # the final state: a third device
                await wait_for(lambda: manager.capacity()[0].get(WIDGET) == "3", manager)
                elapsed = trio.current_time() - start
                await trio.sleep(manager_module.DEVICE_REPORT_PERIOD + 1)  # the trailing line and write
                ran = [*writes]  # not the write on shutdown
            nursery.cancel_scope.cancel()

    reports = [r for r in caplog.records if r.getMessage() == "Device plugin reported devices"]
    # at most one line per report period (the first change at once), the last with the final state
    assert len(reports) <= 2 + (elapsed + 1) // manager_module.DEVICE_REPORT_PERIOD + 1
    assert record_fields(reports[-1])["devices"] == 3
    assert sum(record_fields(r)["changes"] for r in reports) >= flips // 10  # counted, not logged
    # at most one write a second (the first change at once), the last with the final state
    assert len([t for t in ran if t >= start]) <= 2 + elapsed // manager_module.CHECKPOINT_PERIOD
    assert all(b - a >= manager_module.CHECKPOINT_PERIOD for a, b in itertools.pairwise(ran))
    _, registered = checkpoint.decode(await trio.Path(manager.checkpoint_path).read_bytes())
    assert registered == {WIDGET: ["dev-1", "dev-last"]}
