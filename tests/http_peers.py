"""In-memory HTTP/1.1 peers for the ``connect`` seam of :class:`kubelet_trio.client.http1.Get` (httpGet
probes and hooks, the manifest URL): no sockets, so the tests that use them run under a MockClock and a
10 s timeout takes no time.

A :class:`Peers` opens one :class:`PeerStream` per connection; the stream parses the client's request
with h11 and answers with what ``serve(request, server)`` returns: bytes produced as the client reads
them (so an endless body is only produced as far as it is read). :func:`from_handler` serves an
httpx-style handler (``httpx.Request`` in, ``httpx.Response`` out); a hostile script returns raw bytes.
"""

from __future__ import annotations

import errno
import inspect
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Iterator

import attrs
import h11
import httpx
import trio

Answer = Iterable[bytes] | AsyncIterable[bytes]


@attrs.frozen
class PeerRequest:
    """A request as the peer received it (field names lower-cased by h11)."""

    host: str
    port: int
    method: str
    target: str
    headers: list[tuple[str, str]]

    def header(self, name: str) -> str | None:
        """The first value of ``name``."""
        return next((value for key, value in self.headers if key == name.lower()), None)

    def values(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name.lower()]


Serve = Callable[[PeerRequest, h11.Connection], Awaitable[Answer]]


class PeerStream(trio.abc.Stream):
    """One connection: the request in, the answer out as it is read; the end of the answer is the end of
    the stream."""

    def __init__(self, peers: Peers, host: str, port: int) -> None:
        self.peers, self.host, self.port = peers, host, port
        self.server = h11.Connection(h11.SERVER)
        self.request: h11.Request | None = None
        self.answer: Iterator[bytes] | AsyncIterator[bytes] | None = None
        self.pending = b""
        self.closed = False

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await trio.lowlevel.checkpoint()
        if self.closed:
            raise trio.ClosedResourceError
        if self.answer is not None:
            return  # bytes after the request: ignored
        self.server.receive_data(bytes(data))
        while (event := self.server.next_event()) is not h11.NEED_DATA:
            if isinstance(event, h11.Request):
                self.request = event
            elif isinstance(event, h11.EndOfMessage) and self.request is not None:
                request = PeerRequest(
                    self.host,
                    self.port,
                    self.request.method.decode(),
                    self.request.target.decode(),
                    [(name.decode(), value.decode("latin-1")) for name, value in self.request.headers],
                )
                self.peers.requests.append(request)
                answer = await self.peers.serve(request, self.server)
                self.answer = aiter(answer) if isinstance(answer, AsyncIterable) else iter(answer)
                return

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.lowlevel.checkpoint()
        if self.closed:
            raise trio.ClosedResourceError
        while not self.pending:
            if self.answer is None:
                raise trio.BrokenResourceError("nothing was asked")
            if isinstance(self.answer, AsyncIterator):
                piece = await anext(self.answer, None)
            else:
                piece = next(self.answer, None)
            if piece is None:
                return b""
            self.pending = piece
        size = max_bytes or len(self.pending)
        out, self.pending = self.pending[:size], self.pending[size:]
        return out

    async def aclose(self) -> None:
        self.closed = True
        self.peers.closed += 1
        answer, self.answer = self.answer, None
        aclose = getattr(answer, "aclose", None)
        if aclose is not None:
            await aclose()
        await trio.lowlevel.checkpoint()


@attrs.define(eq=False)
class Peers:
    """Opens the connections of a client's ``connect`` seam; ``refuse`` refuses them."""

    serve: Serve
    refuse: bool = False
    requests: list[PeerRequest] = attrs.Factory(list)
    opened: int = 0
    closed: int = 0

    async def connect(self, host: str, port: int) -> trio.abc.Stream:
        await trio.lowlevel.checkpoint()
        if self.refuse:
            raise ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
        self.opened += 1
        return PeerStream(self, host, port)


Handler = Callable[[httpx.Request], httpx.Response | Awaitable[httpx.Response]]


def from_handler(handle: Handler) -> Peers:
    """Peers that answer with an httpx-style handler (a handler raising ``httpx.ConnectError`` breaks the
    connection as a refused one would)."""

    async def serve(request: PeerRequest, server: h11.Connection) -> Answer:
        url = f"http://{request.header('host')}{request.target}"
        try:
            result = handle(httpx.Request(request.method, url, headers=request.headers))
            response = await result if inspect.isawaitable(result) else result
        except httpx.ConnectError as err:
            raise ConnectionRefusedError(errno.ECONNREFUSED, str(err)) from err
        assert isinstance(response, httpx.Response)
        return _serialize(response, server)

    return Peers(serve)


async def _serialize(response: httpx.Response, server: h11.Connection) -> AsyncIterator[bytes]:
    yield server.send(h11.Response(status_code=response.status_code, headers=response.headers.raw)) or b""
    async for chunk in response.stream:  # type: ignore[union-attr]
        if chunk:
            yield server.send(h11.Data(data=chunk)) or b""
    yield server.send(h11.EndOfMessage()) or b""


def scripted(script: Callable[[PeerRequest], Answer]) -> Peers:
    """Peers whose every answer is the raw bytes ``script(request)`` gives (a hostile server)."""

    async def serve(request: PeerRequest, server: h11.Connection) -> Answer:
        return script(request)

    return Peers(serve)
