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

Errors, as grpclib raised them so :func:`kubelet_trio.cri.remote.translate_error` maps them alike:
a non-OK ``grpc-status`` is a :class:`grpclib.GRPCError`; a connection that cannot be dialled, or is lost
during a call, is an ``OSError`` (:class:`ConnectionLost` for the latter) failing every call in flight;
an answer that is not gRPC (a bad frame, a bad message prefix, a compressed or second message, no
status) is a :class:`ProtocolViolation`, which fails that call only, or every call of the connection
when its HTTP/2 framing is broken (the next call dials afresh).
"""

from __future__ import annotations

import contextlib
import functools
import math
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final

import attrs
import hpack
import trio
from grpclib import GRPCError, Status

__all__ = ["MAX_MESSAGE_SIZE", "ConnectionLost", "H2Channel", "ProtocolViolation", "open_h2_channel"]

#: The largest answer accepted, as the Go kubelet's CRI client (``maxMsgSize``, 16 MiB).
MAX_MESSAGE_SIZE: Final = 16 * 1024 * 1024
#: Bytes read from the socket at a time.
RECEIVE_SIZE: Final = 65536
#: The last client stream id HTTP/2 allows; a connection that used them all is replaced.
_LAST_STREAM_ID: Final = 2**31 - 1
#: What grpc-go sends as ``:authority`` for a unix socket; containerd accepts any.
AUTHORITY: Final = b"localhost"

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

# HTTP/2 error codes by number (RFC 9113 section 7).
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


@attrs.define(eq=False)
class _Call:
    """One stream's answer as the reader task gathers it."""

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
        http_status = _header(headers, b":status")
        if status is None:
            if http_status != b"200":
                code = _HTTP_STATUSES.get(int(http_status or b"0"), Status.UNKNOWN)
                raise GRPCError(code, f"unexpected HTTP status {(http_status or b'').decode()}")
            raise ProtocolViolation("the answer ended without a grpc-status")
        try:
            code = Status(int(status))
        except ValueError:
            code = Status.UNKNOWN
        if code is not Status.OK:
            message = _header(trailers, b"grpc-message") or b""
            raise GRPCError(code, urllib.parse.unquote_to_bytes(message).decode("utf-8", "replace"))
        content_type = _header(headers, b"content-type") or b""
        if http_status != b"200" or not content_type.startswith(b"application/grpc"):
            raise ProtocolViolation(f"not a gRPC answer: HTTP {http_status!r}, content-type {content_type!r}")
        data = self.data
        if len(data) < _PREFIX_SIZE:
            raise ProtocolViolation(f"expected one message, got {len(data)} bytes")
        if data[0] != 0:
            raise ProtocolViolation(f"message flag {data[0]}: compression was not negotiated")
        size = int.from_bytes(data[1:_PREFIX_SIZE], "big")
        if len(data) != _PREFIX_SIZE + size:
            raise ProtocolViolation(f"expected one message of {size} bytes, got {len(data) - _PREFIX_SIZE}")
        return bytes(data[_PREFIX_SIZE:])


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
# Error codes.
_NO_ERROR: Final = 0x0
_PROTOCOL_ERROR: Final = 0x1
_CANCEL: Final = 0x8

_PREFACE: Final = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_FRAME_HEADER: Final = 9
#: Frames we accept (we never advertise more than the protocol's default).
_MAX_FRAME: Final = 16384
_DEFAULT_WINDOW: Final = 65535
_MAX_WINDOW: Final = 2**31 - 1
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


