"""Proxying an upgraded connection to a runtime's streaming URL (Go: ``proxy.UpgradeAwareHandler`` as the
kubelet's ``proxyStream`` uses it).

The client's upgrade request (``Upgrade: SPDY/3.1`` or ``websocket``, with its protocol headers) is sent
to the streaming server at the URL the CRI ``Exec``/``Attach``/``PortForward`` call returned, and from then
on bytes are copied both ways unchanged: the runtime's answer (101 or an error) reaches the client as the
runtime wrote it, and the SPDY or WebSocket framing is never decoded. The copy ends when either side
closes or fails, or when no byte moved either way for the idle timeout
(``streamingConnectionIdleTimeout``); then both connections are closed. Any other failure is that
stream's alone: contained at the ``streaming`` boundary (logged once, counted in ``boundary_errors``).
"""

from __future__ import annotations

import contextlib
import logging
import math
import ssl
import urllib.parse
from collections.abc import Sequence

import attrs
import h11
import trio

from kubelet_trio.boundary import BoundaryErrors, contain
from kubelet_trio.logs import kv

__all__ = ["COPY_SIZE", "StreamProxy", "upgrade_request_head"]

logger = logging.getLogger(__name__)

COPY_SIZE = 32768
#: Request headers not passed to the runtime: the connection's own framing and the caller's credentials.
_DROPPED = frozenset({"host", "authorization", "content-length", "transfer-encoding", "keep-alive", "te"})


def upgrade_request_head(method: str, url: str, headers: Sequence[tuple[str, str]]) -> bytes:
    """The request line and headers sent to the streaming server for the client's upgrade request (written
    by h11, which refuses what is not a valid field: a ``ValueError``)."""
    parts = urllib.parse.urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    fields = [("Host", parts.netloc), *((n, v) for n, v in headers if n.lower() not in _DROPPED)]
    try:
        head = h11.Connection(h11.CLIENT).send(h11.Request(method=method, target=target, headers=fields))
    except h11.LocalProtocolError as err:
        raise ValueError(f"cannot forward the upgrade request: {err}") from None
    return head or b""


async def _dial(url: str, ssl_context: ssl.SSLContext | None) -> trio.abc.Stream:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"unsupported streaming URL {url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if parts.scheme == "https":
        return await trio.open_ssl_over_tcp_stream(
            parts.hostname,
            port,
            ssl_context=ssl_context or ssl.create_default_context(),
            https_compatible=True,
        )
    return await trio.open_tcp_stream(parts.hostname, port)


def _server(url: str) -> str | None:
    """The streaming server's address, for the log (not the path: it holds the one-time token)."""
    try:
        return urllib.parse.urlsplit(url).netloc
    except ValueError:  # the runtime's URL is outside input too
        return None


def _peer(stream: trio.abc.Stream) -> str | None:
    """The client's address, when its stream is a socket (possibly under TLS)."""
    while isinstance(stream, trio.SSLStream):
        stream = stream.transport_stream
    if not isinstance(stream, trio.SocketStream):
        return None
    try:
        address = stream.socket.getpeername()
    except OSError:
        return None
    return f"{address[0]}:{address[1]}" if isinstance(address, tuple) else str(address)


@attrs.define(eq=False)
class StreamProxy:
    """Copies upgraded connections to streaming URLs; at most ``max_streams`` at a time."""

    idle_timeout: float = 4 * 3600.0
    max_streams: int = 100
    #: Streams being copied right now (for tests and metrics).
    active: int = 0
    #: Where streams that failed are counted (None: only logged).
    boundary_errors: BoundaryErrors | None = None

    def full(self) -> bool:
        return self.active >= self.max_streams

    async def proxy(
        self,
        client: trio.abc.Stream,
        url: str,
        method: str,
        headers: Sequence[tuple[str, str]],
        *,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """Forward the upgrade request to ``url`` (``ssl_context`` for https, default: verified) and
        copy both ways until either side is done; closes both connections. A streaming server that
        cannot be reached gets the client a 502 answer."""
        self.active += 1
        backend: trio.abc.Stream | None = None
        try:
            with contain("streaming", self.boundary_errors, peer=_peer(client), backend=_server(url)):
                try:
                    backend = await _dial(url, ssl_context)
                    await backend.send_all(upgrade_request_head(method, url, headers))
                except (OSError, trio.BrokenResourceError, ValueError) as err:
                    logger.warning("cannot reach the streaming server", extra=kv(url=url, error=err))
                    body = f"error dialing backend: {err}\n".encode()
                    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                        await client.send_all(
                            b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\n"
                            + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
                            + body
                        )
                    return
                await self._copy_both_ways(client, backend)
        finally:
            self.active -= 1
            with trio.move_on_after(1, shield=True):
                if backend is not None:
                    await trio.aclose_forcefully(backend)
                await trio.aclose_forcefully(client)

    async def _copy_both_ways(self, client: trio.abc.Stream, backend: trio.abc.Stream) -> None:
        limit = self.idle_timeout if self.idle_timeout > 0 else math.inf  # 0: no idle limit
        with trio.CancelScope(deadline=trio.current_time() + limit) as idle:

            async def copy(source: trio.abc.Stream, sink: trio.abc.Stream) -> None:
                try:
                    while data := await source.receive_some(COPY_SIZE):
                        idle.deadline = trio.current_time() + limit
                        await sink.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError, ssl.SSLError, OSError):
                    pass
                idle.cancel()  # one side is done: so is the stream

            async with trio.open_nursery() as nursery:
                nursery.start_soon(copy, client, backend)
                nursery.start_soon(copy, backend, client)
        if idle.cancelled_caught and trio.current_time() >= idle.deadline:
            logger.info("streaming connection idle, closing", extra=kv(idle_timeout=self.idle_timeout))
