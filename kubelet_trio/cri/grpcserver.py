"""A grpclib server for services we serve to outside clients (sim-cri, the device plugin registration, the
pod resources API): every peer contained and bounded, unknown methods answered properly, connections
closed on shutdown.

grpclib runs on asyncio (:mod:`kubelet_trio.aiobridge` gives it a thread, shared by every peer of the
server, and by other servers too); its ``Server`` needs these added before a peer can be trusted with it:

- a request that fails in a way nobody expected (it does not decode, or reaches one of our bugs) is
  answered ``INTERNAL`` and counted at the server's boundary; a connection whose bytes the HTTP/2 code
  chokes on is closed and counted;
- a message over :data:`MAX_RECEIVE_MESSAGE_SIZE` is refused from its length prefix, before its body is
  read (``RESOURCE_EXHAUSTED`` with grpc-go's words; grpclib has no limit and would buffer any size);
- a connection that has not sent the HTTP/2 client preface after :data:`PREFACE_TIMEOUT` is dropped;
- a status message is cut to :data:`MAX_STATUS_MESSAGE` characters before it becomes ``grpc-message``:
  hpack's Huffman encoder is quadratic in a header's length, so a handler echoing a 512 KiB field would
  hold the thread for a minute and every other peer with it;
- a method the server does not know gets a real gRPC status; and ``close_connections`` closes the
  clients' connections, which ``Server.close()`` leaves open.

Refusals are counted at the server's boundary and logged within a :class:`~kubelet_trio.boundary.LogBudget`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio
from grpclib import GRPCError, Status
from grpclib.const import Cardinality, Handler
from grpclib.exceptions import StreamTerminatedError
from grpclib.protocol import H2Protocol
from grpclib.server import Server, Stream

from kubelet_trio.boundary import (
    MAX_MESSAGE,
    BoundaryErrors,
    LogBudget,
    contain,
    refused,
    summarise_refusals,
    truncate,
)
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.logs import kv

if TYPE_CHECKING:
    from kubelet_trio.aiobridge import AsyncioThread

__all__ = [
    "MAX_RECEIVE_MESSAGE_SIZE",
    "MAX_STATUS_MESSAGE",
    "PREFACE_TIMEOUT",
    "SHUTDOWN_GRACE",
    "ContainedServer",
    "serve_contained",
]

logger = logging.getLogger(__name__)

SHUTDOWN_GRACE = 5.0  # seconds a server gets to stop, and then to remove its socket
#: bytes of one received message, as grpc-go's default ``MaxRecvMsgSize``
MAX_RECEIVE_MESSAGE_SIZE = 4 * 1024 * 1024
#: Seconds a new connection has to send the HTTP/2 client preface. grpc-go's server gives the whole
#: handshake (TLS included, over a network) ``ConnectionTimeout``, 120 s; our servers listen on local unix
#: sockets, where a client that means to speak sends the 24 bytes at once, so a tenth of that is generous
#: and still frees a silent peer's descriptor soon.
PREFACE_TIMEOUT = 10.0
#: characters of a status message sent as ``grpc-message`` (Go's texts around a truncated echo fit)
MAX_STATUS_MESSAGE = MAX_MESSAGE
_PREFACE_LENGTH = len(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

#: What a request handler may raise for grpclib to handle: a status, the client cancelling, the deadline.
_GRPCLIB_HANDLES = (GRPCError, StreamTerminatedError, TimeoutError)


async def _unimplemented(stream: Stream[Any, Any]) -> None:
    raise GRPCError(Status.UNIMPLEMENTED, "method not implemented")


class _Unimplemented(dict[str, Handler]):
    """grpclib answers a method it does not know with HTTP headers that lack ``content-type``, which
    grpc-go clients report as a malformed response instead of UNIMPLEMENTED (so a client probing a newer
    RPC, as critest does with RuntimeConfig and the metrics calls, cannot tell). Route such methods to a
    handler that answers a proper gRPC status."""

    def get(self, key: str, default: Any = None) -> Handler:
        found = super().get(key)
        if found is not None:
            return found
        return Handler(_unimplemented, Cardinality.UNARY_UNARY, pb.VersionRequest, pb.VersionResponse)


class ContainedServer(Server):
    """grpclib's ``Server.close()`` cancels in-flight requests but leaves client connections open, so a
    client in the same process would wait forever. Track each connection's transport and close it on
    shutdown (what grpc-go's ``Server.Stop`` does); clients then see the connection drop.

    It also contains and bounds each peer (see the module docstring): every handler is wrapped, and so
    are each connection's callbacks. Failures and refusals are counted under ``boundary``;
    ``preface_timeout`` (default :data:`PREFACE_TIMEOUT`, read when the server is made) is in seconds."""

    def __init__(
        self,
        handlers: list[Any],
        boundary_errors: BoundaryErrors | None = None,
        *,
        boundary: str = "grpc",
        max_receive_message_size: int = MAX_RECEIVE_MESSAGE_SIZE,
        preface_timeout: float | None = None,
    ) -> None:
        super().__init__(handlers)
        self.transports: set[asyncio.BaseTransport] = set()
        self.boundary_errors = boundary_errors
        self.boundary = boundary
        self.max_receive_message_size = max_receive_message_size
        self.preface_timeout = PREFACE_TIMEOUT if preface_timeout is None else preface_timeout
        self._log_budget = LogBudget()  # on the server's asyncio thread, on its loop's clock
        self._summary: asyncio.TimerHandle | None = None  # the line for refusals the budget held back
        self._mapping = _Unimplemented(
            {
                name: handler._replace(func=self._contained(name, handler.func))
                for name, handler in self._mapping.items()
            }
        )

    def _contained(
        self, method: str, handle: Callable[[Stream[Any, Any]], Awaitable[None]]
    ) -> Callable[[Stream[Any, Any]], Awaitable[None]]:
        async def contained(stream: Stream[Any, Any]) -> None:
            self._bound_messages(stream, method)
            try:
                await handle(stream)
            except GRPCError as err:
                if err.message is not None:
                    err.message = truncate(err.message, MAX_STATUS_MESSAGE)
                raise
            except _GRPCLIB_HANDLES:
                raise
            except Exception as err:
                with contain(self.boundary, self.boundary_errors, method=method):
                    raise
                message = truncate(f"{type(err).__name__}: {err}", MAX_STATUS_MESSAGE)
                raise GRPCError(Status.INTERNAL, message) from None

        return contained

    def _refuse(self, reason: str, **peer: Any) -> None:
        """On the asyncio thread: count the refusal at the boundary and log it within the budget; the
        ones it holds back are summed up in one line a budget period later."""
        loop = asyncio.get_running_loop()
        budget = self._log_budget
        logged = refused(self.boundary, self.boundary_errors, reason, budget=budget, now=loop.time(), **peer)
        if not logged and self._summary is None:
            self._summary = loop.call_later(budget.period, self._summarise, loop)

    def _summarise(self, loop: asyncio.AbstractEventLoop) -> None:
        self._summary = None
        summarise_refusals(self.boundary, self._log_budget, loop.time())

    def _bound_messages(self, stream: Stream[Any, Any], method: str) -> None:
        """Refuse a message over the limit from its 5-byte prefix, before its body is read: grpclib reads
        a message as two ``recv_data`` calls, the prefix and then as many bytes as it announces."""
        limit = self.max_receive_message_size
        h2_stream = stream._stream
        read = h2_stream.recv_data

        async def recv_data(size: int) -> bytes:
            if size > limit:
                self._refuse("message larger than max", method=method, size=size, max=limit)
                raise GRPCError(
                    Status.RESOURCE_EXHAUSTED, f"grpc: received message larger than max ({size} vs. {limit})"
                )
            return await read(size)

        h2_stream.recv_data = recv_data  # type: ignore[method-assign]

    def _protocol_factory(self) -> H2Protocol:
        protocol = super()._protocol_factory()
        made, lost, received = protocol.connection_made, protocol.connection_lost, protocol.data_received
        mine: list[asyncio.BaseTransport] = []
        preface: list[int] = [0]  # bytes received until the preface is complete
        timers: list[asyncio.TimerHandle] = []

        def no_preface() -> None:
            timers.clear()
            socket = mine[0].get_extra_info("sockname") if mine else None
            self._refuse("no HTTP/2 preface in time", socket=socket, timeout=self.preface_timeout)
            for transport in mine:
                if isinstance(transport, asyncio.WriteTransport):
                    transport.abort()  # close() would wait for a peer that does not read
                else:
                    transport.close()

        def connection_made(transport: asyncio.BaseTransport) -> None:
            mine.append(transport)
            self.transports.add(transport)
            made(transport)
            if not transport.is_closing():
                timers.append(asyncio.get_running_loop().call_later(self.preface_timeout, no_preface))

        def connection_lost(exc: BaseException | None) -> None:
            for timer in timers:
                timer.cancel()
            timers.clear()
            self.transports.difference_update(mine)
            lost(exc)

        def data_received(data: bytes) -> None:
            if timers:  # a wrong preface is h2's protocol error, which closes the connection
                preface[0] += len(data)
                if preface[0] >= _PREFACE_LENGTH:
                    timers.pop().cancel()
            socket = mine[0].get_extra_info("sockname") if mine else None
            with contain(self.boundary, self.boundary_errors, socket=socket) as result:
                received(data)
            if result.error is not None:
                for transport in mine:
                    transport.close()

        protocol.connection_made = connection_made  # type: ignore[method-assign]
        protocol.connection_lost = connection_lost  # type: ignore[method-assign]
        protocol.data_received = data_received  # type: ignore[method-assign]
        return protocol

    def close(self) -> None:
        """grpclib's ``close``; a summary of refusals still due is dropped (the metric has them)."""
        super().close()
        if self._summary is not None:
            self._summary.cancel()
            self._summary = None

    def close_connections(self) -> None:
        for transport in list(self.transports):
            transport.close()
        self.transports.clear()

    def shutdown(self) -> None:
        """Stop accepting and drop the peers' connections (on the server's asyncio thread)."""
        self.close()
        self.close_connections()


async def serve_contained(
    bridge: AsyncioThread,
    handlers: list[Any],
    path: str,
    *,
    what: str,
    boundary_errors: BoundaryErrors | None = None,
    boundary: str = "grpc",
    max_receive_message_size: int = MAX_RECEIVE_MESSAGE_SIZE,
    sock: socket.socket | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``handlers`` on the unix socket ``path`` until cancelled; ``started`` once it accepts. On
    exit the server stops, its peers' connections close and the socket is removed. Failures and refused
    peers are counted under ``boundary``. ``sock``: the socket already listening on ``path``, which the
    server then owns (:func:`kubelet_trio.cri.grpclisten.serve_on_first_peer`)."""
    server = await bridge.run_sync(
        functools.partial(
            ContainedServer,
            handlers,
            boundary_errors,
            boundary=boundary,
            max_receive_message_size=max_receive_message_size,
        )
    )
    if sock is None:
        await bridge.call(server.start, path=path)
        logger.info("Serving gRPC", extra=kv(service=what, socket=path))
    else:
        await bridge.call(server.start, sock=sock)
        logger.debug("gRPC server took over its socket", extra=kv(service=what, socket=path))
    try:
        task_status.started()
        await trio.sleep_forever()
    finally:
        with trio.move_on_after(SHUTDOWN_GRACE, shield=True):
            await bridge.run_sync(server.shutdown)
            await bridge.call(server.wait_closed)
        with trio.move_on_after(SHUTDOWN_GRACE, shield=True):
            await trio.Path(path).unlink(missing_ok=True)
