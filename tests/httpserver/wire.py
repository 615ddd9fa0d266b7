"""An in-memory listener for :class:`HttpServer` and a raw HTTP/1.1 client, so that the server's timeouts
run on Trio's virtual clock (``MockClock``) and the bytes on the wire are the test's to choose."""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Callable
from typing import Any

import attrs
import h11
import trio
import trio.testing

from kubelet_trio.httpserver.http11 import App, HttpServer

#: A bound on a test's whole conversation with the server, in virtual seconds (a hang fails instead).
DEADLINE = 24 * 3600
#: A well-formed request that asks for the connection to close after its response.
CLOSING_GET = b"GET /ok HTTP/1.1\r\nHost: kubelet\r\nConnection: close\r\n\r\n"


class MemoryListener(trio.abc.Listener[trio.abc.Stream]):
    """Hands the server ends of in-memory stream pairs to ``serve_listeners``."""

    def __init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[trio.abc.Stream](math.inf)

    async def accept(self) -> trio.abc.Stream:
        return await self._receive.receive()

    async def aclose(self) -> None:
        await self._receive.aclose()

    async def connect(self, *, lockstep: bool = False) -> trio.abc.HalfCloseableStream:
        """A new client connection (``lockstep``: a write blocks until the other side reads it)."""
        pair = trio.testing.lockstep_stream_pair if lockstep else trio.testing.memory_stream_pair
        client, server = pair()
        await self._send.send(server)
        return client


@contextlib.asynccontextmanager
async def serving(app: App, **options: Any) -> AsyncIterator[tuple[HttpServer, MemoryListener]]:
    """``HttpServer(app, **options)`` running on a :class:`MemoryListener` until the block ends, within
    ``DEADLINE`` (for the virtual clock); an exception escaping the server fails the block."""
    listener = MemoryListener()
    server = HttpServer(app, **options)
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run, [listener])
            yield server, listener
            nursery.cancel_scope.cancel()


async def read_to_eof(stream: trio.abc.Stream) -> bytes:
    """Everything until the server closes (or the connection breaks)."""
    received = bytearray()
    while True:
        try:
            data = await stream.receive_some(65536)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            break
        if not data:
            break
        received += data
    return bytes(received)


@attrs.frozen
class Answer:
    status: int
    reason: bytes
    headers: dict[bytes, bytes]
    body: bytes


def parse(raw: bytes) -> Answer:
    """The first response in ``raw`` (a status line, headers, a body of Content-Length bytes)."""
    head, _, rest = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.split(b"\r\n")
    _, status, reason = [*status_line.split(b" ", 2), b""][:3]
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines)}
    length = int(headers.get(b"content-length", len(rest)))
    return Answer(int(status), reason, headers, rest[:length])


async def ask(listener: MemoryListener, request: bytes) -> Answer:
    """Send ``request`` on a new connection and read the answer until the server closes."""
    client = await listener.connect()
    await client.send_all(request)
    raw = await read_to_eof(client)
    await client.aclose()
    return parse(raw)


class Client:
    """A kept-alive client connection speaking h11."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.conn = h11.Connection(h11.CLIENT)

    async def request(
        self, method: str, target: str, *, headers: list[tuple[str, str]] | None = None, body: bytes = b""
    ) -> Answer:
        if self.conn.our_state is h11.DONE:
            self.conn.start_next_cycle()
        all_headers = [("host", "kubelet"), *(headers or [])]
        if body:
            all_headers.append(("content-length", str(len(body))))
        data = self.conn.send(h11.Request(method=method, target=target, headers=all_headers))
        data += self.conn.send(h11.Data(data=body)) if body else b""
        data += self.conn.send(h11.EndOfMessage())
        await self.stream.send_all(data)
        response: h11.Response | None = None
        chunks = []
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                self.conn.receive_data(bytes(await self.stream.receive_some(65536)))
            elif isinstance(event, h11.Response):
                response = event
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                assert response is not None
                headers_ = {bytes(k): bytes(v) for k, v in response.headers}
                return Answer(response.status_code, bytes(response.reason), headers_, b"".join(chunks))
            else:
                raise AssertionError(f"unexpected {event!r}")


def counting_app(calls: list[str], body: Callable[[dict[str, Any]], bytes] | None = None) -> App:
    """An app that records each request it is given (method and path) and answers 200 ``ok``."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        calls.append(f"{scope['method']} {scope['path']}")
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok" if body is None else body(scope)})

    return app
