"""The Trio-native gRPC channel: against the simulated runtime's grpclib server, and against scripted HTTP/2
servers on a unix socket that answer each call as a test needs (errors, big or split answers, dropped
connections, garbage, requests that hang)."""

from __future__ import annotations

import logging
import socket
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import attrs
import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import pytest
import trio
import trio_util
from grpclib import GRPCError, Status
from h2.errors import ErrorCodes

from kubelet_trio.boundary import BoundaryErrors
from kubelet_trio.cri import errors, h2channel
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.h2channel import ConnectionLost, ProtocolViolation, grpc_timeout, open_h2_channel
from kubelet_trio.cri.remote import open_cri_runtime
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.sim.server import serve_sim_cri

TEST_DEADLINE = 30  # seconds: every real-I/O test carries an absolute deadline
VERSION = "/runtime.v1.RuntimeService/Version"
ECHO = "/test.Echo/Echo"


def framed(message: bytes, flag: int = 0) -> bytes:
    return bytes([flag]) + len(message).to_bytes(4, "big") + message


def version_answer(name: str = "scripted") -> bytes:
    return bytes(pb.VersionResponse(version="0.1.0", runtime_name=name, runtime_api_version="v1"))


def calls_in_flight(channel: h2channel.H2Channel) -> int:
    """Calls waiting for their answer on ``channel`` (a cancelled call is not one: it returned)."""
    connection = channel._connection
    return len(connection.calls) if connection is not None else 0


def seconds(timeout: bytes) -> float:
    """A ``grpc-timeout`` value in seconds."""
    units = {b"n": 1e-9, b"u": 1e-6, b"m": 1e-3, b"S": 1.0, b"M": 60.0, b"H": 3600.0}
    return int(timeout[:-1]) * units[timeout[-1:]]


@attrs.define(eq=False)
class Request:
    stream_id: int
    headers: dict[bytes, bytes]
    body: bytearray = attrs.Factory(bytearray)


