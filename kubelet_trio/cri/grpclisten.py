"""A gRPC server socket that loads the gRPC stack when its first peer connects.

The node always listens on its device plugin registration and pod resources sockets, as the Go kubelet
does, yet most nodes never see a plugin or a monitoring agent. grpclib, h2 and an asyncio thread cost
about 4 MB resident once loaded, so the socket is bound and listened on here with the standard library;
the first connection waiting on it starts the asyncio thread and hands the listening socket to a
:class:`~kubelet_trio.cri.grpcserver.ContainedServer`, which accepts that connection and every later one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.logs import kv

if TYPE_CHECKING:
    from kubelet_trio.aiobridge import AsyncioThread, AsyncioThreadSource
    from kubelet_trio.boundary import BoundaryErrors

__all__ = ["BACKLOG", "listen_unix", "serve_on_first_peer"]

logger = logging.getLogger(__name__)

#: connections waiting to be accepted (asyncio's and grpclib's default)
BACKLOG = 100


def listen_unix(path: str) -> socket.socket:
    """A non-blocking stream socket listening on ``path``; a socket file left there (by a previous
    kubelet) is replaced, anything else at the path is an error. Blocking: call through ``run_sync``."""
    os.makedirs(os.path.dirname(path), mode=0o750, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(os.stat(path).st_mode):
            os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


async def serve_on_first_peer(
    threads: AsyncioThreadSource,
    handlers: Callable[[AsyncioThread], list[Any]],
    path: str,
    *,
    what: str,
    boundary_errors: BoundaryErrors | None = None,
    boundary: str = "grpc",
    run_sync: RunSync = run_in_thread,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on the unix socket ``path`` until cancelled (``started`` once it accepts); at the first
    connection, get the asyncio thread from ``threads``, build the services with ``handlers(bridge)``
    and serve them as :func:`~kubelet_trio.cri.grpcserver.serve_contained` does. The socket is removed
    on exit."""
    sock = await run_sync(listen_unix, path)
    try:
        logger.info("Serving gRPC", extra=kv(service=what, socket=path))
        task_status.started()
        await trio.lowlevel.wait_readable(sock)
        from kubelet_trio.cri.grpcserver import serve_contained

        bridge = threads.get()
        services = await bridge.run_sync(handlers, bridge)  # imports the services' modules there
        await serve_contained(
            bridge,
            services,
            path,
            what=what,
            boundary_errors=boundary_errors,
            boundary=boundary,
            sock=sock,
        )
    finally:
        sock.close()  # a no-op once the server has closed it
        with trio.move_on_after(5, shield=True):
            await trio.Path(path).unlink(missing_ok=True)
