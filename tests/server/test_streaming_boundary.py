"""No streaming client can stop the server: a session that fails in a way nobody expected is that
session's alone (logged once, counted under ``streaming``, closed), the next one is served; and hostile
SPDY or resize bytes end only their own session, or only their resizes."""

from __future__ import annotations

import json
import logging
import struct

import pytest
import trio
import trio.testing
import trio_util

from kubelet_trio.boundary import BoundaryErrors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.streaming.remotecommand import PROTOCOL_V4, ExecIO, Runner, TerminalSize, _read_resizes
from kubelet_trio.cri.streaming.server import StreamingServer
from kubelet_trio.cri.streaming.spdy import SpdyConnection, SpdyStream
from kubelet_trio.logs import record_fields
from kubelet_trio.server import proxy as proxy_module
from kubelet_trio.server.proxy import StreamProxy
from tests.server.test_streaming_units import SpdyClient

TEST_DEADLINE = 10  # seconds of real time: these sessions run over loopback TCP


def error_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR]


class FlakyBackend:
    """Exec whose first run breaks with an exception nobody handles; later runs print ``ok``."""

    def __init__(self) -> None:
        self.runs = 0

    def exec_runner(self, request: pb.ExecRequest) -> Runner:
        async def run(io: ExecIO) -> int:
            self.runs += 1
            if self.runs == 1:
                raise KeyError("a corner only this session reaches")
            assert io.stdout is not None
            await io.stdout.send_all(b"ok")
            return 0

        return run


