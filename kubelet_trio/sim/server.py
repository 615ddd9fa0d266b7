"""Serve a :class:`SimRuntime` as a real CRI gRPC server on a unix socket, so any CRI client (crictl,
the Go kubelet, our own ``CriRuntime``) can drive it.

grpclib is asyncio-only, so the server runs on an asyncio loop of its own thread
(:mod:`kubelet_trio.aiobridge`); every handler hops back into Trio to call the SimRuntime, and the typed
:mod:`~kubelet_trio.cri.errors` become gRPC statuses again (the inverse of ``CriRuntime``'s translation),
messages preserved.

Each client connection and each request is a peer: a request that fails any other way (it does not decode,
or reaches a bug of the simulator) is answered ``INTERNAL``, and a connection whose bytes the HTTP/2 code
chokes on is closed; both are logged once and counted at the ``grpc`` boundary, and the server goes on.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Any, TypeVar

import trio
import trio_util
from grpclib import GRPCError, Status

from kubelet_trio.aiobridge import AsyncioThread, open_asyncio_thread
from kubelet_trio.boundary import BoundaryErrors
from kubelet_trio.cri import errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.gen.runtime.v1 import services
from kubelet_trio.cri.grpcserver import ContainedServer
from kubelet_trio.logs import kv
from kubelet_trio.sim.podnet import PodNetwork
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.sim.streaming import open_sim_streaming

logger = logging.getLogger(__name__)

SHUTDOWN_GRACE = 5.0  # seconds in-flight requests get to finish when the server stops
OUTPUT_FLUSH_PERIOD = 1.0  # seconds between writes of what looping containers print
#: bytes of one request, as containerd's CRI server (``defaults.DefaultMaxRecvMsgSize``, 16 MiB), which
#: sim-cri stands in for: the Go kubelet's CRI client sends up to that much
MAX_RECEIVE_MESSAGE_SIZE = 16 * 1024 * 1024

R = TypeVar("R")


def grpc_status(err: errors.CriError) -> Status:
    """The status ``err`` is answered with: the inverse of the CRI client's mapping (one table,
    :mod:`kubelet_trio.cri.errors`)."""
    return Status[errors.status_name(err)]


class _Handlers:
    """What both services share: the SimRuntime, and the bridge back into its Trio run."""

    def __init__(self, sim: SimRuntime, bridge: AsyncioThread) -> None:
        self.sim = sim
        self.bridge = bridge

    async def _call(self, fn: Callable[..., Awaitable[R]], *args: Any) -> R:
        """Run a SimRuntime method in Trio (from a grpclib handler); its errors become gRPC statuses."""
        try:
            return await self.bridge.to_trio(fn, *args)
        except errors.CriError as err:
            raise GRPCError(grpc_status(err), err.message) from err


class RuntimeService(_Handlers, services.RuntimeServiceBase):
    """CRI RuntimeService handlers over a SimRuntime."""

    async def version(self, message: pb.VersionRequest) -> pb.VersionResponse:
        return await self._call(self.sim.version, message.version)

    async def status(self, message: pb.StatusRequest) -> pb.StatusResponse:
        return await self._call(self.sim.status, message.verbose)

    async def run_pod_sandbox(self, message: pb.RunPodSandboxRequest) -> pb.RunPodSandboxResponse:
        config = message.config or pb.PodSandboxConfig()
        sandbox_id = await self._call(self.sim.run_pod_sandbox, config, message.runtime_handler)
        return pb.RunPodSandboxResponse(pod_sandbox_id=sandbox_id)

    async def stop_pod_sandbox(self, message: pb.StopPodSandboxRequest) -> pb.StopPodSandboxResponse:
        await self._call(self.sim.stop_pod_sandbox, message.pod_sandbox_id)
        return pb.StopPodSandboxResponse()

    async def remove_pod_sandbox(self, message: pb.RemovePodSandboxRequest) -> pb.RemovePodSandboxResponse:
        await self._call(self.sim.remove_pod_sandbox, message.pod_sandbox_id)
        return pb.RemovePodSandboxResponse()

    async def pod_sandbox_status(self, message: pb.PodSandboxStatusRequest) -> pb.PodSandboxStatusResponse:
        return await self._call(self.sim.pod_sandbox_status, message.pod_sandbox_id, message.verbose)

    async def list_pod_sandbox(self, message: pb.ListPodSandboxRequest) -> pb.ListPodSandboxResponse:
        return pb.ListPodSandboxResponse(items=await self._call(self.sim.list_pod_sandbox, message.filter))

    async def create_container(self, message: pb.CreateContainerRequest) -> pb.CreateContainerResponse:
        container_id = await self._call(
            self.sim.create_container,
            message.pod_sandbox_id,
            message.config or pb.ContainerConfig(),
            message.sandbox_config or pb.PodSandboxConfig(),
        )
        return pb.CreateContainerResponse(container_id=container_id)

    async def start_container(self, message: pb.StartContainerRequest) -> pb.StartContainerResponse:
        await self._call(self.sim.start_container, message.container_id)
        return pb.StartContainerResponse()

    async def stop_container(self, message: pb.StopContainerRequest) -> pb.StopContainerResponse:
        await self._call(self.sim.stop_container, message.container_id, message.timeout)
        return pb.StopContainerResponse()

    async def remove_container(self, message: pb.RemoveContainerRequest) -> pb.RemoveContainerResponse:
        await self._call(self.sim.remove_container, message.container_id)
        return pb.RemoveContainerResponse()

    async def list_containers(self, message: pb.ListContainersRequest) -> pb.ListContainersResponse:
        return pb.ListContainersResponse(
            containers=await self._call(self.sim.list_containers, message.filter)
        )

    async def container_status(self, message: pb.ContainerStatusRequest) -> pb.ContainerStatusResponse:
        return await self._call(self.sim.container_status, message.container_id, message.verbose)

    async def reopen_container_log(
        self, message: pb.ReopenContainerLogRequest
    ) -> pb.ReopenContainerLogResponse:
        await self._call(self.sim.reopen_container_log, message.container_id)
        return pb.ReopenContainerLogResponse()

    async def exec_sync(self, message: pb.ExecSyncRequest) -> pb.ExecSyncResponse:
        return await self._call(self.sim.exec_sync, message.container_id, list(message.cmd), message.timeout)

    async def exec(self, message: pb.ExecRequest) -> pb.ExecResponse:
        return pb.ExecResponse(url=await self._call(self.sim.exec, message))

    async def attach(self, message: pb.AttachRequest) -> pb.AttachResponse:
        return pb.AttachResponse(url=await self._call(self.sim.attach, message))

    async def port_forward(self, message: pb.PortForwardRequest) -> pb.PortForwardResponse:
        return pb.PortForwardResponse(url=await self._call(self.sim.port_forward, message))

    async def container_stats(self, message: pb.ContainerStatsRequest) -> pb.ContainerStatsResponse:
        return pb.ContainerStatsResponse(
            stats=await self._call(self.sim.container_stats, message.container_id)
        )

    async def list_container_stats(
        self, message: pb.ListContainerStatsRequest
    ) -> pb.ListContainerStatsResponse:
        return pb.ListContainerStatsResponse(
            stats=await self._call(self.sim.list_container_stats, message.filter)
        )

    async def list_pod_sandbox_stats(
        self, message: pb.ListPodSandboxStatsRequest
    ) -> pb.ListPodSandboxStatsResponse:
        return pb.ListPodSandboxStatsResponse(
            stats=await self._call(self.sim.list_pod_sandbox_stats, message.filter)
        )

    async def update_container_resources(
        self, message: pb.UpdateContainerResourcesRequest
    ) -> pb.UpdateContainerResourcesResponse:
        await self._call(self.sim.update_container_resources, message.container_id, message.linux)
        return pb.UpdateContainerResourcesResponse()

    async def update_runtime_config(
        self, message: pb.UpdateRuntimeConfigRequest
    ) -> pb.UpdateRuntimeConfigResponse:
        config = message.runtime_config or pb.RuntimeConfig()
        await self._call(self.sim.update_runtime_config, config)
        return pb.UpdateRuntimeConfigResponse()


class ImageService(_Handlers, services.ImageServiceBase):
    """CRI ImageService handlers over a SimRuntime."""

    async def list_images(self, message: pb.ListImagesRequest) -> pb.ListImagesResponse:
        return pb.ListImagesResponse(images=await self._call(self.sim.list_images, message.filter))

    async def image_status(self, message: pb.ImageStatusRequest) -> pb.ImageStatusResponse:
        image = await self._call(self.sim.image_status, message.image or pb.ImageSpec(), message.verbose)
        return pb.ImageStatusResponse(image=image)

    async def pull_image(self, message: pb.PullImageRequest) -> pb.PullImageResponse:
        image_ref = await self._call(
            self.sim.pull_image, message.image or pb.ImageSpec(), message.auth, message.sandbox_config
        )
        return pb.PullImageResponse(image_ref=image_ref)

    async def remove_image(self, message: pb.RemoveImageRequest) -> pb.RemoveImageResponse:
        await self._call(self.sim.remove_image, message.image or pb.ImageSpec())
        return pb.RemoveImageResponse()

    async def image_fs_info(self, message: pb.ImageFsInfoRequest) -> pb.ImageFsInfoResponse:
        return await self._call(self.sim.image_fs_info)


async def serve_sim_cri(
    sim: SimRuntime,
    socket_path: str,
    *,
    boundary_errors: BoundaryErrors | None = None,
    pod_network: bool = False,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``sim`` on ``socket_path`` until cancelled; ``started`` once the socket accepts connections.
    Its streaming server (Exec/Attach/PortForward URLs) runs on 127.0.0.1 alongside.

    On cancellation the server stops accepting, cancels in-flight requests, drops client connections
    (their calls fail as "connection lost"), waits up to ``SHUTDOWN_GRACE`` for handlers to finish and
    removes the socket file. The socket's directory is created if needed; a stale socket is replaced.
    Failures contained per request, connection or streaming session are counted in ``boundary_errors``.

    ``pod_network``: containers' listening ports are served for real on their pod addresses, and
    port-forward connects to them (:mod:`kubelet_trio.sim.podnet`); the pod CIDR must then be addresses
    this host owns.
    """
    async with (
        open_sim_streaming(sim, boundary_errors=boundary_errors, pod_network=pod_network),
        open_asyncio_thread() as bridge,
        trio.open_nursery() as nursery,
    ):
        if pod_network:
            await nursery.start(PodNetwork(sim, boundary_errors).run)
        await trio.Path(socket_path).parent.mkdir(parents=True, exist_ok=True)
        server = await bridge.run_sync(
            functools.partial(
                ContainedServer,
                [RuntimeService(sim, bridge), ImageService(sim, bridge)],
                boundary_errors,
                max_receive_message_size=MAX_RECEIVE_MESSAGE_SIZE,
            )
        )
        await bridge.call(server.start, path=socket_path)
        try:
            logger.debug("sim-cri: listening", extra=kv(socket=socket_path))
            task_status.started()
            async with aclosing(trio_util.periodic(OUTPUT_FLUSH_PERIOD)) as ticks:
                async for _ in ticks:
                    await sim.flush_output()
        finally:
            with trio.move_on_after(SHUTDOWN_GRACE, shield=True):
                await bridge.run_sync(server.close)
                await bridge.run_sync(server.close_connections)
                await bridge.call(server.wait_closed)
            with trio.move_on_after(SHUTDOWN_GRACE, shield=True):
                await trio.Path(socket_path).unlink(missing_ok=True)
            logger.debug("sim-cri: stopped", extra=kv(socket=socket_path))
