"""The in-process fake API server, reached as a node reaches kube-apiserver: the API client's own HTTP/1.1
pool on a kernel socket, served by the node's own HTTP/1.1 server; only the dial is replaced.

:meth:`Loopback.connect` is a ``connect`` for :func:`~kubelet_trio.client.open_api_client`: each
connection is a Unix socket pair whose far end :class:`~kubelet_trio.httpserver.http11.HttpServer` serves
with the app, in a task of the nursery the loopback owns. A socket pair's bytes are readable as soon as
they are written, so both ends stay on Trio's clock and MockClock tests work (no port, no listener).

Fault switch: :meth:`Loopback.go_down` refuses new connections (``ECONNREFUSED``) and ends every open one
(the client sees its answer or watch cut short, or an idle connection closed); :meth:`come_back`
reverses it.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import AsyncIterator
from typing import Any

import attrs
import trio

from kubelet_trio.httpserver.http11 import HttpServer


@attrs.define(eq=False)
class Loopback:
    server: HttpServer
    nursery: trio.Nursery
    available: bool = True
    _served: set[trio.CancelScope] = attrs.Factory(set)

    async def connect(self, host: str, port: int) -> trio.abc.Stream:
        await trio.lowlevel.checkpoint()
        if not self.available:
            raise ConnectionRefusedError(
                errno.ECONNREFUSED, "connection refused: the fake API server is down"
            )
        ours, theirs = trio.socket.socketpair()
        self.nursery.start_soon(self._serve, trio.SocketStream(theirs))
        return trio.SocketStream(ours)

    async def _serve(self, stream: trio.SocketStream) -> None:
        with trio.CancelScope() as scope:  # the server closes the stream however the task ends
            self._served.add(scope)
            try:
                await self.server.handle(stream)
            finally:
                self._served.discard(scope)

    def go_down(self) -> None:
        self.available = False
        for scope in self._served:
            scope.cancel()

    def come_back(self) -> None:
        self.available = True


@contextlib.asynccontextmanager
async def open_loopback(app: Any) -> AsyncIterator[Loopback]:
    """Connections to ``app`` for API clients; their server tasks live until the block exits."""
    try:
        async with trio.open_nursery() as nursery:
            loopback = Loopback(HttpServer(app), nursery)
            try:
                yield loopback
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:  # the test's own failure, unwrapped for readable reports
        if len(group.exceptions) == 1 and not isinstance(group.exceptions[0], BaseExceptionGroup):
            raise group.exceptions[0] from None
        raise