async def open_session(server: StreamingServer) -> SpdyClient:
    """An exec session through the server's HTTP upgrade, with its error and stdout streams opened."""
    url = server.get_exec(pb.ExecRequest(container_id="c1", cmd=["x"], stdout=True))
    stream = await trio.open_tcp_stream("127.0.0.1", int(server.base_url.rsplit(":", 1)[1]))
    path = url.removeprefix(server.base_url)
    await stream.send_all(
        f"POST {path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
        f"X-Stream-Protocol-Version: {PROTOCOL_V4}\r\nContent-Length: 0\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = await stream.receive_some()
        assert chunk, "closed before the upgrade answer"
        head += chunk
    assert head.startswith(b"HTTP/1.1 101 ")
    client = SpdyClient(stream)
    client.buffer = head.split(b"\r\n\r\n", 1)[1]
    await client.syn_stream(1, {"streamtype": ["error"]})
    await client.syn_stream(3, {"streamtype": ["stdout"]})
    return client


async def read_to_the_end(client: SpdyClient) -> dict[int, bytes]:
    """Data per stream id until the server closes the connection."""
    data: dict[int, bytes] = {}
    while True:
        try:
            control, stream_id, _, payload = await client.frame()
        except AssertionError:  # "connection closed"
            return data
        if not control:
            data[stream_id] = data.get(stream_id, b"") + payload


async def test_a_session_that_breaks_is_closed_counted_once_and_the_next_is_served(
    caplog: pytest.LogCaptureFixture,
) -> None:
    errors = BoundaryErrors()
    server = StreamingServer(FlakyBackend(), boundary_errors=errors)  # type: ignore[arg-type]
    with trio.fail_after(TEST_DEADLINE):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            broken = await open_session(server)
            assert await read_to_the_end(broken) == {}  # closed without a status
            await broken.stream.aclose()
            assert errors.counts == {"streaming": 1}
            [record] = error_records(caplog)
            assert record.getMessage() == "Peer failed; closing it"
            assert record_fields(record) == {"boundary": "streaming", "kind": "exec", "target": "c1"}

            served = await open_session(server)
            data = await read_to_the_end(served)
            assert data[3] == b"ok"
            assert json.loads(data[1]) == {"metadata": {}, "status": "Success"}
            await served.stream.aclose()
            nursery.cancel_scope.cancel()
    assert errors.counts == {"streaming": 1}
    assert len(error_records(caplog)) == 1
    assert server.active == 0


async def test_a_short_rst_stream_frame_ends_only_its_session(caplog: pytest.LogCaptureFixture) -> None:
    """A RST_STREAM of 2 bytes used to raise struct.error out of the frame reader."""
    client_side, server_side = trio.testing.memory_stream_pair()
    connection = SpdyConnection(server_side)
    with trio.fail_after(TEST_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(connection.run)
            await client_side.send_all(struct.pack(">HHI", 0x8003, 3, 2) + b"\0\1")
            await connection.closed.wait()
    assert error_records(caplog) == []


async def feed_resizes(*messages: bytes) -> TerminalSize | None:
    client_side, server_side = trio.testing.memory_stream_pair()
    connection = SpdyConnection(server_side)
    client = SpdyClient(client_side)
    value: trio_util.AsyncValue[TerminalSize | None] = trio_util.AsyncValue(None)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(connection.run)
        await client.syn_stream(1, {"streamtype": ["resize"]})
        stream: SpdyStream = await connection.accept()
        for i, message in enumerate(messages):
            await client.data(1, message, fin=i == len(messages) - 1)
        await _read_resizes(stream, value)  # returns at the client's FIN, whatever came before
        nursery.cancel_scope.cancel()
    return value.value


@pytest.mark.parametrize(
    "garbage",
    [b'{"Width": "wide", "Height": 1}', b'{"Width": 1e400}', b"[" * 100_000, b"x" * 10_000, b"7"],
)
async def test_a_resize_message_that_is_not_a_size_ends_only_the_resizes(garbage: bytes) -> None:
    with trio.fail_after(TEST_DEADLINE):
        size = await feed_resizes(b'{"Width": 80, "Height": 24}', garbage, b'{"Width": 100, "Height": 50}')
    assert size == TerminalSize(80, 24)


async def test_a_proxied_stream_that_breaks_is_closed_counted_once_and_the_next_is_proxied(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    backends = [trio.testing.memory_stream_pair() for _ in range(2)]
    dialled: list[str] = []

    async def dial(url: str, ssl_context: object) -> trio.abc.Stream:
        dialled.append(url)
        if len(dialled) == 1:
            raise KeyError("a corner only this stream reaches")
        return backends[1][0]

    monkeypatch.setattr(proxy_module, "_dial", dial)
    errors = BoundaryErrors()
    proxy = StreamProxy(boundary_errors=errors)
    url = "http://127.0.0.1:1/exec/one-time-token"
    with trio.fail_after(TEST_DEADLINE):
        client, client_far = trio.testing.memory_stream_pair()
        await proxy.proxy(client_far, url, "POST", [])
        assert await client.receive_some() == b""  # closed
        assert errors.counts == {"streaming": 1}
        [record] = error_records(caplog)
        assert record_fields(record) == {"boundary": "streaming", "peer": None, "backend": "127.0.0.1:1"}

        client, client_far = trio.testing.memory_stream_pair()
        backend_far = backends[1][1]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(proxy.proxy, client_far, url, "POST", [])
            head = await backend_far.receive_some()
            assert head.startswith(b"POST /exec/one-time-token HTTP/1.1\r\n")
            await backend_far.send_all(b"HTTP/1.1 101 Switching Protocols\r\n\r\n")
            assert await client.receive_some() == b"HTTP/1.1 101 Switching Protocols\r\n\r\n"
            await client.aclose()
    assert proxy.active == 0
    assert errors.counts == {"streaming": 1}
    assert len(error_records(caplog)) == 1


async def test_a_client_gone_before_the_502_is_not_an_error(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def dial(url: str, ssl_context: object) -> trio.abc.Stream:
        raise ConnectionRefusedError(111, "refused")

    monkeypatch.setattr(proxy_module, "_dial", dial)
    errors = BoundaryErrors()
    client, client_far = trio.testing.memory_stream_pair()
    await client.aclose()
    await StreamProxy(boundary_errors=errors).proxy(client_far, "http://127.0.0.1:1/exec/t", "POST", [])
    assert not errors.counts
    assert error_records(caplog) == []


async def test_a_request_that_breaks_the_streaming_server_is_logged_without_its_token(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The URL's token is the session's only credential: a failure before the upgrade logs the path
    with the token masked, counts under ``http`` and answers 500."""
    errors = BoundaryErrors()
    server = StreamingServer(FlakyBackend(), boundary_errors=errors)  # type: ignore[arg-type]

    async def broken(self: StreamingServer, request: object) -> None:
        raise KeyError("a corner only this request reaches")

    monkeypatch.setattr(StreamingServer, "_handle", broken)
    with trio.fail_after(TEST_DEADLINE):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            url = server.get_exec(pb.ExecRequest(container_id="c1", cmd=["x"], stdout=True))
            token = url.rsplit("/", 1)[1]
            stream = await trio.open_tcp_stream("127.0.0.1", int(server.base_url.rsplit(":", 1)[1]))
            await stream.send_all(f"GET /exec/{token} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            answer = b""
            while chunk := await stream.receive_some():
                answer += chunk
            await stream.aclose()
            nursery.cancel_scope.cancel()
    assert answer.startswith(b"HTTP/1.1 500 Internal Server Error\r\n")
    assert errors.counts == {"http": 1}
    [record] = error_records(caplog)
    assert record_fields(record)["request"] == "GET /exec/<token>"
    assert token not in caplog.text
