"""The CRI channel against hostile HTTP/2 servers: scripted raw frames on a unix socket, one case per way a
runtime can break RFC 9113 or the gRPC protocol (PROTOCOL-HTTP2.md).

Each case checks that the call ends in bounded time with the project's typed error (a
:class:`~kubelet_trio.cri.errors.CriError` naming the endpoint), that a connection error is answered with
a GOAWAY carrying the error code the RFC names before the connection is closed, that memory stays bounded
where the server sends without end, and that the next call, which dials again, works against a server
that behaves. The first connection to a server runs the case's script; every later one is a good server.
"""

from __future__ import annotations

import math
import socket
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress

import attrs
import hpack
import pytest
import trio
from hpack.hpack import encode_integer

from kubelet_trio.boundary import BoundaryErrors
from kubelet_trio.cri import errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.h2channel import MAX_HEADER_LIST_SIZE, ProtocolViolation, open_h2_channel
from kubelet_trio.cri.remote import CriRuntime, open_cri_runtime

TEST_DEADLINE = 30  # seconds: every real-I/O test carries an absolute deadline
#: Seconds a hostile case may take: far less than a CRI call's timeout (2 min), which is what the channel
#: would otherwise wait for.
CASE_TIME = 5.0

# Frame types, flags, settings and error codes (RFC 9113 sections 6, 6.5.2 and 7).
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE = range(9)
CONTINUATION = 9
END_STREAM, ACK, END_HEADERS, PADDED = 0x1, 0x1, 0x4, 0x8
SETTINGS_ENABLE_PUSH, SETTINGS_INITIAL_WINDOW_SIZE, SETTINGS_MAX_FRAME_SIZE = 0x2, 0x4, 0x5
PROTOCOL_ERROR, FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR = 0x1, 0x3, 0x6
COMPRESSION_ERROR, ENHANCE_YOUR_CALM = 0x9, 0xB
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return len(payload).to_bytes(3, "big") + bytes((kind, flags)) + stream_id.to_bytes(4, "big") + payload


def settings(*pairs: tuple[int, int]) -> bytes:
    return frame(SETTINGS, 0, 0, b"".join(k.to_bytes(2, "big") + v.to_bytes(4, "big") for k, v in pairs))


def framed(message: bytes) -> bytes:
    return b"\x00" + len(message).to_bytes(4, "big") + message


VERSION_PATH = "/runtime.v1.RuntimeService/Version"
VERSION = framed(bytes(pb.VersionResponse(version="0.1.0", runtime_name="good", runtime_api_version="v1")))
OK_HEADERS = ((b":status", b"200"), (b"content-type", b"application/grpc"))


@attrs.define(eq=False)
class Peer:
    """One client connection as the server sees it: what the client sent, and ways to answer."""

    stream: trio.SocketStream
    number: int  # 1 for the first connection
    encoder: hpack.Encoder = attrs.Factory(hpack.Encoder)
    #: The error code of the client's GOAWAY, once it came.
    goaway: int | None = None
    resets: list[tuple[int, int]] = attrs.Factory(list)
    #: The client closed the connection (or reset it).
    closed: trio.Event = attrs.Factory(trio.Event)
    sent: int = 0  # bytes sent to the client
    _requests: tuple[trio.MemorySendChannel[int], trio.MemoryReceiveChannel[int]] = attrs.Factory(
        lambda: trio.open_memory_channel[int](math.inf)
    )

    async def request(self) -> int:
        """The stream id of the next request the client sent whole."""
        return await self._requests[1].receive()

    async def send(self, *frames: bytes) -> None:
        data = b"".join(frames)
        await self.stream.send_all(data)
        self.sent += len(data)

    def headers(
        self, stream_id: int, fields: tuple[tuple[bytes, bytes], ...], flags: int = END_HEADERS
    ) -> bytes:
        return frame(HEADERS, flags, stream_id, self.encoder.encode(list(fields)))

    async def answer(self, stream_id: int, status: bytes = b"0", message: bytes = VERSION) -> None:
        await self.send(
            self.headers(stream_id, OK_HEADERS),
            frame(DATA, 0, stream_id, message),
            self.headers(stream_id, ((b"grpc-status", status),), END_HEADERS | END_STREAM),
        )

    async def read(self) -> None:
        """Read the client's frames until it closes: requests, resets, its GOAWAY."""
        buffer = bytearray()
        try:
            while data := await self.stream.receive_some(65536):
                buffer += data
                if buffer.startswith(PREFACE):
                    del buffer[: len(PREFACE)]
                while len(buffer) >= 9 and len(buffer) >= 9 + int.from_bytes(buffer[:3], "big"):
                    length = int.from_bytes(buffer[:3], "big")
                    kind, flags = buffer[3], buffer[4]
                    stream_id = int.from_bytes(buffer[5:9], "big")
                    payload = bytes(buffer[9 : 9 + length])
                    del buffer[: 9 + length]
                    if kind == DATA and flags & END_STREAM:
                        self._requests[0].send_nowait(stream_id)
                    elif kind == RST_STREAM:
                        self.resets.append((stream_id, int.from_bytes(payload, "big")))
                    elif kind == GOAWAY:
                        self.goaway = int.from_bytes(payload[4:8], "big")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        self.closed.set()


