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

Connections are kept alive between requests for ``IDLE_TIMEOUT`` (the Go kubelet's ``IdleTimeout``); a
request head must arrive whole within it and be at most ``MAX_HEADER_BYTES``.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import unquote

import h11
import trio

from kubelet_trio.httpserver.asgi import UPGRADE_EXTENSION
from kubelet_trio.logs import kv

__all__ = ["IDLE_TIMEOUT", "MAX_HEADER_BYTES", "UPGRADE_EXTENSION", "HttpServer", "PrefixedStream"]

logger = logging.getLogger(__name__)

IDLE_TIMEOUT = 90.0
TLS_HANDSHAKE_TIMEOUT = 10.0
MAX_HEADER_BYTES = 1 << 20  # the Go kubelet's MaxHeaderBytes
READ_SIZE = 65536
#: Bytes buffered from a client that sends ahead while its response is streaming (pipelining).
MAX_READ_AHEAD = 1 << 16

App = Callable[
    [Mapping[str, Any], Callable[[], Awaitable[dict[str, Any]]], Callable[..., Any]], Awaitable[None]
]


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


class _ClientGone(Exception):
    pass


class _Exchange:
    """One request/response on a connection: the ASGI ``receive`` and ``send`` over h11."""

    def __init__(self, conn: h11.Connection, stream: trio.abc.Stream) -> None:
        self.conn = conn
        self.stream = stream
        self.body_done = False
        self.started = False
        self.finished = False
        self.upgraded = False
        self.disconnected = False
        self._status = 0
        self._headers: list[tuple[bytes, bytes]] = []
        self._send_lock = trio.Lock()

    async def _next_event(self) -> Any:
        while True:
            event = self.conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            data = await self.stream.receive_some(READ_SIZE)
            self.conn.receive_data(bytes(data))  # b"" marks the end of the stream

    async def receive(self) -> dict[str, Any]:
        if self.disconnected:
            return {"type": "http.disconnect"}
        if not self.body_done:
            try:
                event = await self._next_event()
            except (trio.BrokenResourceError, trio.ClosedResourceError, h11.RemoteProtocolError):
                self.disconnected = True
                return {"type": "http.disconnect"}
            if isinstance(event, h11.Data):
                return {"type": "http.request", "body": bytes(event.data), "more_body": True}
            self.body_done = True
            if isinstance(event, h11.EndOfMessage):
                return {"type": "http.request", "body": b"", "more_body": False}
            self.disconnected = True
            return {"type": "http.disconnect"}
        # The body is read: the next message is the client going away. Anything it sends meanwhile (a
        # pipelined request) stays buffered in h11 for the next cycle, up to MAX_READ_AHEAD.
        while True:
            if len(self.conn.trailing_data[0]) >= MAX_READ_AHEAD or self.finished:
                await trio.sleep_forever()
            try:
                data = await self.stream.receive_some(READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                self.disconnected = True
                return {"type": "http.disconnect"}
            self.conn.receive_data(bytes(data))

    async def _write(self, event: Any) -> None:
        data = self.conn.send(event)
        if data:
            try:
                await self.stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as err:
                self.disconnected = True
                raise _ClientGone from err

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
            if self._status:
                headers = self._headers
                if not more and not any(k.lower() == b"content-length" for k, _ in headers):
                    headers = [*headers, (b"content-length", str(len(body)).encode())]
                status, self._status = self._status, 0
                await self._write(h11.Response(status_code=status, headers=headers))
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


def _wants_upgrade(request: h11.Request) -> bool:
    connection = b",".join(v for k, v in request.headers if k == b"connection").lower()
    tokens = {t.strip() for t in connection.split(b",")}
    return b"upgrade" in tokens and any(k == b"upgrade" for k, _ in request.headers)


class HttpServer:
    """Serves one ASGI ``app`` on listeners. ``on_connect`` sees each accepted stream and its client
    address once the TLS handshake is done, ``on_close`` the address when the connection ends."""

    def __init__(
        self,
        app: App,
        *,
        scheme: str = "http",
        idle_timeout: float = IDLE_TIMEOUT,
        on_connect: Callable[[trio.abc.Stream, tuple[str, int] | None], None] | None = None,
        on_close: Callable[[tuple[str, int] | None], None] | None = None,
    ) -> None:
        self.app = app
        self.scheme = scheme
        self.idle_timeout = idle_timeout
        self.on_connect = on_connect
        self.on_close = on_close
        self.connections = 0

    async def run(self, listeners: list[Any], *, task_status: trio.TaskStatus[None]) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, self.handle, listeners)
            task_status.started()

    async def handle(self, stream: trio.abc.Stream) -> None:
        """Serve one connection until it closes, idles out or is upgraded and released."""
        self.connections += 1
        client = _peer(stream)
        try:
            if isinstance(stream, trio.SSLStream):
                try:
                    with trio.fail_after(TLS_HANDSHAKE_TIMEOUT):
                        await stream.do_handshake()
                except (trio.BrokenResourceError, trio.TooSlowError, ssl.SSLError, OSError):
                    return
            if self.on_connect is not None:
                self.on_connect(stream, client)
            await self._serve(stream, client)
        except (trio.BrokenResourceError, trio.ClosedResourceError, _ClientGone):
            pass
        finally:
            self.connections -= 1
            if self.on_close is not None:
                self.on_close(client)
            with trio.move_on_after(1, shield=True):
                await _close(stream)

    async def _serve(self, stream: trio.abc.Stream, client: tuple[str, int] | None) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
        server = _local(stream)
        while True:
            exchange = _Exchange(conn, stream)
            with trio.move_on_after(self.idle_timeout):
                try:
                    event = await exchange._next_event()
                except h11.RemoteProtocolError as err:
                    await self._error(exchange, err.error_status_hint)
                    return
            if not isinstance(event, h11.Request):
                return  # idle timeout, closed, or paused without a request
            await self._run_app(exchange, event, client, server)
            if exchange.upgraded or exchange.disconnected:
                return
            if conn.our_state is not h11.DONE:
                return  # the app failed mid-response
            while conn.their_state is not h11.DONE:  # drop a body the app did not read
                if (await exchange.receive())["type"] == "http.disconnect":
                    return
            try:
                conn.start_next_cycle()
            except h11.LocalProtocolError:
                return

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
            "method": request.method.decode("ascii").upper(),
            "scheme": self.scheme,
            "path": unquote(raw_path.decode("latin-1")),
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
        try:
            await self.app(scope, exchange.receive, exchange.send)
        except _ClientGone:
            return
        except Exception:
            logger.exception("HTTP app failed", extra=kv(path=scope["path"]))
            if not exchange.started and not exchange.upgraded:
                await self._error(exchange, 500)
            return
        if exchange.upgraded:
            return
        if not exchange.finished and not exchange.disconnected:
            if not exchange.started:
                await self._error(exchange, 500)
            else:
                await exchange.send({"type": "http.response.body", "body": b""})

    @staticmethod
    async def _error(exchange: _Exchange, status: int) -> None:
        try:
            await exchange.send(
                {"type": "http.response.start", "status": status, "headers": [(b"connection", b"close")]}
            )
            await exchange.send({"type": "http.response.body", "body": b""})
        except (_ClientGone, h11.LocalProtocolError):
            pass


async def _close(stream: trio.abc.Stream) -> None:
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, ssl.SSLError, OSError):
        await stream.aclose()
