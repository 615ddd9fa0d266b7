"""The gRPC side of the pod resources API: the ``v1.PodResourcesLister`` handlers on the asyncio thread,
each call answered in Trio by :class:`~kubelet_trio.apis.podresources.server.PodResourcesServer`.
Imported at the first client (it loads grpclib)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from grpclib import GRPCError, Status

from kubelet_trio.aiobridge import AsyncioThread
from kubelet_trio.apis.podresources.ratelimit import ERROR_LIMIT_EXCEEDED
from kubelet_trio.apis.podresources.server import BOUNDARY, PodResourcesError, PodResourcesServer
from kubelet_trio.boundary import BoundaryErrors, contain
from kubelet_trio.cri.gen import v1 as pr
from kubelet_trio.cri.gen.v1 import services

__all__ = ["Lister"]

T = TypeVar("T")


class Lister(services.PodResourcesListerBase):
    """On the asyncio thread: each call runs in Trio, where the kubelet's state lives."""

    def __init__(self, bridge: AsyncioThread, server: PodResourcesServer, errors: BoundaryErrors | None):
        self._bridge = bridge
        self._server = server
        self._errors = errors

    async def _answer(self, method: str, answer: Callable[[], T]) -> T:
        async def in_trio() -> T:
            if not self._server.limiter.allow():
                raise GRPCError(Status.RESOURCE_EXHAUSTED, ERROR_LIMIT_EXCEEDED)
            return answer()

        try:
            return await self._bridge.to_trio(in_trio)
        except GRPCError:
            raise
        except PodResourcesError as err:
            raise GRPCError(Status.UNKNOWN, str(err)) from None
        except Exception as err:
            with contain(BOUNDARY, self._errors, method=method):
                raise
            raise GRPCError(Status.INTERNAL, f"{type(err).__name__}: {err}") from None

    async def list(self, message: pr.ListPodResourcesRequest) -> pr.ListPodResourcesResponse:
        return await self._answer("List", self._server.list)

    async def get_allocatable_resources(
        self, message: pr.AllocatableResourcesRequest
    ) -> pr.AllocatableResourcesResponse:
        return await self._answer("GetAllocatableResources", self._server.get_allocatable_resources)

    async def get(self, message: pr.GetPodResourcesRequest) -> pr.GetPodResourcesResponse:
        return await self._answer("Get", lambda: self._server.get(message.pod_namespace, message.pod_name))
