"""A CSI driver in the same process, for tests and harnesses (an operator's PVC handling without storage):
it serves the CSI Node service on a socket and registers through the plugin registry like a driver with
its node-driver-registrar sidecar, and it is scripted from Trio: failures per RPC (``fail_next``), slow
RPCs (``delay``, on the Trio clock) and going away (cancel :meth:`SimCsiDriver.run`, or
:meth:`SimCsiDriver.disappear` to drop only the registration). It records every call.

Staging and publishing create the target directories (no mounts), so the kubelet's bookkeeping, events and
pod lifecycle are exercised without a kernel.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping

import attrs
import trio
from grpclib import GRPCError, Status

from kubelet_trio.aiobridge import AsyncioThread, open_asyncio_thread
from kubelet_trio.cri.gen import pluginregistration as reg
from kubelet_trio.cri.gen.csi import v1 as csi
from kubelet_trio.cri.gen.csi.v1.services import NodeBase
from kubelet_trio.cri.gen.pluginregistration.services import RegistrationBase
from kubelet_trio.cri.grpcserver import SHUTDOWN_GRACE, ContainedServer, serve_contained
from kubelet_trio.pluginmanager import CSI_PLUGIN

__all__ = ["SimCsiDriver"]

_RPC = csi.NodeServiceCapabilityRpcType


class _Node(NodeBase):
    def __init__(self, driver: SimCsiDriver) -> None:
        self.driver = driver

    async def node_get_info(self, message: csi.NodeGetInfoRequest) -> csi.NodeGetInfoResponse:
        await self.driver._enter("NodeGetInfo", "")
        return csi.NodeGetInfoResponse(
            node_id=self.driver.node_id,
            max_volumes_per_node=self.driver.max_volumes,
            accessible_topology=csi.Topology(segments=dict(self.driver.topology))
            if self.driver.topology
            else None,
        )

    async def node_get_capabilities(
        self, message: csi.NodeGetCapabilitiesRequest
    ) -> csi.NodeGetCapabilitiesResponse:
        await self.driver._enter("NodeGetCapabilities", "")
        rpcs = [_RPC.STAGE_UNSTAGE_VOLUME] if self.driver.stage_unstage else []
        rpcs += [_RPC.GET_VOLUME_STATS] if self.driver.volume_stats else []
        return csi.NodeGetCapabilitiesResponse(
            capabilities=[csi.NodeServiceCapability(rpc=csi.NodeServiceCapabilityRpc(type=t)) for t in rpcs]
        )

    async def node_stage_volume(self, message: csi.NodeStageVolumeRequest) -> csi.NodeStageVolumeResponse:
        await self.driver._enter("NodeStageVolume", message.volume_id)
        os.makedirs(message.staging_target_path, exist_ok=True)
        self.driver.staged[message.volume_id] = message.staging_target_path
        return csi.NodeStageVolumeResponse()

    async def node_unstage_volume(
        self, message: csi.NodeUnstageVolumeRequest
    ) -> csi.NodeUnstageVolumeResponse:
        await self.driver._enter("NodeUnstageVolume", message.volume_id)
        self.driver.staged.pop(message.volume_id, None)
        return csi.NodeUnstageVolumeResponse()

    async def node_publish_volume(
        self, message: csi.NodePublishVolumeRequest
    ) -> csi.NodePublishVolumeResponse:
        await self.driver._enter("NodePublishVolume", message.volume_id)
        if message.staging_target_path and message.volume_id not in self.driver.staged:
            raise GRPCError(Status.FAILED_PRECONDITION, f"volume {message.volume_id} is not staged")
        os.makedirs(message.target_path, exist_ok=True)
        self.driver.published[message.target_path] = message.volume_id
        self.driver.contexts[message.target_path] = dict(message.volume_context)
        return csi.NodePublishVolumeResponse()

    async def node_unpublish_volume(
        self, message: csi.NodeUnpublishVolumeRequest
    ) -> csi.NodeUnpublishVolumeResponse:
        await self.driver._enter("NodeUnpublishVolume", message.volume_id)
        self.driver.published.pop(message.target_path, None)
        self.driver.contexts.pop(message.target_path, None)
        return csi.NodeUnpublishVolumeResponse()

    async def node_get_volume_stats(
        self, message: csi.NodeGetVolumeStatsRequest
    ) -> csi.NodeGetVolumeStatsResponse:
        await self.driver._enter("NodeGetVolumeStats", message.volume_id)
        total, used = self.driver.capacity
        return csi.NodeGetVolumeStatsResponse(
            usage=[
                csi.VolumeUsage(
                    total=total, used=used, available=total - used, unit=csi.VolumeUsageUnit.BYTES
                )
            ]
        )


class _Registration(RegistrationBase):
    def __init__(self, driver: SimCsiDriver) -> None:
        self.driver = driver

    async def get_info(self, message: reg.InfoRequest) -> reg.PluginInfo:
        return reg.PluginInfo(
            type=CSI_PLUGIN, name=self.driver.name, endpoint=self.driver.socket, supported_versions=["1.0.0"]
        )

    async def notify_registration_status(
        self, message: reg.RegistrationStatus
    ) -> reg.RegistrationStatusResponse:
        self.driver.registrations.append((message.plugin_registered, message.error))
        return reg.RegistrationStatusResponse()


@attrs.define(eq=False)
class SimCsiDriver:
    """``await nursery.start(driver.run)`` serves it and puts its registration socket in ``registry_dir``."""

    name: str
    registry_dir: str  # the kubelet's <root-dir>/plugins_registry
    socket_dir: str  # where its Node service socket lives
    node_id: str = "sim-node"
    topology: Mapping[str, str] = attrs.Factory(dict)
    stage_unstage: bool = True
    volume_stats: bool = True  # GET_VOLUME_STATS: NodeGetVolumeStats answers from ``capacity``
    max_volumes: int = 0
    capacity: tuple[int, int] = (1 << 30, 0)  # (total, used) bytes reported by NodeGetVolumeStats
    calls: list[tuple[str, str]] = attrs.Factory(list)  # (rpc, volume id) in arrival order
    registrations: list[tuple[bool, str]] = attrs.Factory(list)  # what the kubelet notified
    staged: dict[str, str] = attrs.Factory(dict)  # volume id -> staging path
    published: dict[str, str] = attrs.Factory(dict)  # target path -> volume id
    contexts: dict[str, dict[str, str]] = attrs.Factory(dict)  # target path -> volume context
    _failures: dict[str, list[tuple[Status, str]]] = attrs.Factory(dict)
    _delays: dict[str, float] = attrs.Factory(dict)
    _bridge: AsyncioThread | None = None
    _registration: ContainedServer | None = None

    @property
    def socket(self) -> str:
        return os.path.join(self.socket_dir, "csi.sock")

    @property
    def registration_socket(self) -> str:
        return os.path.join(self.registry_dir, f"{self.name}-reg.sock")

    def fail_next(self, rpc: str, message: str, code: Status = Status.INTERNAL, times: int = 1) -> None:
        """The next ``times`` calls of ``rpc`` (``"NodePublishVolume"``, ...) fail with ``code``."""
        self._failures.setdefault(rpc, []).extend([(code, message)] * times)

    def delay(self, rpc: str, seconds: float) -> None:
        """Every call of ``rpc`` takes ``seconds`` of Trio time first (0: no delay)."""
        self._delays[rpc] = seconds

    async def _enter(self, rpc: str, volume_id: str) -> None:  # on the asyncio thread
        self.calls.append((rpc, volume_id))
        delay = self._delays.get(rpc, 0.0)
        if delay and self._bridge is not None:
            await self._bridge.to_trio(trio.sleep, delay)
        failures = self._failures.get(rpc)
        if failures:
            code, message = failures.pop(0)
            raise GRPCError(code, message)

    async def disappear(self) -> None:
        """Remove the registration socket (the kubelet deregisters the driver); the Node service stays."""
        if self._bridge is not None and self._registration is not None:
            await self._bridge.run_sync(self._registration.shutdown)
            await self._bridge.call(self._registration.wait_closed)
            self._registration = None
        await trio.Path(self.registration_socket).unlink(missing_ok=True)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await trio.Path(self.socket_dir).mkdir(parents=True, exist_ok=True)
        await trio.Path(self.registry_dir).mkdir(parents=True, exist_ok=True)
        async with open_asyncio_thread() as bridge, trio.open_nursery() as nursery:
            self._bridge = bridge
            node = [_Node(self)]
            await nursery.start(functools.partial(serve_contained, bridge, node, self.socket, what=self.name))
            self._registration = await bridge.run_sync(ContainedServer, [_Registration(self)])
            await bridge.call(self._registration.start, path=self.registration_socket)
            try:
                task_status.started()
                await trio.sleep_forever()
            finally:
                with trio.move_on_after(SHUTDOWN_GRACE, shield=True):
                    await self.disappear()
                self._bridge = None
