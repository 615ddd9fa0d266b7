"""The ``v1beta1.Registration`` handler on the asyncio thread: each request hops into Trio to the device
manager's ``register``. Imported at the first plugin's connection (it loads grpclib)."""

from __future__ import annotations

from grpclib import GRPCError, Status

from kubelet_trio.aiobridge import AsyncioThread
from kubelet_trio.boundary import BoundaryErrors, contain, truncate
from kubelet_trio.cm.devicemanager.errors import RegistrationError
from kubelet_trio.cm.devicemanager.server import BOUNDARY, Register
from kubelet_trio.cri.gen import v1beta1 as dp
from kubelet_trio.cri.gen.v1beta1 import services

__all__ = ["Registration"]


class Registration(services.RegistrationBase):
    """A refusal becomes the gRPC error the plugin sees (``UNKNOWN`` with Go's message); any other failure is
    that plugin's alone, contained at the :data:`BOUNDARY` and answered ``INTERNAL``."""

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
