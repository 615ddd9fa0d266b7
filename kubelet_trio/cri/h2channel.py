"""A gRPC client channel for unary calls over a unix socket, on Trio and ``h2``: the CRI client's transport.

grpclib is asyncio-only; running it on a thread of its own made every CRI call hop Trio → asyncio → Trio.
This channel speaks HTTP/2 itself, on a connection Trio owns, so a call costs one HTTP/2 stream: the
HEADERS of a gRPC request, its one length-prefixed message, and the answer read back by the
connection's reader task. It does only what the CRI needs: unary calls, no compression, no TLS.

One connection per channel, dialled by the first call and again by the first call after it was lost
(that is what lets a session outlive a runtime restart). Each connection runs a reader task, which owns
receiving frames and hands every stream its events, and a writer task, which owns sending what the h2
state machine queued; callers only change that state. A caller cancelled while its bytes are being
written therefore never leaves half a frame on the wire, and it returns at once: its stream is reset
(``RST_STREAM CANCEL``) and the connection stays usable.

Errors, as grpclib raised them so :func:`kubelet_trio.cri.remote.translate_error` maps them alike:
a non-OK ``grpc-status`` is a :class:`grpclib.GRPCError`; a connection that cannot be dialled, or is lost
during a call, is an ``OSError`` (:class:`ConnectionLost` for the latter) failing every call in flight;
an answer that is not gRPC (a bad frame, a bad message prefix, a compressed or second message, no
status) is a :class:`ProtocolViolation`, which fails that call only, or every call of the connection
when its HTTP/2 framing is broken (the next call dials afresh).
"""

from __future__ import annotations

import contextlib
import math
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final

import attrs
import h2.config
import h2.connection
import h2.events
import h2.exceptions
import trio
from grpclib import GRPCError, Status
from h2.errors import ErrorCodes

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