Script = Callable[[Peer], Awaitable[None]]


async def good(peer: Peer) -> None:
    """A server that behaves: empty SETTINGS, then a VersionResponse to every request."""
    await peer.send(settings())
    while True:
        await peer.answer(await peer.request())


@attrs.define(eq=False)
class HostileServer:
    path: str
    script: Script
    #: The first connection's frames are read (False: the server never reads what the client sends).
    read_first: bool = True
    peers: list[Peer] = attrs.Factory(list)

    @property
    def first(self) -> Peer:
        return self.peers[0]

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        await sock.bind(self.path)
        sock.listen()
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, self._serve, [trio.SocketListener(sock)])
            task_status.started()

    async def _serve(self, stream: trio.SocketStream) -> None:
        peer = Peer(stream, len(self.peers) + 1)
        self.peers.append(peer)
        async with stream, trio.open_nursery() as nursery:
            if peer.number > 1 or self.read_first:
                nursery.start_soon(peer.read)
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await (self.script if peer.number == 1 else good)(peer)
            await peer.closed.wait()  # until the client closes: its GOAWAY is read first
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def hostile(script: Script, *, read_first: bool = True) -> AsyncIterator[HostileServer]:
    with tempfile.TemporaryDirectory(prefix="h2-hostile-") as directory, trio.fail_after(TEST_DEADLINE):
        server = HostileServer(f"{directory}/s.sock", script, read_first)
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            yield server
            nursery.cancel_scope.cancel()


async def fails_then_recovers(
    server: HostileServer, rt: CriRuntime, expected: type[errors.CriError] = errors.CriCallError
) -> errors.CriError:
    """The first call fails within CASE_TIME with ``expected``, naming the endpoint; the next one, on a
    new connection to a good server, works."""
    with trio.fail_after(CASE_TIME), pytest.raises(expected) as info:
        await rt.version()
    assert server.path in info.value.message
    with trio.fail_after(CASE_TIME):
        assert (await rt.version()).runtime_name == "good"
    assert len(server.peers) == 2
    return info.value


async def goaway_of(peer: Peer) -> int | None:
    """The error code of the GOAWAY the client sent before it closed ``peer``'s connection."""
    with trio.fail_after(CASE_TIME):
        await peer.closed.wait()
    return peer.goaway


async def hostile_call(script: Script) -> tuple[errors.CriError, int | None]:
    """Run ``script`` against a call: the typed error it gave, and the GOAWAY code the server got."""
    async with hostile(script) as server, open_cri_runtime(f"unix://{server.path}") as rt:
        error = await fails_then_recovers(server, rt)
        return error, await goaway_of(server.first)


async def open_header_block(peer: Peer) -> int:
    """SETTINGS, wait for the request, then a HEADERS frame of its answer without END_HEADERS."""
    await peer.send(settings())
    stream_id = await peer.request()
    await peer.send(frame(HEADERS, 0, stream_id, peer.encoder.encode(list(OK_HEADERS))))
    return stream_id


# The findings


async def test_endless_continuation_frames_are_refused_at_the_header_list_cap() -> None:
    """RFC 9113 section 10.5.1: a client may bound the header section it accepts, and section 6.10 lets a
    header block run over any number of CONTINUATION frames; grpc-go bounds it at 16 MiB
    (``defaultClientMaxHeaderListSize``) and golang.org/x/net closes the connection with PROTOCOL_ERROR
    once a block is past it. Here 64 MiB of CONTINUATION frames are offered: the channel refuses the block
    once it passes the cap, holding at most the cap in memory, rather than buffering all of it."""
    chunk = frame(CONTINUATION, 0, 1, b"x" * 16384) * 64  # 1 MiB
    assert MAX_HEADER_LIST_SIZE == 16 * 1024 * 1024

    async def flood(peer: Peer) -> None:
        await open_header_block(peer)
        for _ in range(64):
            await peer.send(chunk)

    tracemalloc.start()
    try:
        error, goaway = await hostile_call(flood)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "header block over 16777216 bytes" in error.message
    assert goaway == PROTOCOL_ERROR
    assert peak < 40 * 1024 * 1024  # the cap and some, not the 64 MiB offered


