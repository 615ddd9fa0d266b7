"""An httpx transport that calls an ASGI app in-process and *streams* its responses (watches).

``httpx.ASGITransport`` buffers a whole response before returning it, which a watch never finishes, so
this transport runs each request's app call as a task in a nursery it owns (``open_asgi_transport``) and
hands body chunks to httpx as they are sent. Everything stays on Trio's clock: MockClock tests work.

Fault switch: :meth:`AsgiTransport.go_down` makes new requests fail with ``httpx.ConnectError`` and breaks
open streams with ``httpx.ReadError`` (an API server that went away); :meth:`come_back` reverses it.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import AsyncIterator
from typing import Any

import attrs
import httpx
import trio

logger = logging.getLogger(__name__)


@attrs.define(eq=False)
class _ResponseStream(httpx.AsyncByteStream):
    chunks: trio.MemoryReceiveChannel[bytes]
    app_scope: trio.CancelScope
    disconnected: trio.Event
    transport: AsgiTransport
    broken: bool = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            try:
                chunk = await self.chunks.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                if self.broken:
                    raise httpx.ReadError("connection reset: the fake API server went away") from None
                return
            yield chunk

    def break_(self) -> None:
        self.broken = True
        self.app_scope.cancel()

    async def aclose(self) -> None:
        self.disconnected.set()
        self.app_scope.cancel()
        self.transport._streams.discard(self)
        await trio.lowlevel.checkpoint()


@attrs.define(eq=False)
class AsgiTransport(httpx.AsyncBaseTransport):
    app: Any
    nursery: trio.Nursery
    available: bool = True
    _streams: set[_ResponseStream] = attrs.Factory(set)

    def go_down(self) -> None:
        self.available = False
        for stream in list(self._streams):
            stream.break_()
        self._streams.clear()

    def come_back(self) -> None:
        self.available = True

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if not self.available:
            await trio.lowlevel.checkpoint()
            raise httpx.ConnectError("connection refused: the fake API server is down", request=request)
        body = await request.aread()
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "scheme": request.url.scheme,
            "path": request.url.path,
            "raw_path": request.url.raw_path.split(b"?")[0],
            "query_string": request.url.query,
            "headers": [(k.lower(), v) for k, v in request.headers.raw],
            "client": ("127.0.0.1", 12345),
            "server": (request.url.host, request.url.port or 80),
        }
        send_chunk, chunks = trio.open_memory_channel[bytes](math.inf)
        started = trio.Event()
        disconnected = trio.Event()
        response: dict[str, Any] = {}
        body_sent = False

        async def receive() -> dict[str, Any]:
            nonlocal body_sent
            if not body_sent:
                body_sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await disconnected.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                response["status"] = message["status"]
                response["headers"] = message.get("headers", [])
                started.set()
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    send_chunk.send_nowait(message["body"])
                if not message.get("more_body"):
                    send_chunk.close()
            await trio.lowlevel.checkpoint()

        async def run_app(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
            with trio.CancelScope() as scope_:
                task_status.started(scope_)
                try:
                    await self.app(scope, receive, send)
                except Exception:
                    logger.exception("fake API server app failed path=%s", request.url.path)
                    if not started.is_set():
                        response["status"] = 500
                        response["headers"] = []
                finally:
                    send_chunk.close()
                    started.set()

        app_scope = await self.nursery.start(run_app)
        try:
            await started.wait()
        except BaseException:
            app_scope.cancel()
            raise
        if not self.available:
            app_scope.cancel()
            raise httpx.ConnectError("connection refused: the fake API server is down", request=request)
        stream = _ResponseStream(chunks, app_scope, disconnected, self)
        self._streams.add(stream)
        return httpx.Response(
            response.get("status", 500), headers=response.get("headers", []), stream=stream, request=request
        )


@contextlib.asynccontextmanager
async def open_asgi_transport(app: Any) -> AsyncIterator[AsgiTransport]:
    """A streaming in-process transport for ``app``; its request tasks live until the block exits."""
    try:
        async with trio.open_nursery() as nursery:
            transport = AsgiTransport(app, nursery)
            try:
                yield transport
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:  # the test's own failure, unwrapped for readable reports
        if len(group.exceptions) == 1 and not isinstance(group.exceptions[0], BaseExceptionGroup):
            raise group.exceptions[0] from None
        raise
