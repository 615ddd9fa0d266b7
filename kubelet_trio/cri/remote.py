"""``CriRuntime``: the CRI over a unix socket, as gRPC unary calls on a Trio-native HTTP/2 channel.

A session owns one :class:`~kubelet_trio.cri.h2channel.H2Channel` per distinct socket (runtime and image
service usually share one). Each call encodes its request, sends it on a stream of the channel's
connection and decodes the answer, both with :mod:`kubelet_trio.cri.wire`: no asyncio, no thread.
The channel dials lazily and redials after a lost connection, which is what lets a session outlive a
runtime restart: calls fail with ``UnavailableError`` while the runtime is down.

Deadlines: the authoritative timeout is the Trio scope around each call; the channel sends the same
remaining time as ``grpc-timeout`` so the runtime sees it.

Failures: gRPC statuses and transport errors become the typed :mod:`~kubelet_trio.cri.errors`
(:func:`~kubelet_trio.cri.errors.from_status`: one table, which sim-cri reads the other way). Anything
else a call raises was made of the runtime's bytes (an answer that does not decode, HTTP/2 or gRPC framing
the channel refused): it is that call's alone, contained at the ``grpc`` boundary (logged once, counted)
and raised as a :class:`~kubelet_trio.cri.errors.CriCallError` with code ``INTERNAL`` naming the
endpoint, as grpc-go fails a call whose answer does not unmarshal, so callers retry it like any failed
call.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

import attrs
import betterproto2
import trio
from grpclib import GRPCError
from grpclib.exceptions import StreamTerminatedError

from kubelet_trio import defaults
from kubelet_trio.boundary import BoundaryErrors, contain
from kubelet_trio.cri import errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.h2channel import H2Channel, open_h2_channel
from kubelet_trio.cri.runtime import CRI_API_VERSION
from kubelet_trio.cri.wire import CriCodec, ItemMemo, MalformedAnswer, encode

logger = logging.getLogger(__name__)

DEFAULT_REQUEST_TIMEOUT = (
    defaults.RUNTIME_REQUEST_TIMEOUT
)  # the Go kubelet's --runtime-request-timeout default (2 min)

M = TypeVar("M", bound=betterproto2.Message)

RUNTIME_SERVICE = "/runtime.v1.RuntimeService/"
IMAGE_SERVICE = "/runtime.v1.ImageService/"
_CODEC = CriCodec()  # decodes with kubelet_trio.cri.wire; what does not decode is a MalformedAnswer


def socket_path(endpoint: str) -> str:
    """``unix:///run/x.sock`` (or a bare absolute path) → ``/run/x.sock``."""
    if endpoint.startswith("unix://"):
        path = endpoint.removeprefix("unix://")
    elif endpoint.startswith("/"):
        path = endpoint
    else:
        raise ValueError(f"unsupported CRI endpoint {endpoint!r}: expected unix:///path/to/socket")
    if not path.startswith("/"):
        raise ValueError(f"CRI endpoint {endpoint!r} must name an absolute socket path")
    return path


def translate_error(op: str, exc: BaseException, endpoint: str = "") -> errors.CriError | None:
    """Map a grpclib/transport failure to the project's typed error (None: not a CRI failure)."""
    if isinstance(exc, GRPCError):
        return errors.from_status(op, exc.status.name, exc.message or "")
    if isinstance(exc, TimeoutError):  # asyncio.TimeoutError is TimeoutError on 3.11+
        return errors.DeadlineExceededError(op, "deadline exceeded (client side)")
    if isinstance(exc, (OSError, StreamTerminatedError, ConnectionError)):
        where = f" at {endpoint}" if endpoint else ""
        return errors.UnavailableError(op, f"runtime unreachable{where}: {exc!r}")
    return None