async def test_the_header_list_cap_is_a_parameter_and_refusal_is_early() -> None:
    """The same with a 64 KiB cap: the server could send hardly more than the cap and the socket's buffers
    before the connection was closed on it."""
    chunk = frame(CONTINUATION, 0, 1, b"x" * 16384) * 64

    async def flood(peer: Peer) -> None:
        await open_header_block(peer)
        for _ in range(64):
            await peer.send(chunk)

    async with hostile(flood) as server:
        async with open_h2_channel(server.path, max_header_list_size=65536) as channel:
            with trio.fail_after(CASE_TIME), pytest.raises(ProtocolViolation, match="over 65536 bytes"):
                await channel.unary(VERSION_PATH, b"")
            with trio.fail_after(CASE_TIME):
                assert await channel.unary(VERSION_PATH, b"") == VERSION[5:]
        assert await goaway_of(server.first) == PROTOCOL_ERROR
        assert server.first.sent < 8 * 1024 * 1024


async def test_empty_continuation_frames_do_not_spin() -> None:
    """RFC 9113 section 10.5: an endpoint may treat a peer's suspicious use of frames as a connection
    error of type ENHANCE_YOUR_CALM. Empty CONTINUATION frames never grow the block, so the size cap alone
    would let them go on forever (the 2024 CONTINUATION-flood advisories; nghttp2 now bounds the
    CONTINUATION frames of a block, CVE-2024-28182): the number of frames of one block is bounded too."""

    async def empty_frames(peer: Peer) -> None:
        stream_id = await open_header_block(peer)
        batch = frame(CONTINUATION, 0, stream_id) * 10000
        while True:
            await peer.send(batch)

    error, goaway = await hostile_call(empty_frames)
    assert "header block in" in error.message
    assert goaway == ENHANCE_YOUR_CALM


async def test_settings_max_frame_size_zero_is_a_connection_error() -> None:
    """RFC 9113 section 6.5.2: SETTINGS_MAX_FRAME_SIZE must be between 2^14 and 2^24-1; "values outside
    this range MUST be treated as a connection error of type PROTOCOL_ERROR". (With 0 the client could
    never send its request: the call hung until its deadline.)"""

    async def zero(peer: Peer) -> None:
        await peer.send(settings((SETTINGS_MAX_FRAME_SIZE, 0)))

    error, goaway = await hostile_call(zero)
    assert "SETTINGS_MAX_FRAME_SIZE 0" in error.message
    assert goaway == PROTOCOL_ERROR


@pytest.mark.parametrize("value", [2**31, 2**32 - 1])
async def test_an_invalid_initial_window_size_is_a_flow_control_error(value: int) -> None:
    """RFC 9113 section 6.5.2: "Values above the maximum flow-control window size of 2^31-1 MUST be
    treated as a connection error of type FLOW_CONTROL_ERROR"."""

    async def too_large(peer: Peer) -> None:
        await peer.send(settings((SETTINGS_INITIAL_WINDOW_SIZE, value)))
        await peer.answer(await peer.request())

    error, goaway = await hostile_call(too_large)
    assert f"SETTINGS_INITIAL_WINDOW_SIZE {value}" in error.message
    assert goaway == FLOW_CONTROL_ERROR


async def test_data_on_stream_zero_is_a_connection_error() -> None:
    """RFC 9113 section 6.1: "If a DATA frame is received whose Stream Identifier field is 0x00, the
    recipient MUST respond with a connection error of type PROTOCOL_ERROR"."""

    async def data_on_zero(peer: Peer) -> None:
        await peer.send(settings())
        stream_id = await peer.request()
        await peer.send(frame(DATA, 0, 0, b"stray"))
        await peer.answer(stream_id)

    error, goaway = await hostile_call(data_on_zero)
    assert "DATA on stream 0" in error.message
    assert goaway == PROTOCOL_ERROR


