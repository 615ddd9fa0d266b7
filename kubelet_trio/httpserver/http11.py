"""An HTTP/1.1 server for ASGI apps on Trio (h11), which can hand an upgraded connection to the app.

ASGI knows WebSocket but no other upgrade, and ``kubectl exec``/``attach``/``port-forward`` arrive as
``Upgrade: SPDY/3.1`` (or WebSocket) requests that the kubelet proxies byte for byte to the runtime's
streaming server (Go: ``UpgradeAwareHandler``). So the Kubelet API, the read-only and healthz ports and
the test suite's fake API server are all served by this one small server instead of hypercorn.

The ``kubelet.upgrade`` scope extension: a request that asks for an upgrade (``Connection: upgrade`` and
an ``Upgrade`` header) carries ``scope["extensions"]["kubelet.upgrade"]["take"]``, a coroutine function
returning the raw connection (a :class:`trio.abc.Stream`, which first yields any bytes the client sent
after the request). An app that takes it writes the whole answer itself (status line included) and owns
the connection until it returns; the server then closes it. An app may instead answer normally (401, 404).

Each connection is its own fault domain, as ``net/http`` recovers a panic per connection: an exception
while serving it (parsing, the app, writing) is logged once with the peer and the request line, counted
under the ``http`` boundary (:mod:`kubelet_trio.boundary`), answered with 500 if no response was begun,
and only that connection is closed. Every request/response cycle starts from fresh state, so an idle
timeout can never hand an earlier request to the app again.

Deadlines, per phase rather than Go's whole-request ones (see the constants): a connection waits
``IDLE_TIMEOUT`` for the whole head of its next request (of at most ``MAX_HEADER_BYTES``); each read of a
body takes at most ``READ_TIMEOUT``, each write of a response ``WRITE_TIMEOUT``, or
``STREAM_WRITE_TIMEOUT`` once the response is streamed (``follow`` logs, watches); an upgraded connection
belongs to the app. A body the app left unread is drained (at most ``MAX_DRAIN_BYTES``) so that the
connection can be kept alive, and closed instead when more is coming.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote

import h11
import trio

from kubelet_trio.boundary import BoundaryErrors, contain
from kubelet_trio.httpserver.asgi import UPGRADE_EXTENSION

__all__ = [
    "IDLE_TIMEOUT",
    "MAX_DRAIN_BYTES",
    "MAX_HEADER_BYTES",
    "READ_TIMEOUT",
    "STREAM_WRITE_TIMEOUT",
    "UPGRADE_EXTENSION",
    "WRITE_TIMEOUT",
    "HttpServer",
    "PrefixedStream",
]

logger = logging.getLogger(__name__)

# The Go kubelet's http.Server (pkg/kubelet/server/server.go) sets IdleTimeout 90 s, ReadTimeout and
# WriteTimeout 4 h (each for a whole request or response, streams included) and MaxHeaderBytes 1 MiB;
# with no ReadHeaderTimeout, its request heads fall under the 4 h ReadTimeout too.
#: A connection between requests (or fresh) has this long to deliver the whole head of its next request:
#: Go's IdleTimeout, which here also bounds a head sent slowly.
IDLE_TIMEOUT = 90.0
TLS_HANDSHAKE_TIMEOUT = 10.0
#: Each read of a request body (and the drain of an unread one, as a whole).
READ_TIMEOUT = 60.0
#: Each write of an ordinary response.
WRITE_TIMEOUT = 60.0
#: Each write of a streamed response (``follow`` logs, watches), whose client may read only as output
#: comes: Go's 4 h, as the bound on one write the client does not take.
STREAM_WRITE_TIMEOUT = 4 * 3600.0
MAX_HEADER_BYTES = 1 << 20  # Go's MaxHeaderBytes
#: An unread request body is read and dropped up to this much before the connection is closed instead
#: (Go's maxPostHandlerReadBytes).
MAX_DRAIN_BYTES = 256 << 10
READ_SIZE = 65536
#: Bytes buffered from a client that sends ahead while its response is streaming (pipelining).
MAX_READ_AHEAD = 1 << 16

App = Callable[
    [Mapping[str, Any], Callable[[], Awaitable[dict[str, Any]]], Callable[..., Any]], Awaitable[None]
]
#: What a client going away looks like from either side of the connection: no failure of ours.
_GONE = (trio.BrokenResourceError, trio.ClosedResourceError)


class PrefixedStream(trio.abc.Stream):
    """``stream``, reading ``prefix`` first (bytes already received past an upgrade request)."""

    def __init__(self, stream: trio.abc.Stream, prefix: bytes) -> None:
        self.stream = stream
        self._prefix = prefix

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        if self._prefix:
            size = len(self._prefix) if max_bytes is None else max_bytes
            data, self._prefix = self._prefix[:size], self._prefix[size:]
            return data
        return await self.stream.receive_some(max_bytes)

    async def send_eof(self) -> None:
        if isinstance(self.stream, trio.abc.HalfCloseableStream):
            await self.stream.send_eof()

    async def aclose(self) -> None:
        await self.stream.aclose()


def _peer(stream: trio.abc.Stream) -> tuple[str, int] | None:
    inner: Any = stream.transport_stream if isinstance(stream, trio.SSLStream) else stream
    sock = getattr(inner, "socket", None)
    try:
        address = sock.getpeername() if sock is not None else None
    except OSError:
        return None
    if isinstance(address, tuple):
        return (str(address[0]), int(address[1]))
    return None


def _local(stream: trio.abc.Stream) -> tuple[str, int] | None:
    inner: Any = stream.transport_stream if isinstance(stream, trio.SSLStream) else stream
    sock = getattr(inner, "socket", None)
    try:
        address = sock.getsockname() if sock is not None else None
    except OSError:
        return None
    return (str(address[0]), int(address[1])) if isinstance(address, tuple) else None


def _address(client: tuple[str, int] | None) -> str | None:
    if client is None:
        return None
    host, port = client
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _request_line(request: h11.Request, log_path: Callable[[str], str] | None) -> str:
    """Method and path for the log: the query is left out (it may carry a token), as are the headers;
    ``log_path`` may mask the path's own secrets."""
    path = bytes(request.target).partition(b"?")[0].decode("ascii", "replace")
    return f"{bytes(request.method).decode('ascii', 'replace')} {log_path(path) if log_path else path}"


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return f"status code {status}".encode()  # as net/http words a code it has no text for


