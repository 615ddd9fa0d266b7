"""The ``v1beta1.Registration`` service on ``<root-dir>/device-plugins/kubelet.sock`` (Go:
``plugin/v1beta1/server.go``), served by grpclib on the device manager's asyncio thread, which starts (and
the gRPC stack loads) when the first plugin connects.

Each request hops back into Trio to the manager's ``register``; a refusal becomes the gRPC error the
plugin sees (``UNKNOWN`` with Go's message). A request that fails any other way is that plugin's alone:
contained at the :data:`BOUNDARY` and answered ``INTERNAL``. The server bounds every peer (message size,
handshake time, echoed text: :mod:`kubelet_trio.cri.grpcserver`), so that no plugin can stall the thread
the other plugins' streams and the pod resources API share. Stopping closes the plugins' connections too,
which grpclib's ``Server.close`` leaves open.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio

from kubelet_trio.boundary import BoundaryErrors
from kubelet_trio.cri.gen import v1beta1 as dp
from kubelet_trio.cri.grpclisten import serve_on_first_peer

if TYPE_CHECKING:
    from kubelet_trio.aiobridge import AsyncioThread, AsyncioThreadSource

__all__ = ["BOUNDARY", "serve_registration"]

BOUNDARY = "device-plugin-registration"  # the label of its failures and refused peers

Register = Callable[[dp.RegisterRequest], Awaitable[None]]


def _registration(bridge: AsyncioThread, register: Register, errors: BoundaryErrors | None) -> Any:
    from kubelet_trio.cm.devicemanager.registration import Registration  # loads grpclib

    return Registration(bridge, register, errors)


async def serve_registration(
    threads: AsyncioThreadSource,
    socket_path: str,
    register: Register,
    *,
    boundary_errors: BoundaryErrors | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled; ``started`` once the socket accepts. The socket is removed on exit."""
    await serve_on_first_peer(
        threads,
        lambda bridge: [_registration(bridge, register, boundary_errors)],
        socket_path,
        what="device plugin registration",
        boundary_errors=boundary_errors,
        boundary=BOUNDARY,
        task_status=task_status,
    )