async def test_an_informational_header_block_is_skipped() -> None:
    """RFC 9113 section 8.1: a response is zero or more informational (1xx) header blocks, then the final
    one, DATA and trailers; a client skips the informational ones."""

    async def continue_first(peer: Peer) -> None:
        await peer.send(settings())
        while True:
            stream_id = await peer.request()
            await peer.send(peer.headers(stream_id, ((b":status", b"100"),)))
            await peer.send(peer.headers(stream_id, ((b":status", b"103"), (b"link", b"</x>"))))
            await peer.answer(stream_id)

    async with hostile(continue_first) as server, open_cri_runtime(f"unix://{server.path}") as rt:
        with trio.fail_after(CASE_TIME):
            for _ in range(2):
                assert (await rt.version()).runtime_name == "good"
        assert len(server.peers) == 1


@pytest.mark.parametrize("status", [b"100", b"101"])
async def test_an_informational_block_that_ends_the_answer_is_malformed(status: bytes) -> None:
    """RFC 9113 section 8.1: an informational status with END_STREAM is malformed, and section 8.6: 101 is
    not HTTP/2's; a malformed response is a stream error of type PROTOCOL_ERROR, so the stream is reset
    and the connection stays."""

    async def informational_end(peer: Peer) -> None:
        await peer.send(settings())
        stream_id = await peer.request()
        flags = END_HEADERS | (END_STREAM if status == b"100" else 0)
        await peer.send(peer.headers(stream_id, ((b":status", status),), flags))
        await peer.answer(await peer.request())

    async with hostile(informational_end) as server, open_cri_runtime(f"unix://{server.path}") as rt:
        with trio.fail_after(CASE_TIME):
            with pytest.raises(errors.CriCallError, match="informational status"):
                await rt.version()
            assert (await rt.version()).runtime_name == "good"
        assert len(server.peers) == 1
        assert server.first.resets == [(1, PROTOCOL_ERROR)]


@pytest.mark.parametrize("status", [b" 0", b"0 ", b"+0", b"", b"0x0", b"\xd9\xa0", b"1" * 5000])
async def test_grpc_status_is_digits_only(status: bytes) -> None:
    """gRPC's PROTOCOL-HTTP2.md: ``Status → "grpc-status" 1*DIGIT``; grpc-go fails an answer whose status
    does not parse with INTERNAL (``malformed grpc-status``). Python's int() would read " 0" and "+0" as
    OK, and refuses 5000 digits with a ValueError."""

    async def bad_status(peer: Peer) -> None:
        await peer.send(settings())
        await peer.answer(await peer.request(), status=status)
        await peer.answer(await peer.request())

    counted = BoundaryErrors()
    async with (
        hostile(bad_status) as server,
        open_cri_runtime(f"unix://{server.path}", boundary_errors=counted) as rt,
    ):
        with trio.fail_after(CASE_TIME):
            with pytest.raises(errors.CriCallError) as info:
                await rt.version()
            assert (await rt.version()).runtime_name == "good"
    assert info.value.code == "INTERNAL"
    assert "malformed grpc-status" in info.value.message and server.path in info.value.message
    assert len(info.value.message) < 1000  # the runtime's text is truncated
    assert counted.counts == {"grpc": 1}


@pytest.mark.parametrize("status", [b"abc", b"2000", b"20", b"2 0", None])
async def test_a_malformed_status_is_a_stream_protocol_error(status: bytes | None) -> None:
    """RFC 9113 section 8.3.2: every response carries ``:status``, a three-digit code (RFC 9110 section
    15); section 8.1.1: a malformed response is a stream error of type PROTOCOL_ERROR. The stream is reset,
    its call fails with the typed error (not a bare ``ValueError``), and the connection stays."""

    async def bad_status(peer: Peer) -> None:
        await peer.send(settings())
        fields = ((b":status", status),) if status is not None else ((b"content-type", b"text/plain"),)
        await peer.send(peer.headers(await peer.request(), fields, END_HEADERS | END_STREAM))
        await peer.answer(await peer.request())

    async with hostile(bad_status) as server, open_cri_runtime(f"unix://{server.path}") as rt:
        with trio.fail_after(CASE_TIME):
            with pytest.raises(errors.CriCallError) as info:
                await rt.version()
            assert (await rt.version()).runtime_name == "good"
        assert info.value.code == "INTERNAL" and "malformed :status" in info.value.message
        assert len(server.peers) == 1
        assert server.first.resets == [(1, PROTOCOL_ERROR)]


# The rest of RFC 9113's connection errors, each answered with a GOAWAY of its code


