"""A gRPC client channel for unary calls over a unix socket, on Trio: the CRI client's transport.

grpclib is asyncio-only; running it on a thread of its own made every CRI call hop Trio → asyncio → Trio.
This channel speaks HTTP/2 itself, on a connection Trio owns, so a call costs one HTTP/2 stream: the
HEADERS of a gRPC request, its one length-prefixed message, and the answer read back by the
connection's reader task. It does only what the CRI needs: unary calls, no compression, no TLS.

One connection per channel, dialled by the first call and again by the first call after it was lost
(that is what lets a session outlive a runtime restart). Each connection runs a reader task, which owns
receiving frames and hands every stream its events, and a writer task, which owns sending the frames
callers queue. A caller cancelled while its bytes are being written therefore never leaves half a frame
on the wire, and it returns at once: its stream is reset (``RST_STREAM CANCEL``) and the connection stays
usable.

The runtime's bytes are checked as RFC 9113 asks, with two bounds of grpc-go's: a header block (headers
or trailers) of at most ``max_header_list_size`` bytes, 16 MiB by default, and an answer message of at
most ``max_message_size`` bytes, 16 MiB by default (see :data:`MAX_HEADER_LIST_SIZE` and
:data:`MAX_MESSAGE_SIZE`). What breaks the protocol of the whole connection (a bad frame, setting or
header block; DATA on stream 0; a flow-control window overrun) is a connection error: the runtime is
sent ``GOAWAY`` with the error code RFC 9113 names, the connection is closed, every call on it fails and
the next call dials afresh. What breaks one answer only (a malformed ``:status`` or trailers, DATA
before the headers) is a stream error: that stream is reset with ``PROTOCOL_ERROR`` and its call fails.

Errors, as grpclib raised them so :func:`kubelet_trio.cri.remote.translate_error` maps them alike:
a non-OK ``grpc-status`` is a :class:`grpclib.GRPCError`; a connection that cannot be dialled, or is lost
during a call, is an ``OSError`` (:class:`ConnectionLost` for the latter) failing every call in flight;
an answer that is not gRPC (a protocol error of either kind, a bad message prefix, a compressed or
second message, no or a malformed status) is a :class:`ProtocolViolation`.
"""

from __future__ import annotations

import contextlib
import functools
import math
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final

import attrs
import trio
from grpclib import GRPCError, Status
from hpack.exceptions import HPACKDecodingError
from hpack.huffman_table import decode_huffman
from hpack.table import HeaderTable

from kubelet_trio.boundary import MAX_ECHO, truncate

__all__ = [
    "MAX_HEADER_LIST_SIZE",
    "MAX_MESSAGE_SIZE",
    "ConnectionLost",
    "H2Channel",
    "ProtocolViolation",
    "open_h2_channel",
]

#: The largest answer message accepted by default: 16 MiB, the Go kubelet's CRI client's ``maxMsgSize``
#: (``pkg/kubelet/cri/remote``, now ``k8s.io/cri-client``), which raises grpc-go's 4 MiB default
#: (``MaxCallRecvMsgSize``) because ListContainers and ListPodSandbox answers of a busy node outgrow it;
#: the runtime on the other end (containerd's CRI server) sends up to the same 16 MiB.
MAX_MESSAGE_SIZE: Final = 16 * 1024 * 1024
#: The largest header list (the answer's headers, or its trailers) accepted by default: 16 MiB, grpc-go's
#: ``defaultClientMaxHeaderListSize`` (``internal/transport/defaults.go``), counted as RFC 9113's
#: SETTINGS_MAX_HEADER_LIST_SIZE counts (names and values, plus 32 bytes a field) and advertised in that
#: setting. The encoded block is held to the same size before it is decoded: HPACK never encodes a field
#: in more bytes than that count, so only a block that decodes past the cap is refused early.
MAX_HEADER_LIST_SIZE: Final = 16 * 1024 * 1024
#: Bytes read from the socket at a time.
RECEIVE_SIZE: Final = 65536
#: The last client stream id HTTP/2 allows; a connection that used them all is replaced.
_LAST_STREAM_ID: Final = 2**31 - 1
#: What grpc-go sends as ``:authority`` for a unix socket; containerd accepts any.
AUTHORITY: Final = b"localhost"
#: Reply frames (PING and SETTINGS acknowledgements, resets, window updates) queued while the runtime does
#: not read: past this many the reader stops reading until the writer has sent them, as grpc-go does
#: (``maxQueuedTransportResponseFrames``), so that a runtime that floods PINGs cannot grow our memory.
MAX_QUEUED_REPLIES: Final = 50
#: Seconds the GOAWAY of a connection error gets to reach the runtime before the socket is closed.
GOAWAY_GRACE: Final = 1.0

_PREFIX_SIZE: Final = 5  # a gRPC message's prefix: compressed flag, then a 4-byte big-endian length

# The HTTP statuses of an answer with no grpc-status, as gRPC maps them (grpc's http-grpc-status-mapping).
_HTTP_STATUSES: Final = {
    400: Status.INTERNAL,
    401: Status.UNAUTHENTICATED,
    403: Status.PERMISSION_DENIED,
    404: Status.UNIMPLEMENTED,
    429: Status.UNAVAILABLE,
    502: Status.UNAVAILABLE,
    503: Status.UNAVAILABLE,
    504: Status.UNAVAILABLE,
}

