"""The ``Runtime`` protocol: the kubelet's view of a container runtime.

It mirrors the CRI ``RuntimeService`` and ``ImageService`` one method per RPC (like the Go kubelet's
``internalapi.RuntimeService``/``ImageManagerService``) and speaks the generated CRI message types, so
``CriRuntime`` passes them straight to gRPC and ``SimRuntime`` can be served over gRPC unchanged.

Conventions:
- Methods raise :mod:`kubelet_trio.cri.errors` exceptions, never grpclib ones.
- Timeouts belong to the caller (``trio.fail_after``); ``timeout_seconds`` arguments are CRI fields
  (the stop grace period, the ExecSync limit), not client deadlines.
- ``list_*`` methods return plain lists.

What a runtime can do beyond the CRI it declares with :meth:`CapableRuntime.capabilities`
(:class:`RuntimeCapabilities`); the node builder reads it once, through :func:`runtime_capabilities`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Protocol, runtime_checkable

import attrs

from kubelet_trio.cri.gen.runtime import v1 as pb

CRI_API_VERSION = "v1"


@runtime_checkable
class RuntimeService(Protocol):
    """CRI RuntimeService."""

    async def version(self, api_version: str = CRI_API_VERSION) -> pb.VersionResponse: ...

    async def status(self, verbose: bool = False) -> pb.StatusResponse: ...

    async def run_pod_sandbox(self, config: pb.PodSandboxConfig, runtime_handler: str = "") -> str:
        """Create and start a sandbox; return its id."""
        ...

    async def stop_pod_sandbox(self, pod_sandbox_id: str) -> None: ...

    async def remove_pod_sandbox(self, pod_sandbox_id: str) -> None: ...

    async def pod_sandbox_status(
        self, pod_sandbox_id: str, verbose: bool = False
    ) -> pb.PodSandboxStatusResponse: ...

    async def list_pod_sandbox(self, filter: pb.PodSandboxFilter | None = None) -> list[pb.PodSandbox]:
        """The sandboxes matching ``filter``; the messages may be shared with later answers: read only."""
        ...

    async def create_container(
        self, pod_sandbox_id: str, config: pb.ContainerConfig, sandbox_config: pb.PodSandboxConfig
    ) -> str:
        """Create a container in a sandbox; return its id."""
        ...

    async def start_container(self, container_id: str) -> None: ...

    async def stop_container(self, container_id: str, timeout_seconds: int) -> None:
        """SIGTERM (or the image's stop signal), then SIGKILL after ``timeout_seconds``."""
        ...

    async def remove_container(self, container_id: str) -> None: ...

    async def list_containers(self, filter: pb.ContainerFilter | None = None) -> list[pb.Container]:
        """The containers matching ``filter``; the messages may be shared with later answers: read only."""
        ...

    async def container_status(
        self, container_id: str, verbose: bool = False
    ) -> pb.ContainerStatusResponse: ...

    async def update_container_resources(
        self, container_id: str, linux: pb.LinuxContainerResources | None
    ) -> None:
        """Set a container's CPU and memory in place (in-place pod resize)."""
        ...

    async def reopen_container_log(self, container_id: str) -> None:
        """Make a running container write to a new file at its log path (after the kubelet rotated it)."""
        ...

    async def exec_sync(
        self, container_id: str, cmd: list[str], timeout_seconds: int = 0
    ) -> pb.ExecSyncResponse: ...

    async def exec(self, request: pb.ExecRequest) -> str:
        """Prepare a streaming exec; returns the URL of the runtime's streaming server to proxy to."""
        ...

    async def attach(self, request: pb.AttachRequest) -> str:
        """Prepare a streaming attach; returns the streaming URL."""
        ...

    async def port_forward(self, request: pb.PortForwardRequest) -> str:
        """Prepare a port-forward into a sandbox; returns the streaming URL."""
        ...

    async def container_stats(self, container_id: str) -> pb.ContainerStats | None:
        """The container's stats; None when the runtime answers without any (the CRI field is optional)."""
        ...

    async def list_container_stats(
        self, filter: pb.ContainerStatsFilter | None = None
    ) -> list[pb.ContainerStats]: ...

    async def list_pod_sandbox_stats(
        self, filter: pb.PodSandboxStatsFilter | None = None
    ) -> list[pb.PodSandboxStats]:
        """Pod-level usage (the pod cgroup, network, processes) of the sandboxes matching ``filter``."""
        ...

    async def update_runtime_config(self, runtime_config: pb.RuntimeConfig) -> None: ...


@runtime_checkable
class ImageService(Protocol):
    """CRI ImageService."""

    async def list_images(self, filter: pb.ImageFilter | None = None) -> list[pb.Image]: ...

    async def image_status(self, image: pb.ImageSpec, verbose: bool = False) -> pb.Image | None:
        """The image, or None when it is not present (CRI returns an empty status, not an error)."""
        ...

    async def pull_image(
        self,
        image: pb.ImageSpec,
        auth: pb.AuthConfig | None = None,
        sandbox_config: pb.PodSandboxConfig | None = None,
    ) -> str:
        """Pull an image; return its reference (the image id or digest the runtime reports)."""
        ...

    async def remove_image(self, image: pb.ImageSpec) -> None: ...

    async def image_fs_info(self) -> pb.ImageFsInfoResponse: ...


@runtime_checkable
class Runtime(RuntimeService, ImageService, Protocol):
    """Both services together: what the kubelet holds."""


@attrs.frozen
class RuntimeCapabilities:
    """What a runtime offers the kubelet beyond the CRI (none, for a remote runtime).

    ``simulated``: its containers use none of this machine's resources, so the node's eviction signals
    are simulated ones without pressure rather than this machine's. ``change_token``: a value that stays
    equal while no sandbox or container changed state; the PLEG skips listing the runtime while it does.
    """

    simulated: bool = False
    change_token: Callable[[], Hashable] | None = None


@runtime_checkable
class CapableRuntime(Protocol):
    """A runtime that declares capabilities (the simulated ones)."""

    def capabilities(self) -> RuntimeCapabilities: ...


def runtime_capabilities(runtime: object) -> RuntimeCapabilities:
    """What ``runtime`` declares; a runtime that declares nothing (a CRI socket) has no capabilities."""
    return runtime.capabilities() if isinstance(runtime, CapableRuntime) else RuntimeCapabilities()