#: A frame (built for the call's stream id) that breaks the connection, the code of the GOAWAY it earns,
#: and words of the error the call gets.
CONNECTION_ERRORS: dict[str, tuple[Callable[[int], bytes], int, str]] = {
    "frame-too-large": (lambda sid: frame(DATA, 0, sid, b"x" * 16385), FRAME_SIZE_ERROR, "a frame of 16385"),
    "settings-5": (lambda sid: frame(SETTINGS, 0, 0, b"\x00" * 5), FRAME_SIZE_ERROR, "SETTINGS frame of 5"),
    "ack-payload": (lambda sid: frame(SETTINGS, ACK, 0, b"\x00" * 6), FRAME_SIZE_ERROR, "acknowledgement"),
    "settings-stream": (lambda sid: frame(SETTINGS, 0, 1), PROTOCOL_ERROR, "SETTINGS on stream 1"),
    "push-1": (lambda sid: settings((SETTINGS_ENABLE_PUSH, 1)), PROTOCOL_ERROR, "ENABLE_PUSH 1"),
    "frame-2^24": (lambda sid: settings((SETTINGS_MAX_FRAME_SIZE, 2**24)), PROTOCOL_ERROR, "MAX_FRAME_SIZE"),
    "ping-7": (lambda sid: frame(PING, 0, 0, b"1234567"), FRAME_SIZE_ERROR, "PING of 7"),
    "ping-stream": (lambda sid: frame(PING, 0, 1, b"12345678"), PROTOCOL_ERROR, "PING on stream 1"),
    "window-0": (lambda sid: frame(WINDOW_UPDATE, 0, 0, bytes(4)), PROTOCOL_ERROR, "WINDOW_UPDATE of 0"),
    "window-overflow": (
        lambda sid: frame(WINDOW_UPDATE, 0, 0, (2**31 - 1).to_bytes(4, "big")),
        FLOW_CONTROL_ERROR,
        "window over 2^31-1",
    ),
    "window-3": (lambda sid: frame(WINDOW_UPDATE, 0, 0, bytes(3)), FRAME_SIZE_ERROR, "WINDOW_UPDATE of 3"),
    "reset-0": (lambda sid: frame(RST_STREAM, 0, 0, bytes(4)), PROTOCOL_ERROR, "RST_STREAM on stream 0"),
    "reset-3": (lambda sid: frame(RST_STREAM, 0, sid, bytes(3)), FRAME_SIZE_ERROR, "RST_STREAM of 3"),
    "goaway-stream": (lambda sid: frame(GOAWAY, 0, 1, bytes(8)), PROTOCOL_ERROR, "GOAWAY on stream 1"),
    "push-promise": (
        lambda sid: frame(PUSH_PROMISE, END_HEADERS, sid, b"\x00\x00\x00\x02"),
        PROTOCOL_ERROR,
        "server push",
    ),
    "continuation-alone": (lambda sid: frame(CONTINUATION, END_HEADERS, sid), PROTOCOL_ERROR, "CONTINUATION"),
    "headers-even": (lambda sid: frame(HEADERS, END_HEADERS, 2, b"\x88"), PROTOCOL_ERROR, "stream 2, which"),
    "data-idle": (lambda sid: frame(DATA, 0, 99, b"x"), PROTOCOL_ERROR, "stream 99, which"),
    "padding": (lambda sid: frame(DATA, PADDED, sid, b"\x05abc"), PROTOCOL_ERROR, "padding longer"),
    "priority-4": (lambda sid: frame(PRIORITY, 0, sid, bytes(4)), FRAME_SIZE_ERROR, "PRIORITY of 4"),
    "hpack-index": (
        lambda sid: frame(HEADERS, END_HEADERS, sid, b"\xff\xff\xff\xff\x0f"),  # no such table entry
        COMPRESSION_ERROR,
        "HPACK cannot decode",
    ),
    "hpack-table-size": (
        lambda sid: frame(HEADERS, END_HEADERS, sid, b"\x3f\xe2\x1f"),  # a table of 4097 bytes
        COMPRESSION_ERROR,
        "HPACK cannot decode",
    ),
}