async def _next_event(conn: h11.Connection, stream: trio.abc.Stream) -> Any:
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        data = await stream.receive_some(READ_SIZE)
        conn.receive_data(bytes(data))  # b"" marks the end of the stream


class _ClientGone(Exception):
    pass


class _Exchange:
    """One request/response cycle on a connection: the ASGI ``receive`` and ``send`` over h11. Made
    afresh for each cycle, so nothing of one request is left for the next."""

    def __init__(self, conn: h11.Connection, stream: trio.abc.Stream) -> None:
        self.conn = conn
        self.stream = stream
        self.body_done = False
        self.started = False
        self.streaming = False
        self.finished = False
        self.upgraded = False
        self.disconnected = False
        self._status = 0
        self._headers: list[tuple[bytes, bytes]] = []
        self._send_lock = trio.Lock()

    @property
    def can_answer(self) -> bool:
        """Whether nothing of a response has been written, so an error status can still be sent."""
        return not self.upgraded and not self.disconnected and self.conn.our_state is h11.SEND_RESPONSE

    async def receive(self) -> dict[str, Any]:
        if self.disconnected:
            return {"type": "http.disconnect"}
        if not self.body_done:
            with trio.move_on_after(READ_TIMEOUT):
                try:
                    if self.conn.they_are_waiting_for_100_continue:
                        proceed = h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")
                        await self._write(proceed)
                    event = await _next_event(self.conn, self.stream)
                except (*_GONE, _ClientGone, h11.RemoteProtocolError):
                    event = None
                if isinstance(event, h11.Data):
                    return {"type": "http.request", "body": bytes(event.data), "more_body": True}
                if isinstance(event, h11.EndOfMessage):
                    self.body_done = True
                    return {"type": "http.request", "body": b"", "more_body": False}
            # a broken or late body, or the client gone: the connection is closed after this cycle
            self.body_done = True
            self.disconnected = True
            return {"type": "http.disconnect"}
        # The body is read: the next message is the client going away. Anything it sends meanwhile (a
        # pipelined request) stays buffered in h11 for the next cycle, up to MAX_READ_AHEAD.
        while True:
            if len(self.conn.trailing_data[0]) >= MAX_READ_AHEAD or self.finished:
                await trio.sleep_forever()
            try:
                data = await self.stream.receive_some(READ_SIZE)
            except _GONE:
                data = b""
            if not data:
                self.disconnected = True
                return {"type": "http.disconnect"}
            self.conn.receive_data(bytes(data))

    async def _write(self, event: Any) -> None:
        data = self.conn.send(event)
        if not data:
            return
        with trio.move_on_after(STREAM_WRITE_TIMEOUT if self.streaming else WRITE_TIMEOUT):
            try:
                await self.stream.send_all(data)
            except _GONE as err:
                self.disconnected = True
                raise _ClientGone from err
            return
        self.disconnected = True  # a client that does not read is dropped
        raise _ClientGone("write timed out")

    async def send(self, message: Mapping[str, Any]) -> None:
        async with self._send_lock:
            kind = message["type"]
            if kind == "http.response.start":
                if self.started:
                    raise RuntimeError("response already started")
                self._status = int(message["status"])
                self._headers = [(bytes(k), bytes(v)) for k, v in message.get("headers", ())]
                self.started = True
                return
            if kind != "http.response.body" or not self.started or self.finished:
                raise RuntimeError(f"unexpected ASGI message {kind!r}")
            body = bytes(message.get("body", b""))
            more = bool(message.get("more_body", False))
            self.streaming = self.streaming or more
            if self._status:
                headers = self._headers
                if not more and not any(k.lower() == b"content-length" for k, _ in headers):
                    headers = [*headers, (b"content-length", str(len(body)).encode())]
                status, self._status = self._status, 0
                await self._write(h11.Response(status_code=status, headers=headers, reason=_reason(status)))
            if body:
                await self._write(h11.Data(data=body))
            if not more:
                self.finished = True
                await self._write(h11.EndOfMessage())

    async def take(self) -> trio.abc.Stream:
        """The raw connection after the request (its body is read and dropped first)."""
        if self.started:
            raise RuntimeError("cannot upgrade: a response was started")
        while not self.body_done:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                break
        self.upgraded = True
        prefix = self.conn.trailing_data[0] if self.conn.their_state is h11.MIGHT_SWITCH_PROTOCOL else b""
        return PrefixedStream(self.stream, bytes(prefix))

    async def answer_error(self, status: int) -> None:
        """``status`` with its phrase as the body, closing the connection (as net/http answers a request
        it cannot serve); quietly nothing if the client is gone or h11 cannot send it any more."""
        body = f"{status} {_reason(status).decode()}".encode()
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"connection", b"close"),
            (b"content-length", str(len(body)).encode()),
        ]
        self.started = self.finished = True  # instead of whatever the app began (nothing was written)
        try:
            await self._write(h11.Response(status_code=status, headers=headers, reason=_reason(status)))
            await self._write(h11.Data(data=body))
            await self._write(h11.EndOfMessage())
        except (_ClientGone, h11.LocalProtocolError):
            pass


