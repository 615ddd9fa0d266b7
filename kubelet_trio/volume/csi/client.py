"""A client of one CSI driver's Node service (Go: ``csi_client.go``).

Each call opens a connection to the driver's socket and closes it afterwards, as Go's client does, so a
driver that restarts is reached again without reconnect logic. gRPC runs on the node's asyncio thread.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import attrs
import trio

from kubelet_trio.aiobridge import AsyncioThread
from kubelet_trio.cri.errors import go_code, go_status_text
from kubelet_trio.cri.gen.csi import v1 as csi

__all__ = ["CSI_TIMEOUT", "CsiClient", "CsiError", "NodeInfo", "go_code"]

T = TypeVar("T")

CSI_TIMEOUT = 120.0  # Go's csiTimeout, per operation


class CsiError(Exception):
    """A CSI call that failed; ``code`` is the gRPC status (Go's name) when the driver answered with one."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


@attrs.frozen
class NodeInfo:
    node_id: str
    max_volumes_per_node: int
    topology: Mapping[str, str]


@attrs.define(eq=False)
class CsiClient:
    bridge: AsyncioThread
    endpoint: str
    timeout: float = CSI_TIMEOUT

    async def _call(self, name: str, request: Any) -> Any:
        from grpclib import GRPCError
        from grpclib.client import Channel

        from kubelet_trio.cri.gen.csi.v1.services import NodeStub

        channel = await self.bridge.run_sync(Channel, path=self.endpoint)
        try:
            method: Callable[..., Awaitable[Any]] = getattr(NodeStub(channel), name)
            try:
                with trio.fail_after(self.timeout + 1):
                    return await self.bridge.call(method, request, timeout=self.timeout)
            except GRPCError as err:
                raise CsiError(
                    go_status_text(err.status.name, err.message or ""), go_code(err.status.name)
                ) from None
            except trio.TooSlowError:
                raise CsiError(
                    "rpc error: code = DeadlineExceeded desc = context deadline exceeded"
                ) from None
            except (OSError, ConnectionError, TimeoutError) as err:
                raise CsiError(
                    f"rpc error: code = Unavailable desc = connection error: {err or type(err).__name__}"
                ) from None
        finally:
            with trio.CancelScope(shield=True):
                await self.bridge.run_sync(channel.close)

    async def node_get_info(self) -> NodeInfo:
        response: csi.NodeGetInfoResponse = await self._call("node_get_info", csi.NodeGetInfoRequest())
        topology = dict(response.accessible_topology.segments) if response.accessible_topology else {}
        return NodeInfo(response.node_id, response.max_volumes_per_node, topology)

    async def node_capabilities(self) -> set[csi.NodeServiceCapabilityRpcType]:
        response: csi.NodeGetCapabilitiesResponse = await self._call(
            "node_get_capabilities", csi.NodeGetCapabilitiesRequest()
        )
        return {c.rpc.type for c in response.capabilities if c.rpc is not None}

    async def node_stage_volume(self, request: csi.NodeStageVolumeRequest) -> None:
        await self._call("node_stage_volume", request)

    async def node_unstage_volume(self, volume_id: str, staging_target_path: str) -> None:
        await self._call(
            "node_unstage_volume",
            csi.NodeUnstageVolumeRequest(volume_id=volume_id, staging_target_path=staging_target_path),
        )

    async def node_publish_volume(self, request: csi.NodePublishVolumeRequest) -> None:
        await self._call("node_publish_volume", request)

    async def node_unpublish_volume(self, volume_id: str, target_path: str) -> None:
        await self._call(
            "node_unpublish_volume",
            csi.NodeUnpublishVolumeRequest(volume_id=volume_id, target_path=target_path),
        )

    async def node_get_volume_stats(self, volume_id: str, volume_path: str) -> csi.NodeGetVolumeStatsResponse:
        response: csi.NodeGetVolumeStatsResponse = await self._call(
            "node_get_volume_stats",
            csi.NodeGetVolumeStatsRequest(volume_id=volume_id, volume_path=volume_path),
        )
        return response