# A RST_STREAM from the peer, as grpc-go maps its error codes (any other is INTERNAL).
_RESET_STATUSES: Final = {
    ErrorCodes.REFUSED_STREAM: Status.UNAVAILABLE,
    ErrorCodes.CANCEL: Status.CANCELLED,
    ErrorCodes.ENHANCE_YOUR_CALM: Status.RESOURCE_EXHAUSTED,
    ErrorCodes.INADEQUATE_SECURITY: Status.PERMISSION_DENIED,
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


_H2_CONFIG: Final = h2.config.H2Configuration(
    client_side=True,
    header_encoding=None,
    # Our own headers are constants. The runtime's are only looked up by name and compared, never passed
    # on: h2's per-character checks of every name and value were a tenth of a CRI call's CPU.
    validate_outbound_headers=False,
    normalize_outbound_headers=False,
    validate_inbound_headers=False,
    normalize_inbound_headers=False,
)


@attrs.define(eq=False)
class _Connection:
    """One HTTP/2 connection: its socket, its h2 state and the calls in flight on it."""

    stream: trio.SocketStream
    h2: h2.connection.H2Connection = attrs.Factory(lambda: h2.connection.H2Connection(config=_H2_CONFIG))
    calls: dict[int, _Call] = attrs.Factory(dict)
    #: No new call goes on this connection (GOAWAY, stream ids used up); those in flight may finish.
    draining: bool = False
    #: The connection is lost; every call that was on it failed.
    failed: bool = False
    #: Set once the runtime's first SETTINGS arrived (its stream limit is known) or the connection failed.
    settled: trio.Event = attrs.Factory(trio.Event)
    #: Where the writer waits for something to send.
    _send_wanted: trio.lowlevel.ParkingLot = attrs.Factory(trio.lowlevel.ParkingLot)
    #: Bytes the reader took from h2 (acknowledgements, window updates), sent before h2's next ones.
    _outgoing: bytearray = attrs.Factory(bytearray)
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

    async def unary(self, path: bytes, message: bytes) -> bytes:
        """Send one request on a new stream and return the answer's message."""
        while self.usable and self.h2.open_outbound_streams >= self.h2.remote_settings.max_concurrent_streams:
            await self._changed.park()
        if not self.usable:
            raise ConnectionLost("the CRI connection closed before the call was sent")
        stream_id = self.h2.get_next_available_stream_id()
        if stream_id >= _LAST_STREAM_ID - 2:
            self.draining = True  # the next call dials a new connection
        headers = [
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":path", path),
            (b":authority", AUTHORITY),
            (b"content-type", b"application/grpc"),
            (b"te", b"trailers"),
            (b"user-agent", b"kubelet-trio"),
        ]
        deadline = trio.current_effective_deadline()
        if not math.isinf(deadline):
            headers.append((b"grpc-timeout", grpc_timeout(deadline - trio.current_time())))
        call = self.calls[stream_id] = _Call()
        try:
            self.h2.send_headers(stream_id, headers)
            body = len(message).to_bytes(_PREFIX_SIZE, "big") + message  # flag 0: not compressed
            await self._send_body(stream_id, call, body)
            await call.done.wait()
        finally:
            del self.calls[stream_id]
            self._close_stream(stream_id, call)
        return call.answer()

    def _close_stream(self, stream_id: int, call: _Call) -> None:
        """Free the stream's slot: a call that was cancelled, or answered before its whole request was
        sent, resets its stream (CANCEL, or NO_ERROR as grpc-go does after an early answer)."""
        if not self.failed:
            stream = self.h2.streams.get(stream_id)
            if stream is not None and not stream.closed:
                code = ErrorCodes.NO_ERROR if call.done.is_set() else ErrorCodes.CANCEL
                with contextlib.suppress(h2.exceptions.H2Error):
                    self.h2.reset_stream(stream_id, code)
                self._send_wanted.unpark_all()
        self._changed.unpark_all()
        if self.draining and not self.calls:
            self._scope.cancel()

    async def _send_body(self, stream_id: int, call: _Call, body: bytes) -> None:
        """Queue ``body`` as DATA frames, waiting for flow-control window when the peer's is too small."""
        view = memoryview(body)
        while not call.done.is_set():  # an answer or a reset before the whole body: stop sending
            window = min(self.h2.local_flow_control_window(stream_id), self.h2.max_outbound_frame_size)
            if window <= 0:
                await self._changed.park()
                continue
            chunk, view = view[:window], view[window:]
            self.h2.send_data(stream_id, chunk.tobytes(), end_stream=not view)
            self._send_wanted.unpark_all()
            if not view:
                return

    async def _guarded(self, work: Callable[[], Awaitable[None]]) -> None:
        """Run the reader or the writer; when either ends, the connection is over."""
        try:
            await work()
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self._fail(ConnectionLost, f"the CRI connection failed: {exc!r}")
        except Exception as exc:  # the runtime's bytes: h2 or this module could not follow them
            self._fail(ProtocolViolation, f"the CRI connection broke HTTP/2: {type(exc).__name__}: {exc}")
        self._scope.cancel()

    async def _write(self) -> None:
        while True:
            data = self.h2.data_to_send()
            if self._outgoing:
                data, self._outgoing = bytes(self._outgoing + data), bytearray()
            if data:
                await self.stream.send_all(data)
            else:
                await self._send_wanted.park()

    async def _read(self) -> None:
        while True:
            data = await self.stream.receive_some(RECEIVE_SIZE)
            if not data:
                self._fail(ConnectionLost, "the runtime closed the CRI connection")
                return
            for event in self.h2.receive_data(data):
                self._dispatch(event)
            # Acknowledgements, window updates, pings: waking the writer only when there are some saves a
            # task switch per answer.
            pending = self.h2.data_to_send()
            if pending:
                self._outgoing += pending
                self._send_wanted.unpark_all()

    def _dispatch(self, event: object) -> None:
        if isinstance(event, h2.events.DataReceived):
            assert event.stream_id is not None and event.flow_controlled_length is not None
            self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            call = self.calls.get(event.stream_id)
            if call is not None and not call.done.is_set() and event.data:
                call.data += event.data
                if len(call.data) > _PREFIX_SIZE + MAX_MESSAGE_SIZE:
                    self.h2.reset_stream(event.stream_id, ErrorCodes.CANCEL)
                    self._finish(
                        call, GRPCError(Status.RESOURCE_EXHAUSTED, f"answer larger than {MAX_MESSAGE_SIZE}")
                    )
        elif isinstance(event, h2.events.ResponseReceived):
            call = self.calls.get(event.stream_id or 0)
            if call is not None:
                call.headers = list(event.headers or [])
        elif isinstance(event, h2.events.TrailersReceived):
            call = self.calls.get(event.stream_id or 0)
            if call is not None:
                call.trailers = list(event.headers or [])
        elif isinstance(event, h2.events.StreamEnded):
            call = self.calls.get(event.stream_id or 0)
            if call is not None:
                self._finish(call, None)
            self._changed.unpark_all()
        elif isinstance(event, h2.events.StreamReset):
            call = self.calls.get(event.stream_id or 0)
            if call is not None and event.remote_reset:
                code = _RESET_STATUSES.get(event.error_code, Status.INTERNAL)  # type: ignore[call-overload]
                message = f"stream reset by the runtime: {event.error_code!r}"
                self._finish(call, GRPCError(code, message))
            self._changed.unpark_all()
        elif isinstance(event, h2.events.ConnectionTerminated):
            # GOAWAY: streams above the last one the runtime took were never processed, the others may
            # still be answered; no new call goes on this connection.
            self.draining = True
            last = event.last_stream_id if event.last_stream_id is not None else _LAST_STREAM_ID
            for stream_id, call in self.calls.items():
                if stream_id > last:
                    self._finish(call, ConnectionLost(f"the runtime went away (GOAWAY {event.error_code!r})"))
            if not self.calls:
                self._scope.cancel()
            self._changed.unpark_all()
        elif isinstance(event, h2.events.RemoteSettingsChanged):
            self.settled.set()
            self._changed.unpark_all()
        elif isinstance(event, h2.events.WindowUpdated):
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
                connection.h2.initiate_connection()
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