def _wants_upgrade(request: h11.Request) -> bool:
    connection = b",".join(v for k, v in request.headers if k == b"connection").lower()
    tokens = {t.strip() for t in connection.split(b",")}
    return b"upgrade" in tokens and any(k == b"upgrade" for k, _ in request.headers)


async def _drain(conn: h11.Connection, stream: trio.abc.Stream) -> bool:
    """Read and drop what is left of the request's body, up to ``MAX_DRAIN_BYTES`` within
    ``READ_TIMEOUT``; whether it ended, so that the connection can serve another request."""
    drained = 0
    with trio.move_on_after(READ_TIMEOUT):
        try:
            while conn.their_state is not h11.DONE:
                event = await _next_event(conn, stream)
                if isinstance(event, h11.Data):
                    drained += len(event.data)
                    if drained > MAX_DRAIN_BYTES:
                        return False
                elif not isinstance(event, h11.EndOfMessage):
                    return False
        except (*_GONE, h11.RemoteProtocolError):
            return False
        return True
    return False


class HttpServer:
    """Serves one ASGI ``app`` on listeners. ``on_connect`` sees each accepted stream and its client
    address once the TLS handshake is done, ``on_close`` the address when the connection ends; ``errors``
    counts the connections closed because serving them failed (the node's, to show on ``/metrics``), and
    ``log_path`` turns a request's path into what such a failure logs (for paths that carry a secret)."""

    def __init__(
        self,
        app: App,
        *,
        scheme: str = "http",
        idle_timeout: float = IDLE_TIMEOUT,
        errors: BoundaryErrors | None = None,
        on_connect: Callable[[trio.abc.Stream, tuple[str, int] | None], None] | None = None,
        on_close: Callable[[tuple[str, int] | None], None] | None = None,
        log_path: Callable[[str], str] | None = None,
    ) -> None:
        self.app = app
        self.log_path = log_path
        self.scheme = scheme
        self.idle_timeout = idle_timeout
        self.errors = errors
        self.on_connect = on_connect
        self.on_close = on_close
        self.connections = 0

    async def run(self, listeners: list[Any], *, task_status: trio.TaskStatus[None]) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, self.handle, listeners)
            task_status.started()

    async def handle(self, stream: trio.abc.Stream) -> None:
        """Serve one connection until it closes, idles out or is upgraded and released. Nothing but
        cancellation leaves this: a failure is this connection's alone."""
        self.connections += 1
        client = _peer(stream)
        peer = _address(client)
        try:
            with contain("http", self.errors, peer=peer):
                try:
                    if isinstance(stream, trio.SSLStream) and not await _handshake(stream):
                        return
                    if self.on_connect is not None:
                        self.on_connect(stream, client)
                    await self._serve(stream, client, peer)
                except* (*_GONE, _ClientGone):
                    pass
        finally:
            self.connections -= 1
            if self.on_close is not None:
                self.on_close(client)
            with trio.move_on_after(1, shield=True):
                await _close(stream)

    async def _serve(self, stream: trio.abc.Stream, client: tuple[str, int] | None, peer: str | None) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
        server = _local(stream)
        while True:
            request = await self._read_head(conn, stream)
            if request is None:
                return
            exchange = _Exchange(conn, stream)
            with contain(
                "http", self.errors, peer=peer, request=_request_line(request, self.log_path)
            ) as outcome:
                try:
                    await self._run_app(exchange, request, client, server)
                except* (*_GONE, _ClientGone):
                    exchange.disconnected = True
            if outcome.error is not None:
                if exchange.can_answer:
                    await exchange.answer_error(500)
                return
            if not await self._finish(exchange):
                return

    async def _read_head(self, conn: h11.Connection, stream: trio.abc.Stream) -> h11.Request | None:
        """The next request, or None when the connection is to close: the client went away, idled out or
        sent a head that is malformed or too big (answered 400 or 431)."""
        with trio.move_on_after(self.idle_timeout):
            try:
                event = await _next_event(conn, stream)
            except h11.RemoteProtocolError as err:
                await _Exchange(conn, stream).answer_error(err.error_status_hint)
                return None
            return event if isinstance(event, h11.Request) else None
        return None

    async def _run_app(
        self,
        exchange: _Exchange,
        request: h11.Request,
        client: tuple[str, int] | None,
        server: tuple[str, int] | None,
    ) -> None:
        target = bytes(request.target)
        raw_path, _, query = target.partition(b"?")
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": request.http_version.decode(),
            # as sent: methods are case-sensitive (RFC 9110), so "get" is not GET
            "method": request.method.decode("ascii"),
            "scheme": self.scheme,
            "path": unquote(raw_path.decode("ascii")),  # decoded once; routes decode no further
            "raw_path": raw_path,
            "query_string": query,
            "root_path": "",
            "headers": [(bytes(k), bytes(v)) for k, v in request.headers],
            "client": client,
            "server": server,
            "extensions": {},
        }
        if _wants_upgrade(request):
            scope["extensions"][UPGRADE_EXTENSION] = {"take": exchange.take}
        await self.app(scope, exchange.receive, exchange.send)
        if exchange.upgraded or exchange.finished or exchange.disconnected:
            return
        if not exchange.started:
            await exchange.answer_error(500)  # the app returned without answering
        else:
            await exchange.send({"type": "http.response.body", "body": b""})

    @staticmethod
    async def _finish(exchange: _Exchange) -> bool:
        """After a cycle: whether the connection may serve another request."""
        conn = exchange.conn
        if exchange.upgraded or exchange.disconnected or conn.our_state is not h11.DONE:
            return False  # taken over, gone, or the response said it closes
        if conn.their_state is not h11.DONE:
            if conn.they_are_waiting_for_100_continue:
                return False  # a body that was never asked for
            if not await _drain(conn, exchange.stream):
                return False
        try:
            conn.start_next_cycle()
        except h11.LocalProtocolError:
            return False
        return True


async def _handshake(stream: trio.SSLStream[Any]) -> bool:
    try:
        with trio.fail_after(TLS_HANDSHAKE_TIMEOUT):
            await stream.do_handshake()
    except (*_GONE, trio.TooSlowError, ssl.SSLError, OSError):
        return False
    return True


async def _close(stream: trio.abc.Stream) -> None:
    try:
        await stream.aclose()
    except (*_GONE, ssl.SSLError, OSError):
        pass