@attrs.define(eq=False)
class CriRuntime:
    """The ``Runtime`` protocol over a CRI socket. Create it with :func:`open_cri_runtime`."""

    endpoint: str
    request_timeout: float
    #: The channels of the RuntimeService and the ImageService (one object when they share a socket).
    runtime_channel: H2Channel
    image_channel: H2Channel
    #: Where failures contained per call are counted (the node's metrics; None: only logged).
    boundary_errors: BoundaryErrors | None = None
    #: the listed sandboxes and containers already decoded, by their bytes (see :class:`ItemMemo`)
    _sandboxes: ItemMemo = attrs.field(init=False, factory=ItemMemo)
    _containers: ItemMemo = attrs.field(init=False, factory=ItemMemo)

    async def _call(
        self,
        op: str,
        channel: H2Channel,
        path: str,
        request: betterproto2.Message,
        answer: type[M],
        *,
        limit: float | None,
        memo: ItemMemo | None = None,
    ) -> M:
        """Run one RPC under ``limit`` seconds (None: only the caller's deadline applies)."""
        remaining = trio.current_effective_deadline() - trio.current_time()
        budget = max(remaining if limit is None else min(limit, remaining), 0.0)
        try:
            with trio.fail_after(budget):
                data = await channel.unary(path, encode(request))
            response: M = _CODEC.decode(data, answer, memo)
            return response
        except trio.TooSlowError as exc:
            raise errors.DeadlineExceededError(op, f"no answer within {budget:.3g}s") from exc
        except Exception as exc:
            translated = translate_error(op, exc, self.endpoint)
            if translated is None:
                raise self._contained(op, exc) from exc
            raise translated from exc

    def _contained(self, op: str, exc: Exception) -> errors.CriCallError:
        """The call failed in a way no status describes: log and count it once, fail only this call."""
        with contain("grpc", self.boundary_errors, op=op, endpoint=self.endpoint):
            raise exc
        if isinstance(exc, MalformedAnswer):
            message = f"failed to unmarshal the answer: {exc}"
        else:
            message = f"{type(exc).__name__} from {self.endpoint}: {exc}"
        return errors.CriCallError(op, message, code="INTERNAL")

    def _rt(
        self,
        op: str,
        answer: type[M],
        request: betterproto2.Message,
        *,
        limit: float | None = -1.0,
        memo: ItemMemo | None = None,
    ) -> Awaitable[M]:
        """The RuntimeService call ``op`` (its method name)."""
        bound = self.request_timeout if limit == -1.0 else limit
        path = RUNTIME_SERVICE + op
        return self._call(op, self.runtime_channel, path, request, answer, limit=bound, memo=memo)

    def _img(
        self, op: str, answer: type[M], request: betterproto2.Message, *, limit: float | None = -1.0
    ) -> Awaitable[M]:
        """The ImageService call ``op`` (its method name)."""
        bound = self.request_timeout if limit == -1.0 else limit
        return self._call(op, self.image_channel, IMAGE_SERVICE + op, request, answer, limit=bound)

    # RuntimeService

    async def version(self, api_version: str = CRI_API_VERSION) -> pb.VersionResponse:
        return await self._rt("Version", pb.VersionResponse, pb.VersionRequest(version=api_version))

    async def status(self, verbose: bool = False) -> pb.StatusResponse:
        return await self._rt("Status", pb.StatusResponse, pb.StatusRequest(verbose=verbose))

    async def run_pod_sandbox(self, config: pb.PodSandboxConfig, runtime_handler: str = "") -> str:
        resp = await self._rt(
            "RunPodSandbox",
            pb.RunPodSandboxResponse,
            pb.RunPodSandboxRequest(config=config, runtime_handler=runtime_handler),
        )
        return resp.pod_sandbox_id

    async def stop_pod_sandbox(self, pod_sandbox_id: str) -> None:
        await self._rt(
            "StopPodSandbox",
            pb.StopPodSandboxResponse,
            pb.StopPodSandboxRequest(pod_sandbox_id=pod_sandbox_id),
        )

    async def remove_pod_sandbox(self, pod_sandbox_id: str) -> None:
        await self._rt(
            "RemovePodSandbox",
            pb.RemovePodSandboxResponse,
            pb.RemovePodSandboxRequest(pod_sandbox_id=pod_sandbox_id),
        )

    async def pod_sandbox_status(
        self, pod_sandbox_id: str, verbose: bool = False
    ) -> pb.PodSandboxStatusResponse:
        return await self._rt(
            "PodSandboxStatus",
            pb.PodSandboxStatusResponse,
            pb.PodSandboxStatusRequest(pod_sandbox_id=pod_sandbox_id, verbose=verbose),
        )

    async def list_pod_sandbox(self, filter: pb.PodSandboxFilter | None = None) -> list[pb.PodSandbox]:
        resp = await self._rt(
            "ListPodSandbox",
            pb.ListPodSandboxResponse,
            pb.ListPodSandboxRequest(filter=filter),
            memo=self._sandboxes,
        )
        return list(resp.items)

    async def create_container(
        self, pod_sandbox_id: str, config: pb.ContainerConfig, sandbox_config: pb.PodSandboxConfig
    ) -> str:
        resp = await self._rt(
            "CreateContainer",
            pb.CreateContainerResponse,
            pb.CreateContainerRequest(
                pod_sandbox_id=pod_sandbox_id, config=config, sandbox_config=sandbox_config
            ),
        )
        return resp.container_id

    async def start_container(self, container_id: str) -> None:
        await self._rt(
            "StartContainer",
            pb.StartContainerResponse,
            pb.StartContainerRequest(container_id=container_id),
        )

    async def stop_container(self, container_id: str, timeout_seconds: int) -> None:
        # Like the Go kubelet: the RPC may take the grace period plus the usual request timeout.
        await self._rt(
            "StopContainer",
            pb.StopContainerResponse,
            pb.StopContainerRequest(container_id=container_id, timeout=timeout_seconds),
            limit=self.request_timeout + max(timeout_seconds, 0),
        )

    async def remove_container(self, container_id: str) -> None:
        await self._rt(
            "RemoveContainer",
            pb.RemoveContainerResponse,
            pb.RemoveContainerRequest(container_id=container_id),
        )

    async def list_containers(self, filter: pb.ContainerFilter | None = None) -> list[pb.Container]:
        resp = await self._rt(
            "ListContainers",
            pb.ListContainersResponse,
            pb.ListContainersRequest(filter=filter),
            memo=self._containers,
        )
        return list(resp.containers)

    async def container_status(self, container_id: str, verbose: bool = False) -> pb.ContainerStatusResponse:
        return await self._rt(
            "ContainerStatus",
            pb.ContainerStatusResponse,
            pb.ContainerStatusRequest(container_id=container_id, verbose=verbose),
        )

    async def reopen_container_log(self, container_id: str) -> None:
        await self._rt(
            "ReopenContainerLog",
            pb.ReopenContainerLogResponse,
            pb.ReopenContainerLogRequest(container_id=container_id),
        )

    async def exec_sync(
        self, container_id: str, cmd: list[str], timeout_seconds: int = 0
    ) -> pb.ExecSyncResponse:
        # timeout 0 means "no limit" in the CRI; otherwise allow the request timeout on top of it.
        limit = None if timeout_seconds <= 0 else self.request_timeout + timeout_seconds
        return await self._rt(
            "ExecSync",
            pb.ExecSyncResponse,
            pb.ExecSyncRequest(container_id=container_id, cmd=list(cmd), timeout=timeout_seconds),
            limit=limit,
        )

    async def exec(self, request: pb.ExecRequest) -> str:
        return (await self._rt("Exec", pb.ExecResponse, request)).url

    async def attach(self, request: pb.AttachRequest) -> str:
        return (await self._rt("Attach", pb.AttachResponse, request)).url

    async def port_forward(self, request: pb.PortForwardRequest) -> str:
        return (await self._rt("PortForward", pb.PortForwardResponse, request)).url

    async def container_stats(self, container_id: str) -> pb.ContainerStats | None:
        resp = await self._rt(
            "ContainerStats",
            pb.ContainerStatsResponse,
            pb.ContainerStatsRequest(container_id=container_id),
        )
        return resp.stats

    async def list_container_stats(
        self, filter: pb.ContainerStatsFilter | None = None
    ) -> list[pb.ContainerStats]:
        resp = await self._rt(
            "ListContainerStats",
            pb.ListContainerStatsResponse,
            pb.ListContainerStatsRequest(filter=filter),
        )
        return list(resp.stats)

    async def list_pod_sandbox_stats(
        self, filter: pb.PodSandboxStatsFilter | None = None
    ) -> list[pb.PodSandboxStats]:
        resp = await self._rt(
            "ListPodSandboxStats",
            pb.ListPodSandboxStatsResponse,
            pb.ListPodSandboxStatsRequest(filter=filter),
        )
        return list(resp.stats)

    async def update_container_resources(
        self, container_id: str, linux: pb.LinuxContainerResources | None
    ) -> None:
        await self._rt(
            "UpdateContainerResources",
            pb.UpdateContainerResourcesResponse,
            pb.UpdateContainerResourcesRequest(container_id=container_id, linux=linux),
        )

    async def update_runtime_config(self, runtime_config: pb.RuntimeConfig) -> None:
        await self._rt(
            "UpdateRuntimeConfig",
            pb.UpdateRuntimeConfigResponse,
            pb.UpdateRuntimeConfigRequest(runtime_config=runtime_config),
        )

    # ImageService

    async def list_images(self, filter: pb.ImageFilter | None = None) -> list[pb.Image]:
        resp = await self._img("ListImages", pb.ListImagesResponse, pb.ListImagesRequest(filter=filter))
        return list(resp.images)

    async def image_status(self, image: pb.ImageSpec, verbose: bool = False) -> pb.Image | None:
        resp = await self._img(
            "ImageStatus", pb.ImageStatusResponse, pb.ImageStatusRequest(image=image, verbose=verbose)
        )
        return resp.image if resp.image is not None and resp.image.id else None

    async def pull_image(
        self,
        image: pb.ImageSpec,
        auth: pb.AuthConfig | None = None,
        sandbox_config: pb.PodSandboxConfig | None = None,
    ) -> str:
        # Unbounded like the Go kubelet's pulls (they can take long); the caller can still cancel.
        resp = await self._img(
            "PullImage",
            pb.PullImageResponse,
            pb.PullImageRequest(image=image, auth=auth, sandbox_config=sandbox_config),
            limit=None,
        )
        return resp.image_ref

    async def remove_image(self, image: pb.ImageSpec) -> None:
        await self._img("RemoveImage", pb.RemoveImageResponse, pb.RemoveImageRequest(image=image))

    async def image_fs_info(self) -> pb.ImageFsInfoResponse:
        return await self._img("ImageFsInfo", pb.ImageFsInfoResponse, pb.ImageFsInfoRequest())


@contextlib.asynccontextmanager
async def open_cri_runtime(
    endpoint: str,
    image_endpoint: str | None = None,
    *,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    boundary_errors: BoundaryErrors | None = None,
) -> AsyncIterator[CriRuntime]:
    """Open a CRI session: one channel per distinct socket, closed on exit.

    Nothing is dialled here; the first call connects (and a later call reconnects after a restart).
    ``boundary_errors`` counts the calls that failed without a status (see the module docstring).
    """
    runtime_path = socket_path(endpoint)
    image_path = socket_path(image_endpoint) if image_endpoint else runtime_path
    async with contextlib.AsyncExitStack() as stack:
        runtime_channel = await stack.enter_async_context(open_h2_channel(runtime_path))
        image_channel = (
            runtime_channel
            if image_path == runtime_path
            else await stack.enter_async_context(open_h2_channel(image_path))
        )
        yield CriRuntime(
            endpoint=endpoint,
            request_timeout=request_timeout,
            runtime_channel=runtime_channel,
            image_channel=image_channel,
            boundary_errors=boundary_errors,
        )
