"""A grpclib server for services we serve to outside clients (sim-cri, the device plugin registration):
every peer contained, unknown methods answered properly, connections closed on shutdown.

grpclib runs on asyncio (:mod:`kubelet_trio.aiobridge` gives it a thread); its ``Server`` needs three
things added before a peer can be trusted with it: a request that fails in a way nobody expected (it does
not decode, or reaches one of our bugs) is answered ``INTERNAL`` and counted at the ``grpc`` boundary; a
connection whose bytes the HTTP/2 code chokes on is closed and counted; a method the server does not
know gets a real gRPC status; and ``close_connections`` closes the clients' connections, which
``Server.close()`` leaves open.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio
from grpclib import GRPCError, Status
from grpclib.const import Cardinality, Handler
from grpclib.exceptions import StreamTerminatedError
from grpclib.protocol import H2Protocol
from grpclib.server import Server, Stream

from kubelet_trio.boundary import BoundaryErrors, contain
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.logs import kv

if TYPE_CHECKING:
    from kubelet_trio.aiobridge import AsyncioThread

__all__ = ["SHUTDOWN_GRACE", "ContainedServer", "serve_contained"]

logger = logging.getLogger(__name__)

SHUTDOWN_GRACE = 5.0  # seconds a server gets to stop, and then to remove its socket

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

    It also contains each peer (see the module docstring): every handler is wrapped, and so is each
    connection's ``data_received``."""

    def __init__(self, handlers: list[Any], boundary_errors: BoundaryErrors | None = None) -> None:
        super().__init__(handlers)
        self.transports: set[asyncio.BaseTransport] = set()
        self.boundary_errors = boundary_errors
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
            try:
                await handle(stream)
            except _GRPCLIB_HANDLES:
                raise
            except Exception as err:
                with contain("grpc", self.boundary_errors, method=method):
                    raise
                raise GRPCError(Status.INTERNAL, f"{type(err).__name__}: {err}") from None

        return contained

    def _protocol_factory(self) -> H2Protocol:
        protocol = super()._protocol_factory()
        made, lost, received = protocol.connection_made, protocol.connection_lost, protocol.data_received
        mine: list[asyncio.BaseTransport] = []

        def connection_made(transport: asyncio.BaseTransport) -> None:
            mine.append(transport)
            self.transports.add(transport)
            made(transport)

        def connection_lost(exc: BaseException | None) -> None:
            self.transports.difference_update(mine)
            lost(exc)

        def data_received(data: bytes) -> None:
            socket = mine[0].get_extra_info("sockname") if mine else None
            with contain("grpc", self.boundary_errors, socket=socket) as result:
                received(data)
            if result.error is not None:
                for transport in mine:
                    transport.close()

        protocol.connection_made = connection_made  # type: ignore[method-assign]
        protocol.connection_lost = connection_lost  # type: ignore[method-assign]
        protocol.data_received = data_received  # type: ignore[method-assign]
        return protocol

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
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``handlers`` on the unix socket ``path`` until cancelled; ``started`` once it accepts. On
    exit the server stops, its peers' connections close and the socket is removed."""
    server = await bridge.run_sync(ContainedServer, handlers, boundary_errors)
    await bridge.call(server.start, path=path)
    try:
        logger.info("Serving gRPC", extra=kv(service=what, socket=path))
        task_status.started()
        await trio.sleep_forever()
    finally:
        with trio.move_on_after(SHUTDOWN_GRACE, shield=True):
            await bridge.run_sync(server.shutdown)
            await bridge.call(server.wait_closed)
        with trio.move_on_after(SHUTDOWN_GRACE, shield=True):
            await trio.Path(path).unlink(missing_ok=True)
