"""Real sockets behind simulated servers, so that a client outside the simulator (critest, curl) reaches
a pod's web server on its pod IP and through port-forward.

A simulated container that ``listen``\\ s (the nginx and httpd images do, and the script clause says so)
gets a TCP listener on its pod's address and each port while it runs: the pod IP, which must be an
address the host owns (sim-cri's ``--pod-cidr`` in ``127.0.0.0/8``, all of which is loopback on Linux),
or loopback for a host-network pod; and on the host ports its sandbox maps to them (loopback unless the
mapping names a host IP). Each connection is answered as a web server's default page would
be: ``200`` with a small HTML body, then closed (by the node's HTTP/1.1 server, h11's parsing; a
failure is that connection's, counted at the ``http`` boundary). The listeners close when the
container stops (or its sandbox goes). A port that cannot be bound (taken, a privileged port without
the right to it, an address the host does not own) is logged and left unserved; the container still
runs.

:func:`dial_pod` is port-forward's side: it connects to what the pod serves on a port.
"""

from __future__ import annotations

import errno
import functools
import logging
import math
import operator
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from kubelet_trio.boundary import BoundaryErrors
from kubelet_trio.httpserver.http11 import HttpServer
from kubelet_trio.logs import kv

if TYPE_CHECKING:
    from kubelet_trio.sim.records import ContainerRecord
    from kubelet_trio.sim.runtime import SimRuntime

__all__ = ["PAGE", "PodNetwork", "dial_pod"]

logger = logging.getLogger(__name__)

REQUEST_READ_TIMEOUT = 10.0  # seconds a client gets to send its request head
PAGE = (
    b"<!DOCTYPE html>\n<html><head><title>kubelet-trio sim</title></head>\n"
    b"<body><p>A simulated web server answered.</p></body></html>\n"
)


async def _page(scope: Mapping[str, Any], receive: Any, send: Any) -> None:
    """The answer to any request: the page (its head only for ``HEAD``), and the connection closes."""
    headers = [
        (b"Server", b"kubelet-trio-sim"),
        (b"Content-Type", b"text/html"),
        (b"Content-Length", b"%d" % len(PAGE)),
        (b"Connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else PAGE})


async def dial_pod(sim: SimRuntime, sandbox_id: str, port: int) -> trio.SocketStream:
    """A connection to what the sandbox serves on ``port``; OSError (connection refused) when nothing
    does or the sandbox has no network."""
    address = sim.pod_address(sandbox_id)
    if address is None:
        raise ConnectionRefusedError(errno.ECONNREFUSED, "connection refused")
    sock = trio.socket.socket(trio.socket.AF_INET6 if ":" in address else trio.socket.AF_INET)
    try:
        await sock.connect((address, port))
    except OSError as err:
        sock.close()
        if err.errno is None:
            raise
        raise OSError(err.errno, os.strerror(err.errno).lower()) from None
    except BaseException:
        sock.close()
        raise
    return trio.SocketStream(sock)


@attrs.define(eq=False)
class PodNetwork:
    """Serves every listening container's ports for real while :meth:`run` runs (see the module
    docstring). Failures of one connection are contained and counted at the ``http`` boundary."""

    sim: SimRuntime
    boundary_errors: BoundaryErrors | None = None
    _served: set[str] = attrs.field(init=False, factory=set)  # ids of containers with listeners
    _server: HttpServer = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._server = HttpServer(_page, idle_timeout=REQUEST_READ_TIMEOUT, errors=self.boundary_errors)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                seen = self.sim.starts.value
                for container, addresses in self.sim.serving():
                    if container.id not in self._served:
                        self._served.add(container.id)
                        nursery.start_soon(self._serve_container, container, addresses)
                await self.sim.starts.wait_value(functools.partial(operator.lt, seen))

    async def _serve_container(self, container: ContainerRecord, addresses: list[tuple[str, int]]) -> None:
        try:
            listeners: list[trio.SocketListener] = []
            for address, port in addresses:
                try:
                    listeners += await trio.open_tcp_listeners(port, host=address)
                except OSError as err:
                    logger.warning(
                        "sim: cannot serve a container's port",
                        extra=kv(container=container.id, address=f"{address}:{port}", error=err),
                    )
            if not listeners:
                return
            logger.debug(
                "sim: serving a container's ports",
                extra=kv(container=container.id, addresses=[f"{a}:{p}" for a, p in addresses]),
            )
            async with trio.open_nursery() as nursery:
                for listener in listeners:
                    nursery.start_soon(trio.serve_listeners, self._server.handle, [listener])
                await self._until_stopped(container)
                nursery.cancel_scope.cancel()
        finally:
            self._served.discard(container.id)

    async def _until_stopped(self, container: ContainerRecord) -> None:
        natural = container.natural_exit()
        left = math.inf if natural is None else max(0.0, (natural.at_ns - self.sim.now_ns()) / 1e9)
        with trio.move_on_after(left):
            await container.terminated.wait()