# HTTP/2 error codes (RFC 9113 section 7).
_NO_ERROR: Final = 0x0
_PROTOCOL_ERROR: Final = 0x1
_FLOW_CONTROL_ERROR: Final = 0x3
_FRAME_SIZE_ERROR: Final = 0x6
_CANCEL: Final = 0x8
_COMPRESSION_ERROR: Final = 0x9
_ENHANCE_YOUR_CALM: Final = 0xB
_ERROR_NAMES: Final = {
    0x0: "NO_ERROR",
    0x1: "PROTOCOL_ERROR",
    0x2: "INTERNAL_ERROR",
    0x3: "FLOW_CONTROL_ERROR",
    0x4: "SETTINGS_TIMEOUT",
    0x5: "STREAM_CLOSED",
    0x6: "FRAME_SIZE_ERROR",
    0x7: "REFUSED_STREAM",
    0x8: "CANCEL",
    0x9: "COMPRESSION_ERROR",
    0xA: "CONNECT_ERROR",
    0xB: "ENHANCE_YOUR_CALM",
    0xC: "INADEQUATE_SECURITY",
    0xD: "HTTP_1_1_REQUIRED",
}

# A RST_STREAM from the peer, as grpc-go maps its error codes (any other is INTERNAL).
_RESET_STATUSES: Final = {
    0x7: Status.UNAVAILABLE,  # REFUSED_STREAM
    0x8: Status.CANCELLED,  # CANCEL
    0xB: Status.RESOURCE_EXHAUSTED,  # ENHANCE_YOUR_CALM
    0xC: Status.PERMISSION_DENIED,  # INADEQUATE_SECURITY
}


class ProtocolViolation(Exception):
    """The runtime's answer is not valid HTTP/2 or gRPC framing."""


class ConnectionLost(ConnectionError):
    """The connection closed or failed before the call had its answer."""


