"""One registered device plugin, seen from the kubelet (Go: ``plugin/v1beta1/client.go``, ``endpoint.go``).

A plugin serves the ``v1beta1.DevicePlugin`` service on its own socket. grpclib is asyncio-only, so the
channel lives on the device manager's asyncio thread (:mod:`kubelet_trio.aiobridge`) and every call
hops there; failures become :class:`~kubelet_trio.cm.devicemanager.errors.PluginCallError` (the plugin's
own status message truncated: it is echoed into logs and into the errors pods show). The
``ListAndWatch`` stream is consumed on the asyncio side and each answer handed back to Trio in order, so a
slow consumer slows the stream instead of queueing device lists.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast

import attrs
import trio
from grpclib import GRPCError
from grpclib.client import Channel
from grpclib.exceptions import StreamTerminatedError

from kubelet_trio.aiobridge import AsyncioThread
from kubelet_trio.boundary import truncate
from kubelet_trio.cm.devicemanager.errors import PluginCallError
from kubelet_trio.cri.gen import v1beta1 as dp
from kubelet_trio.cri.gen.v1beta1 import services

__all__ = ["Endpoint"]

T = TypeVar("T")


def _rpc_error(err: GRPCError) -> PluginCallError:
    return PluginCallError(f"rpc error: code = {err.status.name} desc = {truncate(err.message or '')}")


def _grpc_timeout() -> float | None:
    """The caller's remaining time, passed to grpclib so the plugin sees the deadline too."""
    remaining = trio.current_effective_deadline() - trio.current_time()
    return None if math.isinf(remaining) else max(remaining, 0.001)


@attrs.define(eq=False)
class Endpoint:
    """A connection to one plugin's socket; create with :meth:`connect`, close with :meth:`aclose`."""

    resource: str
    socket: str
    bridge: AsyncioThread
    _channel: Channel
    _stub: services.DevicePluginStub
    options: dp.DevicePluginOptions = attrs.Factory(dp.DevicePluginOptions)

    @classmethod
    async def connect(cls, bridge: AsyncioThread, resource: str, socket: str) -> Endpoint:
        """Open a channel to ``socket`` and read the plugin's options (the first call dials it)."""
        channel = await bridge.run_sync(Channel, path=socket)
        endpoint = cls(resource, socket, bridge, channel, services.DevicePluginStub(channel))
        try:
            endpoint.options = await endpoint._call(
                "GetDevicePluginOptions", endpoint._stub.get_device_plugin_options, dp.Empty()
            )
        except BaseException:
            with trio.CancelScope(shield=True):
                await endpoint.aclose()
            raise
        return endpoint

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            await self.bridge.run_sync(self._channel.close)

    async def _call(self, op: str, method: Callable[..., Awaitable[T]], request: Any) -> T:
        try:
            result: T = await self.bridge.call(method, request, timeout=_grpc_timeout())
        except GRPCError as err:
            raise _rpc_error(err) from err
        except (OSError, StreamTerminatedError, TimeoutError) as err:
            raise PluginCallError(f"{op} to {self.socket} failed: {err!r}") from err
        return result

    async def allocate(self, device_ids: Sequence[str]) -> dp.ContainerAllocateResponse:
        request = dp.AllocateRequest(
            container_requests=[dp.ContainerAllocateRequest(devices_ids=list(device_ids))]
        )
        response = await self._call("Allocate", self._stub.allocate, request)
        if len(response.container_responses) != 1:
            raise PluginCallError(
                f"device plugin {self.resource} answered Allocate with "
                f"{len(response.container_responses)} container responses, want 1"
            )
        return response.container_responses[0]

    async def preferred_allocation(
        self, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> list[str]:
        request = dp.PreferredAllocationRequest(
            container_requests=[
                dp.ContainerPreferredAllocationRequest(
                    available_deviceIDs=list(available),
                    must_include_deviceIDs=list(must_include),
                    allocation_size=size,
                )
            ]
        )
        response = await self._call("GetPreferredAllocation", self._stub.get_preferred_allocation, request)
        if not response.container_responses:
            return []
        return list(response.container_responses[0].device_i_ds)

    async def pre_start_container(self, device_ids: Sequence[str]) -> None:
        request = dp.PreStartContainerRequest(devices_ids=list(device_ids))
        await self._call("PreStartContainer", self._stub.pre_start_container, request)

    async def list_and_watch(self, on_devices: Callable[[list[dp.Device]], None]) -> None:
        """Follow the plugin's device lists until its stream ends (returns) or fails (raises
        :class:`PluginCallError`); ``on_devices`` runs in Trio for each list, in order."""

        async def deliver(response: dp.ListAndWatchResponse) -> None:
            on_devices(list(response.devices))

        async def consume() -> None:  # on the asyncio thread
            stream = cast(
                "AsyncGenerator[dp.ListAndWatchResponse, None]", self._stub.list_and_watch(dp.Empty())
            )
            async with contextlib.aclosing(stream):
                async for response in stream:
                    await self.bridge.to_trio(deliver, response)

        try:
            await self.bridge.call(consume)
        except GRPCError as err:
            raise _rpc_error(err) from err
        except (OSError, StreamTerminatedError) as err:
            raise PluginCallError(f"ListAndWatch of {self.socket} failed: {err!r}") from err