def _client_start(window: int) -> bytes:
    """The connection preface, our SETTINGS (no server push; ``window`` for every stream) and the
    connection's window raised to ``window`` too."""
    settings = b"".join(
        key.to_bytes(2, "big") + value.to_bytes(4, "big")
        for key, value in ((_SETTINGS_ENABLE_PUSH, 0), (_SETTINGS_INITIAL_WINDOW_SIZE, window))
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


class _Stream:
    """Our side of one stream: the call it answers and what may still be sent on it."""

    __slots__ = ("call", "ended_local", "received", "window")

    def __init__(self, call: _Call, window: int) -> None:
        self.call = call
        self.window = window  # bytes the peer lets us send on this stream
        self.ended_local = False  # our END_STREAM went out
        self.received = 0  # bytes of DATA since its window was last topped up


@attrs.define(eq=False)
class _Connection:
    """One HTTP/2 connection: its socket, the frames read and written, and the calls in flight on it.

    The framing is done here rather than by a general HTTP/2 library: a unary gRPC client needs a small
    part of the protocol, and the library's state machines were most of a call's CPU. Header blocks
    received are decoded by ``hpack`` (the peer may use its dynamic table and Huffman codes); those sent
    are literals without indexing, encoded once."""

    stream: trio.SocketStream
    calls: dict[int, _Call] = attrs.Factory(dict)
    #: No new call goes on this connection (GOAWAY, stream ids used up); those in flight may finish.
    draining: bool = False
    #: The connection is lost; every call that was on it failed.
    failed: bool = False
    #: Set once the runtime's first SETTINGS arrived (its stream limit is known) or the connection failed.
    settled: trio.Event = attrs.Factory(trio.Event)
    _streams: dict[int, _Stream] = attrs.Factory(dict)
    _next_stream_id: int = 1
    _decoder: hpack.Decoder = attrs.Factory(hpack.Decoder)
    _max_streams: float = math.inf
    _initial_window: int = _DEFAULT_WINDOW  # the peer's, for our new streams
    _max_send_frame: int = _MAX_FRAME
    _send_window: int = _DEFAULT_WINDOW  # the connection's, for what we send
    _received: int = 0  # bytes of DATA since the connection's window was last topped up
    #: Frames waiting for the writer.
    _outgoing: bytearray = attrs.Factory(lambda: bytearray(_client_start(RECEIVE_WINDOW)))
    #: Where the writer waits for something to send.
    _send_wanted: trio.lowlevel.ParkingLot = attrs.Factory(trio.lowlevel.ParkingLot)
    #: Where calls wait to proceed: flow-control window or stream slots grew, or the connection failed.
    _changed: trio.lowlevel.ParkingLot = attrs.Factory(trio.lowlevel.ParkingLot)
    _scope: trio.CancelScope = attrs.Factory(trio.CancelScope)

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
        call = self.calls[stream_id] = _Call()
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
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self._fail(ConnectionLost, f"the CRI connection failed: {exc!r}")
        except Exception as exc:  # the runtime's bytes: this module could not follow them
            self._fail(ProtocolViolation, f"the CRI connection broke HTTP/2: {type(exc).__name__}: {exc}")
        self._scope.cancel()

    async def _write(self) -> None:
        while True:
            if self._outgoing:
                data, self._outgoing = bytes(self._outgoing), bytearray()
                await self.stream.send_all(data)
            else:
                await self._send_wanted.park()

    async def _read(self) -> None:
        buffer = bytearray()
        block = bytearray()  # a header block continued over CONTINUATION frames
        block_stream = 0
        block_flags = 0
        while True:
            data = await self.stream.receive_some(RECEIVE_SIZE)
            if not data:
                self._fail(ConnectionLost, "the runtime closed the CRI connection")
                return
            buffer += data
            offset = 0
            while len(buffer) - offset >= _FRAME_HEADER:
                length = int.from_bytes(buffer[offset : offset + 3], "big")
                if length > _MAX_FRAME:
                    raise ProtocolViolation(f"a frame of {length} bytes, more than {_MAX_FRAME}")
                end = offset + _FRAME_HEADER + length
                if len(buffer) < end:
                    break
                kind, flags = buffer[offset + 3], buffer[offset + 4]
                stream_id = int.from_bytes(buffer[offset + 5 : offset + 9], "big") & _MAX_WINDOW
                payload = bytes(buffer[offset + _FRAME_HEADER : end])
                offset = end
                if block_stream:
                    if kind != _CONTINUATION or stream_id != block_stream:
                        raise ProtocolViolation("a header block was not continued")
                    block += payload
                    if flags & _END_HEADERS:
                        self._headers(block_stream, bytes(block), block_flags)
                        block_stream = 0
                    continue
                if kind == _HEADERS:
                    fragment = _unpadded(payload, flags)
                    if flags & _PRIORITY_FLAG:
                        fragment = fragment[5:]
                    if flags & _END_HEADERS:
                        self._headers(stream_id, fragment, flags)
                    else:
                        block, block_stream, block_flags = bytearray(fragment), stream_id, flags
                elif kind == _DATA:
                    self._data(stream_id, _unpadded(payload, flags), flags, length)
                else:
                    self._control(kind, flags, stream_id, payload)
            del buffer[:offset]

    def _headers(self, stream_id: int, block: bytes, flags: int) -> None:
        headers = self._decoder.decode(block, raw=True)  # always: the peer's dynamic table changes
        call = self.calls.get(stream_id)
        if call is None or call.done.is_set():
            return
        pairs = [(bytes(name), bytes(value)) for name, value in headers]
        if call.headers is None:
            call.headers = pairs
        else:
            call.trailers = pairs
        if flags & _END_STREAM:
            self._finish(call, None)

    def _data(self, stream_id: int, data: bytes, flags: int, flow_controlled: int) -> None:
        refill = RECEIVE_WINDOW // 2
        self._received += flow_controlled
        if self._received >= refill:
            self._send(_frame(_WINDOW_UPDATE, 0, 0, self._received.to_bytes(4, "big")))
            self._received = 0
        stream = self._streams.get(stream_id)
        if stream is None or stream.call.done.is_set():
            return
        stream.received += flow_controlled
        if stream.received >= refill and not flags & _END_STREAM:
            self._send(_frame(_WINDOW_UPDATE, 0, stream_id, stream.received.to_bytes(4, "big")))
            stream.received = 0
        call = stream.call
        call.data += data
        if len(call.data) > _PREFIX_SIZE + MAX_MESSAGE_SIZE:
            self._send(_frame(_RST_STREAM, 0, stream_id, _CANCEL.to_bytes(4, "big")))
            call.reset = True  # closed: the rest of the answer is not wanted
            self._finish(call, GRPCError(Status.RESOURCE_EXHAUSTED, f"answer larger than {MAX_MESSAGE_SIZE}"))
        elif flags & _END_STREAM:
            self._finish(call, None)

    def _control(self, kind: int, flags: int, stream_id: int, payload: bytes) -> None:
        if kind == _SETTINGS:
            if flags & _ACK:
                return
            for at in range(0, len(payload) - 5, 6):
                key = int.from_bytes(payload[at : at + 2], "big")
                value = int.from_bytes(payload[at + 2 : at + 6], "big")
                if key == _SETTINGS_MAX_CONCURRENT_STREAMS:
                    self._max_streams = value
                elif key == _SETTINGS_INITIAL_WINDOW_SIZE:
                    for stream in self._streams.values():
                        stream.window += value - self._initial_window
                    self._initial_window = value
                elif key == _SETTINGS_MAX_FRAME_SIZE:
                    self._max_send_frame = value
            self._send(_frame(_SETTINGS, _ACK, 0))
            self.settled.set()
        elif kind == _PING:
            if not flags & _ACK:
                self._send(_frame(_PING, _ACK, 0, payload))
            return
        elif kind == _WINDOW_UPDATE:
            increment = int.from_bytes(payload[:4], "big") & _MAX_WINDOW
            if stream_id == 0:
                self._send_window += increment
            elif (target := self._streams.get(stream_id)) is not None:
                target.window += increment
        elif kind == _RST_STREAM:
            call = self.calls.get(stream_id)
            if call is not None:
                code = int.from_bytes(payload[:4], "big")
                call.reset = True
                status = _RESET_STATUSES.get(code, Status.INTERNAL)
                self._finish(call, GRPCError(status, f"stream reset by the runtime: {_error_name(code)}"))
        elif kind == _GOAWAY:
            # Streams above the last one the runtime took were never processed, the others may still
            # be answered; no new call goes on this connection.
            self.draining = True
            last = int.from_bytes(payload[:4], "big") & _MAX_WINDOW
            code = int.from_bytes(payload[4:8], "big")
            for sid, call in self.calls.items():
                if sid > last:
                    call.reset = True
                    self._finish(call, ConnectionLost(f"the runtime went away (GOAWAY {_error_name(code)})"))
            if not self.calls:
                self._scope.cancel()
        elif kind == _PUSH_PROMISE:
            raise ProtocolViolation("a server push, which this client disabled")
        elif kind == _CONTINUATION:
            raise ProtocolViolation("a CONTINUATION frame without a header block")
        # PRIORITY and unknown frame types are ignored, as the protocol says.
        self._changed.unpark_all()

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
        for call in self.calls.values():
            self._finish(call, kind(message))
        self._changed.unpark_all()
        self.settled.set()


def _unpadded(payload: bytes, flags: int) -> bytes:
    if not flags & _PADDED:
        return payload
    if not payload or payload[0] >= len(payload):
        raise ProtocolViolation("padding longer than its frame")
    return payload[1 : len(payload) - payload[0]]


def _error_name(code: int) -> str:
    """An HTTP/2 error code as grpc-go and h2 name it (``ErrorCodes.CANCEL``)."""
    return f"ErrorCodes.{_ERROR_NAMES.get(code, str(code))}"


@attrs.define(eq=False)
class H2Channel:
    """Unary gRPC calls to the server on a unix socket. Open it with :func:`open_h2_channel`."""

    path: str
    _nursery: trio.Nursery
    _connection: _Connection | None = None
    _dialling: trio.Lock = attrs.Factory(trio.Lock)

    @property
    def calls_in_flight(self) -> int:
        """Calls waiting for their answer (a cancelled call is not one: it returned)."""
        return len(self._connection.calls) if self._connection is not None else 0

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
                connection = _Connection(stream)
                self._nursery.start_soon(connection.run)
                self._connection = connection
            await connection.settled.wait()
            if not connection.usable:
                raise ConnectionLost("the CRI connection closed before the runtime's HTTP/2 settings")
            return connection


@contextlib.asynccontextmanager
async def open_h2_channel(path: str) -> AsyncIterator[H2Channel]:
    """A channel to the unix socket at ``path``; nothing is dialled until the first call. On exit its
    connection closes and any call still in flight on it fails."""
    async with trio.open_nursery() as nursery:
        channel = H2Channel(path, nursery)
        try:
            yield channel
        finally:
            nursery.cancel_scope.cancel()