@attrs.define(eq=False)
class Peer:
    """One client connection as a scripted server sees it; handlers answer through it."""

    stream: trio.SocketStream
    server: ScriptedServer
    h2: h2.connection.H2Connection = attrs.Factory(
        lambda: h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding=None))
    )
    requests: dict[int, Request] = attrs.Factory(dict)
    window: trio_util.RepeatedEvent = attrs.Factory(trio_util.RepeatedEvent)
    lock: trio.Lock = attrs.Factory(trio.Lock)

    async def flush(self) -> None:
        async with self.lock:
            data = self.h2.data_to_send()
            if data:
                await self.stream.send_all(data)

    async def answer(
        self,
        request: Request,
        body: bytes,
        *,
        status: int | None = 0,
        message: bytes = b"",
        frame: int = 16384,
        headers: tuple[tuple[bytes, bytes], ...] = (
            (b":status", b"200"),
            (b"content-type", b"application/grpc"),
        ),
    ) -> None:
        """HEADERS, ``body`` (already framed) in DATA frames of at most ``frame`` bytes as the client's
        flow-control window allows, then trailers with ``status`` (None: no grpc-status)."""
        stream_id = request.stream_id
        self.h2.send_headers(stream_id, list(headers))
        while body:
            size = min(frame, len(body), self.h2.local_flow_control_window(stream_id))
            if size <= 0:
                await self.flush()
                await self.window.wait()
                continue
            self.h2.send_data(stream_id, body[:size])
            body = body[size:]
            await self.flush()
        trailers = [(b"grpc-status", str(status).encode())] if status is not None else [(b"x-other", b"1")]
        if message:
            trailers.append((b"grpc-message", message))
        self.h2.send_headers(stream_id, trailers, end_stream=True)
        await self.flush()

    async def trailers_only(self, request: Request, status: int, message: bytes) -> None:
        headers = [
            (b":status", b"200"),
            (b"content-type", b"application/grpc"),
            (b"grpc-status", str(status).encode()),
            (b"grpc-message", message),
        ]
        self.h2.send_headers(request.stream_id, headers, end_stream=True)
        await self.flush()

    async def read(self, nursery: trio.Nursery) -> None:
        self.h2.initiate_connection()
        if self.server.max_concurrent_streams is not None:
            limit = self.server.max_concurrent_streams
            self.h2.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: limit})
        await self.flush()
        while data := await self.stream.receive_some(65536):
            for event in self.h2.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    assert event.stream_id is not None and event.headers is not None
                    headers = {bytes(k): bytes(v) for k, v in event.headers}
                    self.requests[event.stream_id] = Request(event.stream_id, headers)
                    if self.server.answer_early:
                        nursery.start_soon(self.server.handler, self, self.requests[event.stream_id])
                elif isinstance(event, h2.events.DataReceived):
                    assert event.stream_id is not None and event.flow_controlled_length is not None
                    self.requests[event.stream_id].body += event.data or b""
                    self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, h2.events.StreamEnded) and not self.server.answer_early:
                    assert event.stream_id is not None
                    request = self.requests[event.stream_id]
                    self.server.requests.append(request)
                    self.server.open_streams += 1
                    self.server.peak_streams = max(self.server.peak_streams, self.server.open_streams)
                    nursery.start_soon(self._handle, request)
                elif isinstance(event, h2.events.StreamReset):
                    self.server.resets.append(ErrorCodes(event.error_code))
                    self.server.reset_seen.set()
                elif isinstance(event, h2.events.PingAckReceived):
                    self.server.pings_acked += 1
                elif isinstance(event, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
                    self.window.set()
            self.server.received.set()
            await self.flush()

    async def _handle(self, request: Request) -> None:
        try:
            await self.server.handler(self, request)
        finally:
            self.server.open_streams -= 1


Handler = Callable[[Peer, Request], Awaitable[None]]


@attrs.define(eq=False)
class ScriptedServer:
    """An HTTP/2 server on a unix socket; ``handler`` answers each request (or does not)."""

    path: str
    handler: Handler
    max_concurrent_streams: int | None = None
    #: Run the handler as soon as a request's HEADERS arrive, before its message.
    answer_early: bool = False
    connections: int = 0
    requests: list[Request] = attrs.Factory(list)
    resets: list[ErrorCodes] = attrs.Factory(list)
    open_streams: int = 0
    peak_streams: int = 0
    pings_acked: int = 0
    received: trio_util.RepeatedEvent = attrs.Factory(trio_util.RepeatedEvent)
    reset_seen: trio.Event = attrs.Factory(trio.Event)

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        await sock.bind(self.path)
        sock.listen()
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, self._serve, [trio.SocketListener(sock)])
            task_status.started()

    async def _serve(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        peer = Peer(stream, self)
        async with stream, trio.open_nursery() as nursery:
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError, h2.exceptions.ProtocolError):
                await peer.read(nursery)
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def scripted(
    handler: Handler, *, max_concurrent_streams: int | None = None, answer_early: bool = False
) -> AsyncIterator[ScriptedServer]:
    with tempfile.TemporaryDirectory(prefix="h2-") as directory, trio.fail_after(TEST_DEADLINE):
        server = ScriptedServer(f"{directory}/s.sock", handler, max_concurrent_streams, answer_early)
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            yield server
            nursery.cancel_scope.cancel()


async def echo(peer: Peer, request: Request) -> None:
    """Answer with the request's own message, or its size when it is big."""
    message = bytes(request.body[5:])
    if len(message) > 1000:
        message = str(len(message)).encode()
    await peer.answer(request, framed(message))


async def hang_then_echo(peer: Peer, request: Request) -> None:
    """Hang on a request whose message is b"hang"; echo any other."""
    if bytes(request.body[5:]) == b"hang":
        await trio.sleep_forever()
    await echo(peer, request)


def test_grpc_timeout_format() -> None:
    assert grpc_timeout(1.5) == b"1500000u"  # the finest unit that fits 8 digits
    assert grpc_timeout(120) == b"120000m"
    assert grpc_timeout(0.0000000001) == b"1n"  # rounded up: never a shorter deadline than the caller's
    assert grpc_timeout(0) == b"1n"
    assert grpc_timeout(10**12) == b"99999999H"  # the largest value the format has


