"""The API client's connections for watches (and for everything when a caller hands the client an httpx
transport): HTTP/1.1 keep-alive connections to one server through httpcore, the idle ones on a stack.
Single requests on the network use :mod:`kubelet_trio.client.http1`.

httpcore's own pool walks every pooled connection on every request and every response close, asking
each idle one's socket whether the server hung up (a system call each): with the thirty status writes of
a 30-pod start in flight that was an eighth of the kubelet's CPU. It also closes every connection that
goes idle while more than ``max_keepalive_connections`` exist in all, so the next burst paid a TLS
handshake per request again. Here a request takes the most recently used idle connection (checking
only that one), or opens a new one; a finished response puts its connection back while fewer than
``max_idle`` are idle. The count of connections in use is bounded by the callers (watches, and the
status publisher's concurrency), as the Go client's single HTTP/2 connection bounds nothing either.

Imported by :func:`~kubelet_trio.client.client.open_api_client` only (it imports httpx and httpcore).
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterable, AsyncIterator, Iterable

import httpcore
import httpx
import trio

__all__ = ["KeepAlivePool", "keep_alive_transport"]


class KeepAlivePool:
    """httpcore's request interface over a stack of idle :class:`httpcore.AsyncHTTPConnection`."""

    def __init__(self, ssl_context: ssl.SSLContext | None, *, max_idle: int, keepalive_expiry: float) -> None:
        self.ssl_context = ssl_context
        self.max_idle = max_idle
        self.keepalive_expiry = keepalive_expiry
        self.idle: list[httpcore.AsyncHTTPConnection] = []
        self.opened = 0  # connections opened so far (for tests and diagnostics)

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        connection = await self._take(request.url.origin)
        try:
            response = await connection.handle_async_request(request)
        except BaseException:
            with trio.CancelScope(shield=True):
                await connection.aclose()
            raise
        return httpcore.Response(
            status=response.status,
            headers=response.headers,
            content=AsyncReleasingStream(response.stream, self, connection),
            extensions=response.extensions,
        )

    async def _take(self, origin: httpcore.Origin) -> httpcore.AsyncHTTPConnection:
        while self.idle:
            connection = self.idle.pop()
            if (
                connection.can_handle_request(origin)
                and connection.is_idle()
                and not connection.has_expired()
            ):
                return connection
            await connection.aclose()
        self.opened += 1
        return httpcore.AsyncHTTPConnection(
            origin=origin, ssl_context=self.ssl_context, keepalive_expiry=self.keepalive_expiry
        )

    async def release(self, connection: httpcore.AsyncHTTPConnection) -> None:
        """A response is done with ``connection``: keep it for the next request, or close it."""
        if connection.is_idle() and len(self.idle) < self.max_idle:
            self.idle.append(connection)
        else:
            await connection.aclose()

    async def aclose(self) -> None:
        idle, self.idle = self.idle, []
        for connection in idle:
            await connection.aclose()

    async def __aenter__(self) -> KeepAlivePool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class AsyncReleasingStream:
    """A response body that hands its connection back to the pool once it is closed."""

    def __init__(
        self,
        stream: Iterable[bytes] | AsyncIterable[bytes],
        pool: KeepAlivePool,
        connection: httpcore.AsyncHTTPConnection,
    ) -> None:
        self._stream = stream
        self._pool = pool
        self._connection: httpcore.AsyncHTTPConnection | None = connection

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if isinstance(self._stream, AsyncIterable):
            async for chunk in self._stream:
                yield chunk
        else:
            for chunk in self._stream:
                yield chunk

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        with trio.CancelScope(shield=True):
            try:
                close = getattr(self._stream, "aclose", None)
                if close is not None:
                    await close()
            finally:
                await self._pool.release(connection)


def keep_alive_transport(
    verify: ssl.SSLContext | bool, *, max_idle: int, keepalive_expiry: float
) -> httpx.AsyncHTTPTransport:
    """httpx's transport (its request conversion and exception mapping) over a :class:`KeepAlivePool`."""
    context = verify if isinstance(verify, ssl.SSLContext) else httpx.create_ssl_context(verify=verify)
    transport = httpx.AsyncHTTPTransport(verify=context, trust_env=False)  # takes the context as it is
    transport._pool = KeepAlivePool(context, max_idle=max_idle, keepalive_expiry=keepalive_expiry)  # type: ignore[assignment]
    return transport