class _ConnectionError(Exception):
    """Raised by the reader: the runtime broke HTTP/2 for the whole connection (RFC 9113 section 5.4.1)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class _StreamError(Exception):
    """One stream's answer is malformed (RFC 9113 section 5.4.2): that stream is reset, the rest go on."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def grpc_timeout(seconds: float) -> bytes:
    """``seconds`` in gRPC's ``grpc-timeout`` format: at most 8 digits, in the finest unit that fits
    (rounded up, so the runtime never sees a shorter deadline than the caller's)."""
    nanos = max(math.ceil(seconds * 1e9), 1)
    for unit, size in ((b"n", 1), (b"u", 10**3), (b"m", 10**6), (b"S", 10**9), (b"M", 60 * 10**9)):
        value = -(-nanos // size)
        if value < 10**8:
            return str(value).encode() + unit
    return str(min(-(-nanos // (3600 * 10**9)), 10**8 - 1)).encode() + b"H"


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    for key, value in headers:
        if key == name:
            return value
    return None


def _echo(value: bytes | None) -> str:
    """A value the runtime chose, fit to go into an error message."""
    return truncate(repr(value), MAX_ECHO)


def _grpc_status(value: bytes) -> Status:
    """A ``grpc-status`` value: ``1*DIGIT`` (gRPC's PROTOCOL-HTTP2.md), else the answer is malformed, as
    grpc-go says (``malformed grpc-status``). A number gRPC does not define is UNKNOWN."""
    if not (0 < len(value) <= 10 and value.isdigit()):  # bytes.isdigit: ASCII digits only
        raise ProtocolViolation(f"malformed grpc-status {_echo(value)}")
    try:
        return Status(int(value))
    except ValueError:
        return Status.UNKNOWN


@attrs.define(eq=False)
class _Call:
    """One stream's answer as the reader task gathers it."""

    max_message_size: int
    headers: list[tuple[bytes, bytes]] | None = None
    data: bytearray = attrs.Factory(bytearray)
    trailers: list[tuple[bytes, bytes]] | None = None
    #: Why the stream failed before it ended (the peer reset it, the connection was lost).
    error: Exception | None = None
    #: The stream is closed already (reset by either side, or never taken before a GOAWAY): no reset.
    reset: bool = False
    done: trio.Event = attrs.Factory(trio.Event)

    def answer(self) -> bytes:
        """The one message of a finished call, or the error its status or framing says."""
        if self.error is not None:
            raise self.error
        headers = self.headers or []
        # A trailers-only answer (usual for errors) carries the status in its only HEADERS.
        trailers = self.trailers if self.trailers is not None else headers
        status = _header(trailers, b"grpc-status")
        http_status = _header(headers, b":status")  # three digits: checked when the headers came
        if status is None:
            if http_status != b"200":
                code = _HTTP_STATUSES.get(int(http_status or b"0"), Status.UNKNOWN)
                raise GRPCError(code, f"unexpected HTTP status {(http_status or b'').decode()}")
            raise ProtocolViolation("the answer ended without a grpc-status")
        code = _grpc_status(status)
        if code is not Status.OK:
            message = _header(trailers, b"grpc-message") or b""
            raise GRPCError(code, urllib.parse.unquote_to_bytes(message).decode("utf-8", "replace"))
        content_type = _header(headers, b"content-type") or b""
        if http_status != b"200" or not content_type.startswith(b"application/grpc"):
            raise ProtocolViolation(
                f"not a gRPC answer: HTTP {_echo(http_status)}, content-type {_echo(content_type)}"
            )
        data = self.data
        if len(data) < _PREFIX_SIZE:
            raise ProtocolViolation(f"expected one message, got {len(data)} bytes")
        if data[0] != 0:
            raise ProtocolViolation(f"message flag {data[0]}: compression was not negotiated")
        size = int.from_bytes(data[1:_PREFIX_SIZE], "big")
        if len(data) != _PREFIX_SIZE + size:
            raise ProtocolViolation(f"expected one message of {size} bytes, got {len(data) - _PREFIX_SIZE}")
        return bytes(data[_PREFIX_SIZE:])

    def add_data(self, data: bytes) -> GRPCError | None:
        """Append a DATA frame's bytes; the error that ends the call when the message is over the cap
        (its declared length is checked as soon as its prefix is in, as grpc-go does)."""
        self.data += data
        declared = int.from_bytes(self.data[1:_PREFIX_SIZE], "big") if len(self.data) >= _PREFIX_SIZE else 0
        size = max(declared, len(self.data) - _PREFIX_SIZE)
        if size > self.max_message_size:
            return GRPCError(
                Status.RESOURCE_EXHAUSTED,
                f"grpc: received message larger than max ({size} vs. {self.max_message_size})",
            )
        return None


# Frame types and flags (RFC 9113 section 6).
_DATA, _HEADERS, _PRIORITY, _RST_STREAM, _SETTINGS, _PUSH_PROMISE, _PING, _GOAWAY, _WINDOW_UPDATE = range(9)
_CONTINUATION: Final = 9
_END_STREAM: Final = 0x1
_ACK: Final = 0x1
_END_HEADERS: Final = 0x4
_PADDED: Final = 0x8
_PRIORITY_FLAG: Final = 0x20
# SETTINGS identifiers.
_SETTINGS_ENABLE_PUSH: Final = 0x2
_SETTINGS_MAX_CONCURRENT_STREAMS: Final = 0x3
_SETTINGS_INITIAL_WINDOW_SIZE: Final = 0x4
_SETTINGS_MAX_FRAME_SIZE: Final = 0x5
_SETTINGS_MAX_HEADER_LIST_SIZE: Final = 0x6

_PREFACE: Final = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_FRAME_HEADER: Final = 9
#: Frames we accept (we never advertise more than the protocol's default).
_MAX_FRAME: Final = 16384
#: The largest SETTINGS_MAX_FRAME_SIZE a peer may set (RFC 9113 section 6.5.2).
_LARGEST_FRAME: Final = 2**24 - 1
_DEFAULT_WINDOW: Final = 65535
_MAX_WINDOW: Final = 2**31 - 1
#: The HPACK dynamic table the runtime may use: the default, as we never send SETTINGS_HEADER_TABLE_SIZE.
_HEADER_TABLE_SIZE: Final = 4096
#: The flow-control window we give the runtime, per stream and for the connection: as large as HTTP/2
#: allows, so that an answer (at most MAX_MESSAGE_SIZE) never waits for a WINDOW_UPDATE; each is topped
#: up once half of it was used.
RECEIVE_WINDOW = _MAX_WINDOW


def _frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return len(payload).to_bytes(3, "big") + bytes((kind, flags)) + stream_id.to_bytes(4, "big") + payload


def _hpack_int(value: int, prefix_bits: int, first: int = 0) -> bytes:
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes((first | value,))
    out = bytearray((first | limit,))
    value -= limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def _literal(name: bytes, value: bytes) -> bytes:
    """An HPACK "literal header field without indexing, new name", no Huffman coding: the encoding needs
    no state, so the constant part of every request is encoded once."""
    return b"\x00" + _hpack_int(len(name), 7) + name + _hpack_int(len(value), 7) + value


#: The header fields of every request but ``:path`` and ``grpc-timeout``.
_REGULAR_HEADERS: Final = b"".join(
    _literal(name, value)
    for name, value in (
        (b"content-type", b"application/grpc"),
        (b"te", b"trailers"),
        (b"user-agent", b"kubelet-trio"),
    )
)


def _client_start(window: int, max_header_list_size: int) -> bytes:
    """The connection preface, our SETTINGS (no server push; ``window`` for every stream; the header list
    cap) and the connection's window raised to ``window`` too."""
    settings = b"".join(
        key.to_bytes(2, "big") + value.to_bytes(4, "big")
        for key, value in (
            (_SETTINGS_ENABLE_PUSH, 0),
            (_SETTINGS_INITIAL_WINDOW_SIZE, window),
            (_SETTINGS_MAX_HEADER_LIST_SIZE, min(max_header_list_size, 2**32 - 1)),
        )
    )
    start = _PREFACE + _frame(_SETTINGS, 0, 0, settings)
    if window > _DEFAULT_WINDOW:
        start += _frame(_WINDOW_UPDATE, 0, 0, (window - _DEFAULT_WINDOW).to_bytes(4, "big"))
    return start


@functools.cache
def _request_headers(path: bytes) -> bytes:
    """The header block of a call to ``path``, but its ``grpc-timeout`` (pseudo-header fields first)."""
    pseudo = ((b":method", b"POST"), (b":scheme", b"http"), (b":path", path), (b":authority", AUTHORITY))
    return b"".join(_literal(name, value) for name, value in pseudo) + _REGULAR_HEADERS


def _hpack_integer(block: memoryview, at: int, prefix_bits: int) -> tuple[int, int]:
    """An HPACK integer (RFC 7541 section 5.1) at ``block[at]``, and the offset after it. At most four
    continuation bytes (2**28 and more): more than any block we accept could need."""
    mask = (1 << prefix_bits) - 1
    value = block[at] & mask
    at += 1
    if value < mask:
        return value, at
    for shift in range(0, 28, 7):
        if at >= len(block):
            raise HPACKDecodingError("truncated integer")
        byte = block[at]
        at += 1
        value += (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
    raise HPACKDecodingError("integer too long")


class _HeaderDecoder:
    """HPACK (RFC 7541) decoding of the runtime's header blocks, in time linear in the block.

    hpack's ``Decoder`` copies the rest of the block for every literal field it reads, which is quadratic:
    a block of small fields under the 16 MiB cap would cost minutes of CPU. Its header table (static and
    dynamic) and its Huffman decoder are used here; the walk over the block is this class's.
    """

    def __init__(self, max_list_size: int) -> None:
        self.table = HeaderTable()
        self.max_list_size = max_list_size

    def decode(self, data: bytes) -> list[tuple[bytes, bytes]]:
        """The fields of one header block. Raises ``HPACKDecodingError`` (a COMPRESSION_ERROR) for a
        block that is not HPACK, or :class:`_ConnectionError` once its fields pass the cap."""
        block = memoryview(data)
        fields: list[tuple[bytes, bytes]] = []
        size = 0  # as SETTINGS_MAX_HEADER_LIST_SIZE counts
        at = 0
        while at < len(block):
            first = block[at]
            if first & 0x80:  # indexed field
                index, at = _hpack_integer(block, at, 7)
                name, value = self.table.get_by_index(index)
            elif first & 0x40:  # literal with incremental indexing
                name, value, at = self._literal(block, at, 6)
                self.table.add(name, value)
            elif first & 0x20:  # dynamic table size update: only before the first field
                new_size, at = _hpack_integer(block, at, 5)
                if fields or new_size > _HEADER_TABLE_SIZE:
                    raise HPACKDecodingError(f"table size update to {new_size}")
                self.table.maxsize = new_size
                continue
            else:  # literal without indexing, or never indexed
                name, value, at = self._literal(block, at, 4)
            size += len(name) + len(value) + 32
            if size > self.max_list_size:
                raise _ConnectionError(_PROTOCOL_ERROR, f"a header list over {self.max_list_size} bytes")
            fields.append((name, value))
        return fields

    def _literal(self, block: memoryview, at: int, prefix_bits: int) -> tuple[bytes, bytes, int]:
        index, at = _hpack_integer(block, at, prefix_bits)
        if index:
            name = self.table.get_by_index(index)[0]
        else:
            name, at = self._string(block, at)
        value, at = self._string(block, at)
        return name, value, at

    @staticmethod
    def _string(block: memoryview, at: int) -> tuple[bytes, int]:
        if at >= len(block):
            raise HPACKDecodingError("truncated header block")
        huffman = block[at] & 0x80
        length, at = _hpack_integer(block, at, 7)
        end = at + length
        if end > len(block):
            raise HPACKDecodingError("truncated header block")
        raw = block[at:end]
        return (decode_huffman(raw) if huffman else raw.tobytes()), end


class _Stream:
    """Our side of one stream: the call it answers and what may still be sent on it."""

    __slots__ = ("call", "ended_local", "received", "window")

    def __init__(self, call: _Call, window: int) -> None:
        self.call = call
        self.window = window  # bytes the peer lets us send on this stream
        self.ended_local = False  # our END_STREAM went out
        self.received = 0  # bytes of DATA since its window was last topped up


@attrs.define(eq=False)
class _HeaderBlock:
    """A header block continued over CONTINUATION frames (RFC 9113 section 6.10)."""

    stream_id: int
    flags: int  # its HEADERS frame's (END_STREAM)
    data: bytearray
    frames: int = 1


@attrs.define(eq=False)
class _Connection:
    """One HTTP/2 connection: its socket, the frames read and written, and the calls in flight on it.

    The framing is done here rather than by a general HTTP/2 library: a unary gRPC client needs a small
    part of the protocol, and the library's state machines were most of a call's CPU (the same channel on
    the ``h2`` state machine kept 38-69 % of this one's gain over grpclib). Header blocks received are
    decoded by :class:`_HeaderDecoder` (the peer may use its dynamic table and Huffman codes); those sent
    are literals without indexing, encoded once."""

    stream: trio.SocketStream
    max_message_size: int = MAX_MESSAGE_SIZE
    max_header_list_size: int = MAX_HEADER_LIST_SIZE
    calls: dict[int, _Call] = attrs.Factory(dict)
    #: No new call goes on this connection (GOAWAY, stream ids used up); those in flight may finish.
    draining: bool = False
    #: The connection is lost; every call that was on it failed.
    failed: bool = False
    #: Why it was lost: the type and the message each call on it failed with.
    failure: tuple[type[Exception], str] = (ConnectionLost, "the CRI connection closed")
    #: Set once the runtime's first SETTINGS arrived (its stream limit is known) or the connection failed.
    settled: trio.Event = attrs.Factory(trio.Event)
    _streams: dict[int, _Stream] = attrs.Factory(dict)
    _next_stream_id: int = 1
    _decoder: _HeaderDecoder = attrs.field(init=False)
    _window: int = attrs.field(init=False)  # ours, for the runtime's DATA: RECEIVE_WINDOW when dialled
    _max_streams: float = math.inf
    _initial_window: int = _DEFAULT_WINDOW  # the peer's, for our new streams
    _max_send_frame: int = _MAX_FRAME
    _send_window: int = _DEFAULT_WINDOW  # the connection's, for what we send
    _received: int = 0  # bytes of DATA since the connection's window was last topped up
    _block: _HeaderBlock | None = None  # a header block waiting for its CONTINUATION frames
    _frames_read: int = 0
    #: Frames waiting for the writer.
    _outgoing: bytearray = attrs.field(init=False)
    #: Reply frames in ``_outgoing`` (see MAX_QUEUED_REPLIES).
    _queued_replies: int = 0
    #: A connection error was found: the writer sends what is queued (the GOAWAY last), then stops.
    _closing: bool = False
    _writer_done: trio.Event = attrs.Factory(trio.Event)
    #: Where the writer waits for something to send.
    _send_wanted: trio.lowlevel.ParkingLot = attrs.Factory(trio.lowlevel.ParkingLot)
    #: Where the reader waits for the writer to have sent the replies queued.
    _sent: trio.lowlevel.ParkingLot = attrs.Factory(trio.lowlevel.ParkingLot)
    #: Where calls wait to proceed: flow-control window or stream slots grew, or the connection failed.
    _changed: trio.lowlevel.ParkingLot = attrs.Factory(trio.lowlevel.ParkingLot)
    _scope: trio.CancelScope = attrs.Factory(trio.CancelScope)

    def __attrs_post_init__(self) -> None:
        self._decoder = _HeaderDecoder(self.max_header_list_size)
        self._window = RECEIVE_WINDOW
        self._outgoing = bytearray(_client_start(self._window, self.max_header_list_size))

    @property
    def usable(self) -> bool:
        return not (self.draining or self.failed)

    async def run(self) -> None:
        """Read and write until the connection ends; then fail whatever is still in flight."""
        with self._scope:
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._guarded, self._write)
                    await self._guarded(self._read)
            finally:
                self._fail(ConnectionLost, "the CRI connection closed")
                self.stream.socket.close()

    def _send(self, frame: bytes) -> None:
        self._outgoing += frame
        self._send_wanted.unpark_all()

    def _reply(self, frame: bytes) -> None:
        """Queue a frame the runtime's own frames asked for (counted: see MAX_QUEUED_REPLIES)."""
        self._queued_replies += 1
        self._send(frame)

    async def unary(self, path: bytes, message: bytes) -> bytes:
        """Send one request on a new stream and return the answer's message."""
        while self.usable and len(self._streams) >= self._max_streams:
            await self._changed.park()
        if not self.usable:
            raise ConnectionLost("the CRI connection closed before the call was sent")
        stream_id = self._next_stream_id
        self._next_stream_id += 2
        if self._next_stream_id >= _LAST_STREAM_ID - 2:
            self.draining = True  # the next call dials a new connection
        block = _request_headers(path)
        deadline = trio.current_effective_deadline()
        if not math.isinf(deadline):
            block += _literal(b"grpc-timeout", grpc_timeout(deadline - trio.current_time()))
        call = self.calls[stream_id] = _Call(self.max_message_size)
        stream = self._streams[stream_id] = _Stream(call, self._initial_window)
        try:
            self._send(_frame(_HEADERS, _END_HEADERS, stream_id, block))
            body = len(message).to_bytes(_PREFIX_SIZE, "big") + message  # flag 0: not compressed
            await self._send_body(stream_id, stream, body)
            await call.done.wait()
        finally:
            del self.calls[stream_id]
            self._close_stream(stream_id, stream)
        return call.answer()

    def _close_stream(self, stream_id: int, stream: _Stream) -> None:
        """Free the stream's slot: a call that was cancelled, or answered before its whole request was
        sent, resets its stream (CANCEL, or NO_ERROR as grpc-go does after an early answer)."""
        del self._streams[stream_id]
        call = stream.call
        if not self.failed and not (call.done.is_set() and stream.ended_local) and not call.reset:
            code = _NO_ERROR if call.done.is_set() else _CANCEL
            self._send(_frame(_RST_STREAM, 0, stream_id, code.to_bytes(4, "big")))
        self._changed.unpark_all()
        if self.draining and not self.calls:
            self._scope.cancel()

    async def _send_body(self, stream_id: int, stream: _Stream, body: bytes) -> None:
        """Queue ``body`` as DATA frames, waiting for flow-control window when the peer's is too small."""
        view = memoryview(body)
        while not stream.call.done.is_set():  # an answer or a reset before the whole body: stop sending
            window = min(stream.window, self._send_window, self._max_send_frame)
            if window <= 0:
                await self._changed.park()  # a failed connection ends the call, and so this loop
                continue
            chunk, view = view[:window], view[window:]
            stream.window -= len(chunk)
            self._send_window -= len(chunk)
            stream.ended_local = not view
            self._send(_frame(_DATA, _END_STREAM if not view else 0, stream_id, chunk.tobytes()))
            if not view:
                return

    async def _guarded(self, work: Callable[[], Awaitable[None]]) -> None:
        """Run the reader or the writer; when either ends, the connection is over."""
        try:
            await work()
        except _ConnectionError as exc:
            name = _ERROR_NAMES.get(exc.code, str(exc.code))
            self._fail(ProtocolViolation, f"the runtime broke HTTP/2 ({name}): {exc}")
            # RFC 9113 section 5.4.1: a GOAWAY with the error code, then close. No stream was the
            # runtime's own, so the last one it initiated and we processed is 0.
            debug = str(exc).encode("ascii", "replace")[:MAX_ECHO]
            self._send(_frame(_GOAWAY, 0, 0, (0).to_bytes(4, "big") + exc.code.to_bytes(4, "big") + debug))
            self._closing = True
            with trio.move_on_after(GOAWAY_GRACE):
                await self._writer_done.wait()
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self._fail(ConnectionLost, f"the CRI connection failed: {exc!r}")
        except Exception as exc:  # the runtime's bytes: this module could not follow them
            self._fail(ProtocolViolation, f"the CRI connection broke HTTP/2: {type(exc).__name__}: {exc}")
        self._scope.cancel()

    async def _write(self) -> None:
        try:
            while True:
                if self._outgoing:
                    data, self._outgoing = bytes(self._outgoing), bytearray()
                    self._queued_replies = 0
                    await self.stream.send_all(data)
                    self._sent.unpark_all()
                elif self._closing:
                    return
                else:
                    await self._send_wanted.park()
        finally:
            self._writer_done.set()

    async def _read(self) -> None:
        buffer = bytearray()
        while True:
            while self._queued_replies > MAX_QUEUED_REPLIES:  # the runtime does not read our replies
                await self._sent.park()
            data = await self.stream.receive_some(RECEIVE_SIZE)
            if not data:
                self._fail(ConnectionLost, "the runtime closed the CRI connection")
                return
            buffer += data
            offset = 0
            while len(buffer) - offset >= _FRAME_HEADER:
                length = int.from_bytes(buffer[offset : offset + 3], "big")
                if length > _MAX_FRAME:  # RFC 9113 section 4.2: more than we advertised
                    raise _ConnectionError(_FRAME_SIZE_ERROR, f"a frame of {length} bytes, over {_MAX_FRAME}")
                end = offset + _FRAME_HEADER + length
                if len(buffer) < end:
                    break
                kind, flags = buffer[offset + 3], buffer[offset + 4]
                stream_id = int.from_bytes(buffer[offset + 5 : offset + 9], "big") & _MAX_WINDOW
                payload = bytes(buffer[offset + _FRAME_HEADER : end])
                offset = end
                self._on_frame(kind, flags, stream_id, payload)
            del buffer[:offset]

    def _on_frame(self, kind: int, flags: int, stream_id: int, payload: bytes) -> None:
        """Check one frame as RFC 9113 section 6 asks and act on it."""
        self._frames_read += 1
        if self._frames_read == 1 and kind != _SETTINGS:  # section 3.4: the server's preface
            raise _ConnectionError(_PROTOCOL_ERROR, "the runtime's first frame is not SETTINGS")
        if self._block is not None:
            self._on_continuation(kind, flags, stream_id, payload)
        elif kind == _DATA:
            self._on_data(stream_id, flags, payload)
        elif kind == _HEADERS:
            self._on_headers(stream_id, flags, payload)
        elif kind == _SETTINGS:
            self._on_settings(stream_id, flags, payload)
        elif kind == _WINDOW_UPDATE:
            self._on_window_update(stream_id, payload)
        elif kind == _RST_STREAM:
            self._on_reset(stream_id, payload)
        elif kind == _PING:
            if stream_id != 0:
                raise _ConnectionError(_PROTOCOL_ERROR, f"PING on stream {stream_id}")
            if len(payload) != 8:
                raise _ConnectionError(_FRAME_SIZE_ERROR, f"a PING of {len(payload)} bytes")
            if not flags & _ACK:
                self._reply(_frame(_PING, _ACK, 0, payload))
        elif kind == _GOAWAY:
            self._on_goaway(stream_id, payload)
        elif kind == _PRIORITY:
            if stream_id == 0:
                raise _ConnectionError(_PROTOCOL_ERROR, "PRIORITY on stream 0")
            if len(payload) != 5:
                raise _ConnectionError(_FRAME_SIZE_ERROR, f"a PRIORITY of {len(payload)} bytes")
        elif kind == _PUSH_PROMISE:
            raise _ConnectionError(_PROTOCOL_ERROR, "a server push, which this client disabled")
        elif kind == _CONTINUATION:
            raise _ConnectionError(_PROTOCOL_ERROR, "a CONTINUATION frame without a header block")
        # Unknown frame types are ignored, as section 4.1 says.

    def _check_opened(self, kind: str, stream_id: int) -> None:
        """Section 5.1: a frame on a stream this client never opened (an idle one: the runtime, a server,
        cannot open any) is a connection error."""
        if stream_id == 0 or stream_id % 2 == 0 or stream_id >= self._next_stream_id:
            raise _ConnectionError(
                _PROTOCOL_ERROR, f"{kind} on stream {stream_id}, which this client did not open"
            )

    def _on_headers(self, stream_id: int, flags: int, payload: bytes) -> None:
        self._check_opened("HEADERS", stream_id)
        fragment = _unpadded(payload, flags)
        if flags & _PRIORITY_FLAG:
            if len(fragment) < 5:
                raise _ConnectionError(_FRAME_SIZE_ERROR, "a HEADERS frame too short for its priority")
            fragment = fragment[5:]
        if flags & _END_HEADERS:
            self._on_header_block(stream_id, fragment, flags)
        else:
            self._block = _HeaderBlock(stream_id, flags, bytearray(fragment))
            self._check_block(self._block)

    def _on_continuation(self, kind: int, flags: int, stream_id: int, payload: bytes) -> None:
        """Section 6.10: only CONTINUATION frames of the same stream until the block ends. The block is held
        to the header list cap as it grows, and to a number of frames (at least 1 KiB a frame on
        average, so that empty CONTINUATION frames cannot keep the connection busy forever)."""
        block = self._block
        assert block is not None
        if kind != _CONTINUATION or stream_id != block.stream_id:
            raise _ConnectionError(_PROTOCOL_ERROR, "a header block was not continued")
        block.data += payload
        block.frames += 1
        self._check_block(block)
        if flags & _END_HEADERS:
            self._block = None
            self._on_header_block(block.stream_id, bytes(block.data), block.flags)

    def _check_block(self, block: _HeaderBlock) -> None:
        if len(block.data) > self.max_header_list_size:
            raise _ConnectionError(_PROTOCOL_ERROR, f"a header block over {self.max_header_list_size} bytes")
        if block.frames > max(16, self.max_header_list_size // 1024):
            raise _ConnectionError(_ENHANCE_YOUR_CALM, f"a header block in {block.frames} frames")

    def _on_header_block(self, stream_id: int, block: bytes, flags: int) -> None:
        try:
            headers = self._decoder.decode(block)  # always: the peer's dynamic table changes
        except HPACKDecodingError as exc:  # section 4.3
            raise _ConnectionError(_COMPRESSION_ERROR, f"a header block HPACK cannot decode: {exc}") from None
        stream = self._streams.get(stream_id)
        if stream is None or stream.call.done.is_set():
            return  # a stream we closed: its answer is not wanted
        try:
            self._answer_headers(stream.call, headers, flags)
        except _StreamError as exc:
            self._reset(stream_id, stream, exc.code, ProtocolViolation(str(exc)))

    def _answer_headers(self, call: _Call, headers: list[tuple[bytes, bytes]], flags: int) -> None:
        """The answer's headers or its trailers (section 8.1: zero or more informational 1xx blocks, the
        final headers, then DATA, then trailers with END_STREAM)."""
        if call.headers is None:
            status = _header(headers, b":status")
            if status is None or len(status) != 3 or not status.isdigit():  # section 8.3.2
                raise _StreamError(_PROTOCOL_ERROR, f"malformed :status {_echo(status)}")
            if status.startswith(b"1"):
                # Informational: skipped, the final answer follows; one that ends the stream is
                # malformed (section 8.1), and 101 has no meaning in HTTP/2 (section 8.6).
                if flags & _END_STREAM or status == b"101":
                    raise _StreamError(
                        _PROTOCOL_ERROR, f"informational status {status.decode()} ends the answer"
                    )
                return
            call.headers = headers
        else:
            if not flags & _END_STREAM:
                raise _StreamError(_PROTOCOL_ERROR, "trailers that do not end the stream")
            if any(name.startswith(b":") for name, _ in headers):
                raise _StreamError(_PROTOCOL_ERROR, "a pseudo-header field in trailers")
            call.trailers = headers
        if flags & _END_STREAM:
            self._finish(call, None)

    def _on_data(self, stream_id: int, flags: int, payload: bytes) -> None:
        if stream_id == 0:  # section 6.1
            raise _ConnectionError(_PROTOCOL_ERROR, "DATA on stream 0")
        self._check_opened("DATA", stream_id)
        flow_controlled = len(payload)  # padding included
        self._received += flow_controlled
        if self._received > self._window:  # section 6.9.1
            raise _ConnectionError(_FLOW_CONTROL_ERROR, "DATA beyond the connection's flow-control window")
        data = _unpadded(payload, flags)
        refill = self._window // 2
        if self._received >= refill:
            self._reply(_frame(_WINDOW_UPDATE, 0, 0, self._received.to_bytes(4, "big")))
            self._received = 0
        stream = self._streams.get(stream_id)
        if stream is None or stream.call.done.is_set():
            return  # a stream we closed: the data counts for the connection only
        stream.received += flow_controlled
        if stream.received > self._window:
            self._reset(
                stream_id, stream, _FLOW_CONTROL_ERROR, ProtocolViolation("DATA beyond the stream's window")
            )
            return
        if stream.received >= refill and not flags & _END_STREAM:
            self._reply(_frame(_WINDOW_UPDATE, 0, stream_id, stream.received.to_bytes(4, "big")))
            stream.received = 0
        call = stream.call
        if call.headers is None:
            self._reset(
                stream_id, stream, _PROTOCOL_ERROR, ProtocolViolation("DATA before the answer's headers")
            )
            return
        too_large = call.add_data(data)
        if too_large is not None:
            self._reset(stream_id, stream, _CANCEL, too_large)  # the rest of the answer is not wanted
        elif flags & _END_STREAM:
            self._finish(call, None)

    def _on_settings(self, stream_id: int, flags: int, payload: bytes) -> None:
        """Section 6.5: the runtime's settings, each checked as section 6.5.2 says, then acknowledged."""
        if stream_id != 0:
            raise _ConnectionError(_PROTOCOL_ERROR, f"SETTINGS on stream {stream_id}")
        if flags & _ACK:
            if payload:
                raise _ConnectionError(_FRAME_SIZE_ERROR, "a SETTINGS acknowledgement with a payload")
            return
        if len(payload) % 6:
            raise _ConnectionError(_FRAME_SIZE_ERROR, f"a SETTINGS frame of {len(payload)} bytes")
        for at in range(0, len(payload), 6):
            key = int.from_bytes(payload[at : at + 2], "big")
            value = int.from_bytes(payload[at + 2 : at + 6], "big")
            if key == _SETTINGS_ENABLE_PUSH and value != 0:
                raise _ConnectionError(_PROTOCOL_ERROR, f"SETTINGS_ENABLE_PUSH {value} from a server")
            if key == _SETTINGS_MAX_CONCURRENT_STREAMS:
                self._max_streams = value
            elif key == _SETTINGS_INITIAL_WINDOW_SIZE:
                if value > _MAX_WINDOW:
                    raise _ConnectionError(_FLOW_CONTROL_ERROR, f"SETTINGS_INITIAL_WINDOW_SIZE {value}")
                for stream in self._streams.values():
                    stream.window += value - self._initial_window
                    if stream.window > _MAX_WINDOW:  # section 6.9.2
                        raise _ConnectionError(_FLOW_CONTROL_ERROR, "a stream's window over 2^31-1")
                self._initial_window = value
            elif key == _SETTINGS_MAX_FRAME_SIZE:
                if not _MAX_FRAME <= value <= _LARGEST_FRAME:
                    raise _ConnectionError(_PROTOCOL_ERROR, f"SETTINGS_MAX_FRAME_SIZE {value}")
                self._max_send_frame = value
            # SETTINGS_HEADER_TABLE_SIZE: we never index what we send; the others are advisory or unknown.
        self._reply(_frame(_SETTINGS, _ACK, 0))
        self.settled.set()
        self._changed.unpark_all()

    def _on_window_update(self, stream_id: int, payload: bytes) -> None:
        """Section 6.9: an increment of 1 to 2^31-1 that keeps the window at most 2^31-1."""
        if len(payload) != 4:
            raise _ConnectionError(_FRAME_SIZE_ERROR, f"a WINDOW_UPDATE of {len(payload)} bytes")
        increment = int.from_bytes(payload, "big") & _MAX_WINDOW
        if stream_id == 0:
            if increment == 0:
                raise _ConnectionError(_PROTOCOL_ERROR, "a connection WINDOW_UPDATE of 0")
            self._send_window += increment
            if self._send_window > _MAX_WINDOW:
                raise _ConnectionError(_FLOW_CONTROL_ERROR, "the connection's window over 2^31-1")
        else:
            self._check_opened("WINDOW_UPDATE", stream_id)
            stream = self._streams.get(stream_id)
            if stream is None or stream.call.done.is_set():
                return
            stream.window += increment
            if increment == 0 or stream.window > _MAX_WINDOW:
                code = _PROTOCOL_ERROR if increment == 0 else _FLOW_CONTROL_ERROR
                self._reset(stream_id, stream, code, ProtocolViolation(f"a bad WINDOW_UPDATE ({increment})"))
        self._changed.unpark_all()

    def _on_reset(self, stream_id: int, payload: bytes) -> None:
        if len(payload) != 4:
            raise _ConnectionError(_FRAME_SIZE_ERROR, f"a RST_STREAM of {len(payload)} bytes")
        self._check_opened("RST_STREAM", stream_id)
        call = self.calls.get(stream_id)
        if call is not None:
            code = int.from_bytes(payload, "big")
            call.reset = True
            status = _RESET_STATUSES.get(code, Status.INTERNAL)
            self._finish(call, GRPCError(status, f"stream reset by the runtime: {_error_name(code)}"))

    def _on_goaway(self, stream_id: int, payload: bytes) -> None:
        """Streams above the last one the runtime took were never processed, the others may still be
        answered; no new call goes on this connection."""
        if stream_id != 0:
            raise _ConnectionError(_PROTOCOL_ERROR, f"GOAWAY on stream {stream_id}")
        if len(payload) < 8:
            raise _ConnectionError(_FRAME_SIZE_ERROR, f"a GOAWAY of {len(payload)} bytes")
        self.draining = True
        last = int.from_bytes(payload[:4], "big") & _MAX_WINDOW
        code = int.from_bytes(payload[4:8], "big")
        for sid, call in self.calls.items():
            if sid > last:
                call.reset = True
                self._finish(call, ConnectionLost(f"the runtime went away (GOAWAY {_error_name(code)})"))
        if not self.calls:
            self._scope.cancel()
        self._changed.unpark_all()

    def _reset(self, stream_id: int, stream: _Stream, code: int, error: Exception) -> None:
        """A stream error (section 5.4.2): RST_STREAM ``code``, and the call fails with ``error``."""
        self._reply(_frame(_RST_STREAM, 0, stream_id, code.to_bytes(4, "big")))
        stream.call.reset = True
        self._finish(stream.call, error)

    @staticmethod
    def _finish(call: _Call, error: Exception | None) -> None:
        if not call.done.is_set():
            call.error = error
            call.done.set()

    def _fail(self, kind: type[Exception], message: str) -> None:
        """End every call in flight with a fresh ``kind(message)``; the connection takes no new call."""
        if self.failed:
            return
        self.failed = True
        self.failure = (kind, message)
        for call in self.calls.values():
            self._finish(call, kind(message))
        self._changed.unpark_all()
        self.settled.set()


def _unpadded(payload: bytes, flags: int) -> bytes:
    """Sections 6.1 and 6.2: padding as long as the frame or longer is a connection PROTOCOL_ERROR."""
    if not flags & _PADDED:
        return payload
    if not payload or payload[0] >= len(payload):
        raise _ConnectionError(_PROTOCOL_ERROR, "padding longer than its frame")
    return payload[1 : len(payload) - payload[0]]


def _error_name(code: int) -> str:
    """An HTTP/2 error code as grpc-go and h2 name it (``ErrorCodes.CANCEL``)."""
    return f"ErrorCodes.{_ERROR_NAMES.get(code, str(code))}"


@attrs.define(eq=False)
class H2Channel:
    """Unary gRPC calls to the server on a unix socket. Open it with :func:`open_h2_channel`."""

    path: str
    _nursery: trio.Nursery
    #: The largest answer message accepted (RESOURCE_EXHAUSTED beyond).
    max_message_size: int = MAX_MESSAGE_SIZE
    #: The largest header list accepted (the connection is closed beyond).
    max_header_list_size: int = MAX_HEADER_LIST_SIZE
    _connection: _Connection | None = None
    _dialling: trio.Lock = attrs.Factory(trio.Lock)

    async def unary(self, path: str, message: bytes) -> bytes:
        """Call the method at ``path`` (``/package.Service/Method``) with the encoded ``message``; return
        the answer's encoded message. The current Trio deadline is sent as ``grpc-timeout``; the caller's
        cancel scope, not the server, is what enforces it."""
        connection = self._connection
        if connection is None or not connection.usable or not connection.settled.is_set():
            connection = await self._dial()
        return await connection.unary(path.encode(), message)

    async def _dial(self) -> _Connection:
        """The usable connection, dialled if there is none; like grpc-go, calls wait for the runtime's
        SETTINGS first, so that its limit on concurrent streams is known before they open any."""
        async with self._dialling:
            connection = self._connection
            if connection is None or not connection.usable:
                stream = await trio.open_unix_socket(self.path)
                connection = _Connection(stream, self.max_message_size, self.max_header_list_size)
                self._nursery.start_soon(connection.run)
                self._connection = connection
            await connection.settled.wait()
            if connection.failed:  # before the runtime's HTTP/2 settings were in: say why
                kind, message = connection.failure
                raise kind(message)
            if not connection.usable:
                raise ConnectionLost("the runtime went away before the call was sent")
            return connection


@contextlib.asynccontextmanager
async def open_h2_channel(
    path: str, *, max_message_size: int = MAX_MESSAGE_SIZE, max_header_list_size: int = MAX_HEADER_LIST_SIZE
) -> AsyncIterator[H2Channel]:
    """A channel to the unix socket at ``path``; nothing is dialled until the first call. On exit its
    connection closes and any call still in flight on it fails. ``max_message_size`` and
    ``max_header_list_size`` bound what one answer may hold (see the module constants)."""
    async with trio.open_nursery() as nursery:
        channel = H2Channel(path, nursery, max_message_size, max_header_list_size)
        try:
            yield channel
        finally:
            nursery.cancel_scope.cancel()