@pytest.mark.parametrize(
    ("answer", "code", "words"), CONNECTION_ERRORS.values(), ids=CONNECTION_ERRORS.keys()
)
async def test_connection_errors_send_goaway_with_their_code(
    answer: Callable[[int], bytes], code: int, words: str
) -> None:
    """RFC 9113 section 5.4.1: on a connection error an endpoint sends GOAWAY with the error code, then
    closes the connection. The codes are those sections 4.2, 4.3, 5.1, 6.1-6.10 and 6.5.2 name."""

    async def script(peer: Peer) -> None:
        await peer.send(settings())
        await peer.send(answer(await peer.request()))

    error, goaway = await hostile_call(script)
    assert words in error.message
    assert goaway == code


async def test_the_first_frame_must_be_settings() -> None:
    """RFC 9113 section 3.4: the server's connection preface is a SETTINGS frame, the first it sends; an
    invalid preface is a connection error of type PROTOCOL_ERROR."""

    async def ping_first(peer: Peer) -> None:
        await peer.send(frame(PING, 0, 0, b"12345678"), settings())

    error, goaway = await hostile_call(ping_first)
    assert "first frame" in error.message
    assert goaway == PROTOCOL_ERROR


async def test_decoding_a_large_header_block_is_linear() -> None:
    """A header block of 150 000 small fields (750 kB, 5 MB as SETTINGS_MAX_HEADER_LIST_SIZE counts it,
    under the cap): decoded in well under a second a field, where a decoder copying the rest of the block for
    each literal would take minutes. The answer is then a normal one."""
    fields = b"\x00\x01a\x01b" * 150_000  # literal without indexing, new name "a", value "b"

    async def many_fields(peer: Peer) -> None:
        await peer.send(settings())
        while True:
            stream_id = await peer.request()
            block = peer.encoder.encode(list(OK_HEADERS)) + fields
            pieces = [block[at : at + 16384] for at in range(0, len(block), 16384)]
            frames = [
                frame(HEADERS if i == 0 else CONTINUATION, 0, stream_id, p) for i, p in enumerate(pieces)
            ]
            frames[-1] = frames[-1][:4] + bytes((END_HEADERS,)) + frames[-1][5:]
            await peer.send(*frames)
            await peer.send(frame(DATA, 0, stream_id, VERSION))
            await peer.send(peer.headers(stream_id, ((b"grpc-status", b"0"),), END_HEADERS | END_STREAM))

    async with hostile(many_fields) as server, open_cri_runtime(f"unix://{server.path}") as rt:
        started = time.monotonic()
        with trio.fail_after(CASE_TIME):
            assert (await rt.version()).runtime_name == "good"
        assert time.monotonic() - started < CASE_TIME


async def test_an_hpack_bomb_is_refused_at_the_decoded_cap() -> None:
    """RFC 9113 section 10.5.1 / RFC 7541 section 7.3: a small block can decode to a huge list (one
    dynamic-table entry of 4 000 bytes referred to by 1-byte fields); the decoded size is held to the cap
    as it grows."""
    value = b"v" * 4000
    bomb = b"\x40\x01n" + encode_integer(len(value), 7) + value  # literal, indexed: dynamic entry 62
    bomb += b"\xbe" * 5000  # index 62: the entry just added; 5000 entries of 4033 bytes are 20 MB

    async def script(peer: Peer) -> None:
        await peer.send(settings())
        stream_id = await peer.request()
        block = peer.encoder.encode(list(OK_HEADERS)) + bomb
        await peer.send(
            frame(HEADERS, 0, stream_id, block[:16384]),
            frame(CONTINUATION, END_HEADERS, stream_id, block[16384:]),
        )

    error, goaway = await hostile_call(script)
    assert "header list over" in error.message
    assert goaway == PROTOCOL_ERROR


async def test_a_ping_flood_from_a_server_that_does_not_read_stays_bounded() -> None:
    """RFC 9113 section 10.5: PING and SETTINGS each ask for a reply; a peer that sends them without reading
    the replies would have them queue without end in the client. Past a few dozen replies waiting the
    client stops reading (as grpc-go does), so the server can only send what the sockets buffer; the call
    ends at its deadline. (A client that kept reading took about 3 MB of PINGs a second here, each queueing
    a 17-byte acknowledgement.)"""

    async def flood(peer: Peer) -> None:
        await peer.send(settings())
        batch = frame(PING, 0, 0, b"12345678") * 4096
        while True:
            await peer.send(batch)

    async with (
        hostile(flood, read_first=False) as server,
        open_cri_runtime(f"unix://{server.path}", request_timeout=2.0) as rt,
    ):
        with pytest.raises(errors.DeadlineExceededError):
            await rt.version()
        assert server.first.sent < 1024 * 1024