# Against the simulated runtime's grpclib server


@asynccontextmanager
async def sim_cri(sim: SimRuntime) -> AsyncIterator[str]:
    with tempfile.TemporaryDirectory(prefix="h2-sim-") as directory, trio.fail_after(TEST_DEADLINE):
        path = f"{directory}/sim.sock"
        async with trio.open_nursery() as nursery:
            await nursery.start(serve_sim_cri, sim, path)
            yield path
            nursery.cancel_scope.cancel()


async def test_unary_calls_to_a_grpclib_server() -> None:
    async with sim_cri(SimRuntime()) as path, open_h2_channel(path) as channel:
        answer = await channel.unary(VERSION, bytes(pb.VersionRequest(version="v1")))
        assert pb.VersionResponse.parse(answer).runtime_api_version == "v1"
        missing = bytes(pb.ContainerStatusRequest(container_id="nope"))
        with pytest.raises(GRPCError) as info:
            await channel.unary("/runtime.v1.RuntimeService/ContainerStatus", missing)
        assert info.value.status is Status.NOT_FOUND and "nope" in (info.value.message or "")

        answers: list[bytes] = []

        async def call() -> None:
            answers.append(await channel.unary(VERSION, bytes(pb.VersionRequest())))

        async with trio.open_nursery() as nursery:  # many calls in flight on the one connection
            for _ in range(40):
                nursery.start_soon(call)
        assert len(answers) == 40 and len(set(answers)) == 1
        assert calls_in_flight(channel) == 0


async def test_cri_runtime_over_the_channel() -> None:
    sim = SimRuntime()
    async with sim_cri(sim) as path, open_cri_runtime(f"unix://{path}") as rt:
        image = await rt.pull_image(pb.ImageSpec(image="registry.sim/busybox:1"))
        assert [i.id for i in await rt.list_images()] == [image]
        with pytest.raises(errors.NotFoundError):
            await rt.container_status("nope")
        assert (await rt.version()).runtime_name == (await sim.version()).runtime_name


# Against scripted servers


async def test_request_and_answer_headers() -> None:
    async with scripted(echo) as server, open_h2_channel(server.path) as channel:
        assert await channel.unary(ECHO, b"ping") == b"ping"
        [request] = server.requests
        assert request.headers[b":method"] == b"POST"
        assert request.headers[b":scheme"] == b"http"
        assert request.headers[b":path"] == ECHO.encode()
        assert request.headers[b"content-type"] == b"application/grpc"
        assert request.headers[b"te"] == b"trailers"
        assert 0 < seconds(request.headers[b"grpc-timeout"]) <= TEST_DEADLINE  # the caller's deadline
        assert bytes(request.body) == framed(b"ping")


async def test_trailers_only_error_with_a_percent_encoded_message() -> None:
    async def not_found(peer: Peer, request: Request) -> None:
        await peer.trailers_only(request, Status.NOT_FOUND.value, b"container caf%C3%A9: 100%25 gone")

    async with scripted(not_found) as server, open_cri_runtime(f"unix://{server.path}") as rt:
        with pytest.raises(errors.NotFoundError) as info:
            await rt.container_status("cafe")
        assert info.value.message == "container café: 100% gone"
        assert info.value.code == "NOT_FOUND"


async def test_error_status_in_trailers_after_headers() -> None:
    async def unavailable(peer: Peer, request: Request) -> None:
        await peer.answer(request, b"", status=Status.UNAVAILABLE.value, message=b"try%20later")

    async with scripted(unavailable) as server, open_h2_channel(server.path) as channel:
        with pytest.raises(GRPCError) as info:
            await channel.unary(ECHO, b"x")
        assert (info.value.status, info.value.message) == (Status.UNAVAILABLE, "try later")


