"""A device plugin in the same process, for tests and harnesses: serves ``v1beta1.DevicePlugin`` on a
socket in the plugin directory, registers with the kubelet, and is scripted from Trio (device health,
``Allocate`` failures); it records what the kubelet asked of it.

Its answer to ``Allocate`` is what the sample device plugin answers: env ``<ENV>=<ids comma-separated>``
and, per device, a read-only mount of ``<plugin dir>/<id>`` at ``/dev-info/<id>``.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import AsyncIterator, Sequence

import attrs
import trio
from grpclib import GRPCError, Status
from grpclib.client import Channel

from kubelet_trio.aiobridge import AsyncioThread, open_asyncio_thread
from kubelet_trio.cm.devicemanager.manager import HEALTHY, KUBELET_SOCKET, SUPPORTED_VERSIONS
from kubelet_trio.cri.gen import v1beta1 as dp
from kubelet_trio.cri.gen.v1beta1 import services
from kubelet_trio.cri.grpcserver import serve_contained

__all__ = ["SimDevicePlugin"]


class _Service(services.DevicePluginBase):
    def __init__(self, plugin: SimDevicePlugin) -> None:
        self.plugin = plugin

    async def get_device_plugin_options(self, message: dp.Empty) -> dp.DevicePluginOptions:
        return self.plugin.options

    async def list_and_watch(self, message: dp.Empty) -> AsyncIterator[dp.ListAndWatchResponse]:
        queue: asyncio.Queue[dp.ListAndWatchResponse] = asyncio.Queue()
        self.plugin._queues.add(queue)
        try:
            yield self.plugin._snapshot()
            while True:
                yield await queue.get()
        finally:
            self.plugin._queues.discard(queue)

    async def get_preferred_allocation(
        self, message: dp.PreferredAllocationRequest
    ) -> dp.PreferredAllocationResponse:
        answers = []
        for request in message.container_requests:
            self.plugin.preferred_requests.append(list(request.available_deviceIDs))
            ids = sorted(request.available_deviceIDs, reverse=self.plugin.prefer_last)
            answers.append(
                dp.ContainerPreferredAllocationResponse(device_i_ds=ids[: request.allocation_size])
            )
        return dp.PreferredAllocationResponse(container_responses=answers)

    async def allocate(self, message: dp.AllocateRequest) -> dp.AllocateResponse:
        if self.plugin.allocate_error is not None:
            raise GRPCError(Status.UNKNOWN, self.plugin.allocate_error)
        answers = []
        for request in message.container_requests:
            ids = list(request.devices_ids)
            self.plugin.allocations.append(ids)
            answers.append(
                dp.ContainerAllocateResponse(
                    envs={self.plugin.env: ",".join(ids)},
                    mounts=[
                        dp.Mount(
                            container_path=f"/dev-info/{i}",
                            host_path=os.path.join(self.plugin.plugin_dir, i),
                            read_only=True,
                        )
                        for i in ids
                    ],
                )
            )
        return dp.AllocateResponse(container_responses=answers)

    async def pre_start_container(self, message: dp.PreStartContainerRequest) -> dp.PreStartContainerResponse:
        self.plugin.pre_starts.append(list(message.devices_ids))
        return dp.PreStartContainerResponse()


@attrs.define(eq=False)
class SimDevicePlugin:
    """``await nursery.start(plugin.run)`` serves and registers it; cancel to make it go away."""

    resource: str
    plugin_dir: str
    devices: dict[str, str]  # id -> "Healthy" / "Unhealthy"
    options: dp.DevicePluginOptions = attrs.Factory(dp.DevicePluginOptions)
    env: str = "WIDGETS"
    version: str = SUPPORTED_VERSIONS[0]
    allocate_error: str | None = None  # set: Allocate fails with this message
    prefer_last: bool = False  # GetPreferredAllocation picks the highest IDs
    allocations: list[list[str]] = attrs.Factory(list)
    preferred_requests: list[list[str]] = attrs.Factory(list)
    pre_starts: list[list[str]] = attrs.Factory(list)
    _queues: set[asyncio.Queue[dp.ListAndWatchResponse]] = attrs.Factory(set)
    _bridge: AsyncioThread | None = None

    @classmethod
    def with_devices(cls, resource: str, plugin_dir: str, count: int, **kwargs: object) -> SimDevicePlugin:
        return cls(resource, plugin_dir, {f"dev-{i}": HEALTHY for i in range(count)}, **kwargs)  # type: ignore[arg-type]

    @property
    def socket(self) -> str:
        return os.path.join(self.plugin_dir, f"sim-{self.resource.replace('/', '-')}.sock")

    def _snapshot(self) -> dp.ListAndWatchResponse:
        return dp.ListAndWatchResponse(devices=[dp.Device(id=i, health=h) for i, h in self.devices.items()])

    async def set_health(self, device_ids: Sequence[str], health: str) -> None:
        """Change devices' health (new IDs appear); the kubelet's stream gets the new list."""
        for device_id in device_ids:
            self.devices[device_id] = health
        if self._bridge is not None:
            snapshot = self._snapshot()

            def publish() -> None:
                for queue in self._queues:
                    queue.put_nowait(snapshot)

            await self._bridge.run_sync(publish)

    async def register(self) -> None:
        """Call the kubelet's ``Register`` (raises ``GRPCError`` when refused)."""
        assert self._bridge is not None
        channel = await self._bridge.run_sync(Channel, path=os.path.join(self.plugin_dir, KUBELET_SOCKET))
        try:
            request = dp.RegisterRequest(
                version=self.version,
                endpoint=os.path.basename(self.socket),
                resource_name=self.resource,
                options=self.options,
            )
            await self._bridge.call(services.RegistrationStub(channel).register, request)
        finally:
            await self._bridge.run_sync(channel.close)

    async def run(
        self, *, register: bool = True, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        async with open_asyncio_thread() as bridge, trio.open_nursery() as nursery:
            self._bridge = bridge
            serve = functools.partial(
                serve_contained, bridge, [_Service(self)], self.socket, what=self.resource
            )
            await nursery.start(serve)
            try:
                if register:
                    await self.register()
                task_status.started()
                await trio.sleep_forever()
            finally:
                self._bridge = None
