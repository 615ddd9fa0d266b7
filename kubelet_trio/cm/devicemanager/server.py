"""The ``v1beta1.Registration`` service on ``<root-dir>/device-plugins/kubelet.sock`` (Go:
``plugin/v1beta1/server.go``), served by grpclib on the device manager's asyncio thread.

Each request hops back into Trio to the manager's ``register``; a refusal becomes the gRPC error the
plugin sees (``UNKNOWN`` with Go's message). A request that fails any other way is that plugin's alone:
contained at the :data:`BOUNDARY` and answered ``INTERNAL``. The server bounds every peer (message size,
handshake time, echoed text: :mod:`kubelet_trio.cri.grpcserver`), so that no plugin can stall the thread
the other plugins' streams and the pod resources API share. Stopping closes the plugins' connections too,
which grpclib's ``Server.close`` leaves open.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio
from grpclib import GRPCError, Status

from kubelet_trio.aiobridge import AsyncioThread
from kubelet_trio.boundary import BoundaryErrors, contain, truncate
from kubelet_trio.cm.devicemanager.errors import RegistrationError
from kubelet_trio.cri.gen import v1beta1 as dp
from kubelet_trio.cri.gen.v1beta1 import services
from kubelet_trio.cri.grpcserver import serve_contained

__all__ = ["BOUNDARY", "serve_registration"]

BOUNDARY = "device-plugin-registration"  # the label of its failures and refused peers

Register = Callable[[dp.RegisterRequest], Awaitable[None]]


class _Registration(services.RegistrationBase):
    def __init__(self, bridge: AsyncioThread, register: Register, errors: BoundaryErrors | None) -> None:
        self._bridge = bridge
        self._register = register
        self._errors = errors

    async def register(self, message: dp.RegisterRequest) -> dp.Empty:
        try:
            await self._bridge.to_trio(self._register, message)
        except RegistrationError as err:
            raise GRPCError(Status.UNKNOWN, str(err)) from None
        except Exception as err:
            with contain(BOUNDARY, self._errors, method="Register", resource=truncate(message.resource_name)):
                raise
            raise GRPCError(Status.INTERNAL, f"{type(err).__name__}: {err}") from None
        return dp.Empty()


async def serve_registration(
    bridge: AsyncioThread,
    socket_path: str,
    register: Register,
    *,
    boundary_errors: BoundaryErrors | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled; ``started`` once the socket accepts. The socket is removed on exit."""
    await serve_contained(
        bridge,
        [_Registration(bridge, register, boundary_errors)],
        socket_path,
        what="device plugin registration",
        boundary_errors=boundary_errors,
        boundary=BOUNDARY,
        task_status=task_status,
    )
