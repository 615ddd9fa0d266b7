"""No CRI client can stop sim-cri: a request that fails unexpectedly or does not decode is answered
INTERNAL, and a connection whose bytes break the HTTP/2 code is closed; each is logged once and counted
under ``grpc``, and the next request is served. Real sockets, so a real-time deadline on each test."""

from __future__ import annotations

import functools
import logging
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpclib.server
import pytest
import trio
from grpclib import GRPCError, Status
from grpclib.client import Channel
from grpclib.encoding.proto import ProtoCodec
from grpclib.protocol import H2Protocol

from kubelet_trio.aiobridge import open_asyncio_thread
from kubelet_trio.boundary import BoundaryErrors
from kubelet_trio.cri import errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.gen.runtime.v1 import services
from kubelet_trio.cri.remote import open_cri_runtime
from kubelet_trio.logs import record_fields
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.sim.server import serve_sim_cri

TEST_DEADLINE = 30


@pytest.fixture
def sock() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="sim-cri-") as d:  # unix socket paths are short
        yield Path(d) / "sim.sock"


@asynccontextmanager
async def served(sim: SimRuntime, sock: Path, errors: BoundaryErrors) -> AsyncIterator[None]:
    async with trio.open_nursery() as nursery:
        await nursery.start(functools.partial(serve_sim_cri, sim, str(sock), boundary_errors=errors))
        yield
        nursery.cancel_scope.cancel()


def error_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_a_request_that_fails_unexpectedly_is_answered_internal_and_counted_once(
    sock: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    version = SimRuntime.version
    calls: list[str] = []

    async def flaky_version(self: SimRuntime, api_version: str) -> pb.VersionResponse:
        calls.append(api_version)
        if len(calls) == 1:
            raise KeyError("a corner only this request reaches")
        return await version(self, api_version)

    monkeypatch.setattr(SimRuntime, "version", flaky_version)
    counted = BoundaryErrors()
    with trio.fail_after(TEST_DEADLINE):
        async with served(SimRuntime(), sock, counted), open_cri_runtime(f"unix://{sock}") as runtime:
            with pytest.raises(errors.CriCallError) as info:
                await runtime.version()
            assert info.value.code == "INTERNAL"
            assert "KeyError" in info.value.message
            assert (await runtime.version()).runtime_name == "kubelet-trio-sim"
    assert counted.counts == {"grpc": 1}
    [record] = error_records(caplog)
    assert record.getMessage() == "Peer failed; closing it"
    assert record_fields(record) == {"boundary": "grpc", "method": "/runtime.v1.RuntimeService/Version"}


class RawCodec(ProtoCodec):
    """Sends ``bytes`` requests as they are: a client that writes whatever it likes."""

    def encode(self, message: Any, message_type: Any) -> bytes:
        return message if isinstance(message, bytes) else super().encode(message, message_type)


async def test_a_request_that_does_not_decode_is_answered_internal_and_counted_once(
    sock: Path, caplog: pytest.LogCaptureFixture
) -> None:
    counted = BoundaryErrors()
    with trio.fail_after(TEST_DEADLINE):
        async with served(SimRuntime(), sock, counted), open_asyncio_thread() as bridge:
            channel = await bridge.run_sync(Channel, path=str(sock), codec=RawCodec())
            stub = services.RuntimeServiceStub(channel)
            try:
                with pytest.raises(GRPCError) as info:
                    await bridge.call(stub.version, b"\x0a\x02\xff\xfe")  # field 1: not UTF-8
                assert info.value.status is Status.INTERNAL
                answer = await bridge.call(stub.version, pb.VersionRequest(version="v1"))
                assert answer.runtime_name == "kubelet-trio-sim"
            finally:
                await bridge.run_sync(channel.close)
    assert counted.counts == {"grpc": 1}
    assert len(error_records(caplog)) == 1


async def test_a_connection_that_breaks_the_protocol_code_is_closed_and_counted_once(
    sock: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = H2Protocol.data_received
    broken: list[H2Protocol] = []

    def data_received(self: H2Protocol, data: bytes) -> None:
        """The server's first connection breaks on its first bytes; clients' connections are untouched."""
        if isinstance(self.handler, grpclib.server.Handler) and broken in ([], [self]):
            broken[:] = [self]
            raise KeyError("a corner only this connection reaches")
        original(self, data)

    counted = BoundaryErrors()
    with trio.fail_after(TEST_DEADLINE):
        async with served(SimRuntime(), sock, counted):
            monkeypatch.setattr(H2Protocol, "data_received", data_received)  # the server's connections
            async with open_cri_runtime(f"unix://{sock}", request_timeout=5) as runtime:
                with pytest.raises(errors.UnavailableError):
                    await runtime.version()
            async with open_cri_runtime(f"unix://{sock}", request_timeout=5) as runtime:
                assert (await runtime.version()).runtime_name == "kubelet-trio-sim"
    assert counted.counts == {"grpc": 1}
    [record] = error_records(caplog)
    assert record_fields(record) == {"boundary": "grpc", "socket": str(sock)}