@pytest.mark.parametrize("window", [h2channel.RECEIVE_WINDOW, 65535])
async def test_big_answer_split_over_many_frames(window: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer far above HTTP/2's default 65 535-byte window, in small frames. With the windows the
    client gives by default it never waits; with HTTP/2's defaults the client must hand the stream's
    and the connection's window back as it reads, or the server stalls (and the test deadline fails it)."""
    monkeypatch.setattr(h2channel, "RECEIVE_WINDOW", window)
    big = bytes(range(256)) * 1200  # 307 200 bytes

    async def large(peer: Peer, request: Request) -> None:
        await peer.answer(request, framed(big), frame=1000)

    async with scripted(large) as server, open_h2_channel(server.path) as channel:
        assert await channel.unary(ECHO, b"") == big
        assert await channel.unary(ECHO, b"") == big  # the connection window was handed back too
        assert server.connections == 1


async def test_request_larger_than_the_window_waits_for_window_updates() -> None:
    async with scripted(echo) as server, open_h2_channel(server.path) as channel:
        assert await channel.unary(ECHO, b"x" * 200_000) == b"200000"
        assert bytes(server.requests[0].body[5:]) == b"x" * 200_000


async def test_the_peers_stream_limit_is_respected() -> None:
    async def slow_echo(peer: Peer, request: Request) -> None:
        await trio.sleep(0.01)
        await echo(peer, request)

    async with (
        scripted(slow_echo, max_concurrent_streams=1) as server,
        open_h2_channel(server.path) as channel,
    ):
        answers: list[bytes] = []

        async def call(i: int) -> None:
            answers.append(await channel.unary(ECHO, str(i).encode()))

        async with trio.open_nursery() as nursery:
            for i in range(5):
                nursery.start_soon(call, i)
        assert sorted(answers) == [b"0", b"1", b"2", b"3", b"4"]
        assert server.peak_streams == 1


async def test_an_answer_before_the_whole_request_frees_the_stream() -> None:
    """The runtime may answer (an error, say) before it has read a big request; the rest is not sent and
    the stream is reset, so it no longer counts against the runtime's stream limit."""

    async def refuse_at_once(peer: Peer, request: Request) -> None:
        await peer.trailers_only(request, Status.INVALID_ARGUMENT.value, b"too big")

    async with (
        scripted(refuse_at_once, max_concurrent_streams=1, answer_early=True) as server,
        open_h2_channel(server.path) as channel,
    ):
        for _ in range(2):  # the second call needs the first one's slot
            with pytest.raises(GRPCError) as info:
                await channel.unary(ECHO, b"x" * 200_000)
            assert info.value.status is Status.INVALID_ARGUMENT
        await server.reset_seen.wait()
        assert set(server.resets) == {ErrorCodes.NO_ERROR}


@pytest.mark.parametrize(
    ("body", "status", "content_type"),
    [
        pytest.param(b"\x00\x00\x00", 0, b"application/grpc", id="truncated-prefix"),
        pytest.param(framed(b"abc")[:-1], 0, b"application/grpc", id="truncated-message"),
        pytest.param(framed(b"abc", flag=1), 0, b"application/grpc", id="compressed"),
        pytest.param(framed(b"a") + framed(b"b"), 0, b"application/grpc", id="two-messages"),
        pytest.param(b"", 0, b"application/grpc", id="no-message"),
        pytest.param(framed(b"a"), None, b"application/grpc", id="no-grpc-status"),
        pytest.param(framed(b"a"), 0, b"text/html", id="not-grpc"),
    ],
)
async def test_an_answer_that_is_not_grpc_fails_that_call_internal(
    body: bytes, status: int | None, content_type: bytes
) -> None:
    async def bad_then_good(peer: Peer, request: Request) -> None:
        if len(peer.server.requests) == 1:
            headers = ((b":status", b"200"), (b"content-type", content_type))
            await peer.answer(request, body, status=status, headers=headers)
        else:
            await peer.answer(request, framed(version_answer()))

    counted = BoundaryErrors()
    async with (
        scripted(bad_then_good) as server,
        open_cri_runtime(f"unix://{server.path}", boundary_errors=counted) as rt,
    ):
        with pytest.raises(errors.CriCallError) as info:
            await rt.version()
        assert info.value.code == "INTERNAL"
        assert info.value.message.startswith(f"ProtocolViolation from unix://{server.path}: ")
        assert (await rt.version()).runtime_name == "scripted"
        assert server.connections == 1  # a bad answer on one stream leaves the connection alone
    assert counted.counts == {"grpc": 1}


async def test_http_error_status_without_grpc_status() -> None:
    async def unavailable(peer: Peer, request: Request) -> None:
        peer.h2.send_headers(request.stream_id, [(b":status", b"503")], end_stream=True)
        await peer.flush()

    async with scripted(unavailable) as server, open_cri_runtime(f"unix://{server.path}") as rt:
        with pytest.raises(errors.UnavailableError):
            await rt.version()


async def test_garbage_bytes_fail_the_call_internal_and_the_next_call_redials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def garbage_once(peer: Peer, request: Request) -> None:
        if peer.server.connections == 1:
            await peer.stream.send_all(b"\x00\x00\x05\x00\x01\xff\xff\xff\xffgarbage that is not a frame")
            await trio.sleep_forever()
        await peer.answer(request, framed(version_answer()))

    counted = BoundaryErrors()
    async with (
        scripted(garbage_once) as server,
        open_cri_runtime(f"unix://{server.path}", boundary_errors=counted) as rt,
    ):
        with pytest.raises(errors.CriCallError) as info:
            await rt.version()
        assert info.value.code == "INTERNAL"
        assert (await rt.version()).runtime_name == "scripted"
        assert server.connections == 2
    assert counted.counts == {"grpc": 1}
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == [
        "Peer failed; closing it"
    ]


async def test_connection_closed_mid_call_is_unavailable_and_the_next_call_redials() -> None:
    async def close_first(peer: Peer, request: Request) -> None:
        if peer.server.connections == 1:
            await peer.stream.aclose()
            return
        await peer.answer(request, framed(version_answer()))

    async with scripted(close_first) as server, open_cri_runtime(f"unix://{server.path}") as rt:
        with pytest.raises(errors.UnavailableError) as info:
            await rt.version()
        assert "ConnectionLost(" in info.value.message
        assert (await rt.version()).runtime_name == "scripted"
        assert server.connections == 2


async def test_connection_lost_fails_every_call_in_flight() -> None:
    async def close_on_third(peer: Peer, request: Request) -> None:
        if len(peer.server.requests) == 3:
            await peer.stream.aclose()
        await trio.sleep_forever()

    async with scripted(close_on_third) as server, open_h2_channel(server.path) as channel:
        failures: list[type[BaseException]] = []

        async def call() -> None:
            try:
                await channel.unary(ECHO, b"x")
            except ConnectionLost as exc:
                failures.append(type(exc))

        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(call)
        assert failures == [ConnectionLost] * 3
        assert calls_in_flight(channel) == 0


async def test_goaway_before_the_call_was_taken_is_unavailable_and_the_next_call_redials() -> None:
    async def go_away_first(peer: Peer, request: Request) -> None:
        if peer.server.connections == 1:
            peer.h2.close_connection(last_stream_id=0)
            await peer.flush()
            await trio.sleep_forever()
        await peer.answer(request, framed(version_answer()))

    async with scripted(go_away_first) as server, open_cri_runtime(f"unix://{server.path}") as rt:
        with pytest.raises(errors.UnavailableError):
            await rt.version()
        assert (await rt.version()).runtime_name == "scripted"
        assert server.connections == 2


async def test_an_answer_over_the_size_limit_is_resource_exhausted() -> None:
    async def sized(peer: Peer, request: Request) -> None:
        with suppress(h2.exceptions.StreamClosedError):  # reset by the client half-way
            await peer.answer(request, framed(b"x" * int(request.body[5:])), frame=600)

    async with scripted(sized) as server, open_h2_channel(server.path, max_message_size=1000) as channel:
        with pytest.raises(GRPCError) as info:
            await channel.unary(ECHO, b"5000")
        assert info.value.status is Status.RESOURCE_EXHAUSTED
        await server.reset_seen.wait()
        assert server.resets == [ErrorCodes.CANCEL]  # the rest of the answer is refused
        assert await channel.unary(ECHO, b"1000") == b"x" * 1000
        assert server.connections == 1


async def test_continued_header_blocks_padding_and_pings() -> None:
    """A grpc-message longer than a frame (HEADERS + CONTINUATION), a padded DATA frame, and a PING, which
    the client answers."""
    long_message = b"y" * 40_000

    async def fancy(peer: Peer, request: Request) -> None:
        peer.h2.ping(b"12345678")
        answer_headers = [(b":status", b"200"), (b"content-type", b"application/grpc")]
        peer.h2.send_headers(request.stream_id, answer_headers)
        await peer.flush()
        peer.h2.send_data(request.stream_id, framed(b"ok"), pad_length=17)
        await peer.flush()
        first = len(peer.server.requests) == 1
        trailers = [(b"grpc-status", b"13" if first else b"0"), (b"grpc-message", long_message)]
        peer.h2.send_headers(request.stream_id, trailers, end_stream=True)
        await peer.flush()

    async with scripted(fancy) as server, open_h2_channel(server.path) as channel:
        with pytest.raises(GRPCError) as info:
            await channel.unary(ECHO, b"x")
        assert info.value.status is Status.INTERNAL
        assert info.value.message == "y" * 40_000
        assert server.pings_acked == 1
        assert await channel.unary(ECHO, b"again") == b"ok"  # the decoder's state survived
        assert server.connections == 1


async def test_stream_reset_by_the_runtime() -> None:
    async def refuse(peer: Peer, request: Request) -> None:
        peer.h2.reset_stream(request.stream_id, ErrorCodes.REFUSED_STREAM)
        await peer.flush()

    async with scripted(refuse) as server, open_h2_channel(server.path) as channel:
        with pytest.raises(GRPCError) as info:
            await channel.unary(ECHO, b"x")
        assert info.value.status is Status.UNAVAILABLE


async def test_cancelled_call_resets_its_stream_and_the_connection_stays_usable() -> None:
    async with scripted(hang_then_echo) as server, open_h2_channel(server.path) as channel:
        async with trio.open_nursery() as nursery:
            cancelled = trio.CancelScope()

            async def hanging_call() -> None:
                with cancelled:
                    await channel.unary(ECHO, b"hang")
                    raise AssertionError("the hanging call returned")

            nursery.start_soon(hanging_call)
            while not server.requests:
                await server.received.wait()
            cancelled.cancel()
        assert calls_in_flight(channel) == 0
        await server.reset_seen.wait()
        assert server.resets == [ErrorCodes.CANCEL]
        assert await channel.unary(ECHO, b"after") == b"after"
        assert server.connections == 1


async def hang(peer: Peer, request: Request) -> None:
    await trio.sleep_forever()


async def test_deadline_is_sent_as_grpc_timeout_and_ends_the_call() -> None:
    async with (
        scripted(hang) as server,
        open_cri_runtime(f"unix://{server.path}", request_timeout=0.2) as rt,
    ):
        with pytest.raises(errors.DeadlineExceededError):
            await rt.version()
        sent = seconds(server.requests[0].headers[b"grpc-timeout"])
        assert 0 < sent <= 0.2
        await server.reset_seen.wait()  # the call's stream is reset when its deadline ends it
        assert server.resets == [ErrorCodes.CANCEL]


async def test_unreachable_socket_is_an_os_error(tmp_path: Path) -> None:
    async with open_h2_channel(str(tmp_path / "none.sock")) as channel:
        with pytest.raises(FileNotFoundError):
            await channel.unary(ECHO, b"x")


async def test_calls_in_flight_fail_when_the_channel_closes() -> None:
    async with scripted(hang_then_echo) as server:
        failure: list[BaseException] = []
        async with trio.open_nursery() as nursery, open_h2_channel(server.path) as channel:

            async def call() -> None:
                try:
                    await channel.unary(ECHO, b"hang")
                except ConnectionLost as exc:
                    failure.append(exc)

            nursery.start_soon(call)
            while not server.requests:
                await server.received.wait()
        assert len(failure) == 1


def test_protocol_violation_is_not_an_os_error() -> None:
    """translate_error maps OSError to Unavailable; a violation must reach the INTERNAL containment."""
    assert not issubclass(ProtocolViolation, OSError)
    assert issubclass(ConnectionLost, OSError)
