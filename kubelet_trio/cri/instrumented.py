"""``InstrumentedRuntime``: any :class:`~kubelet_trio.cri.runtime.Runtime`, with every call counted and timed.

Go: ``pkg/kubelet/kuberuntime/instrumented_services.go``. Each protocol method reports
``(operation_type, seconds, failed)`` to an observer (normally
:meth:`kubelet_trio.metrics.KubeletMetrics.observe_runtime_operation`), using the Go kubelet's operation
names (``run_podsandbox``, ``list_containers``, ``pull_image``, ...) so dashboards written for the Go
kubelet work. A call that raises counts as an error; a cancelled call is timed but is not an error.
Durations come from Trio's clock. Attributes that are not part of the protocol (the simulated runtime's
harness extras) pass through to the wrapped runtime.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs
import trio

from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.runtime import CRI_API_VERSION, Runtime

__all__ = ["OPERATIONS", "InstrumentedRuntime", "Observer"]

T = TypeVar("T")
Observer = Callable[[str, float, bool], None]

#: Protocol method → the Go kubelet's ``operation_type`` label.
OPERATIONS = {
    "version": "version",
    "status": "status",
    "run_pod_sandbox": "run_podsandbox",
    "stop_pod_sandbox": "stop_podsandbox",
    "remove_pod_sandbox": "remove_podsandbox",
    "pod_sandbox_status": "podsandbox_status",
    "list_pod_sandbox": "list_podsandbox",
    "create_container": "create_container",
    "start_container": "start_container",
    "stop_container": "stop_container",
    "remove_container": "remove_container",
    "list_containers": "list_containers",
    "container_status": "container_status",
    "reopen_container_log": "reopen_container_log",
    "exec_sync": "exec_sync",
    "exec": "exec",
    "attach": "attach",
    "port_forward": "port_forward",
    "container_stats": "container_stats",
    "list_container_stats": "list_container_stats",
    "list_pod_sandbox_stats": "list_podsandbox_stats",
    "update_runtime_config": "update_runtime_config",
    "update_container_resources": "update_container",
    "list_images": "list_images",
    "image_status": "image_status",
    "pull_image": "pull_image",
    "remove_image": "remove_image",
    "image_fs_info": "image_fs_info",
}


@attrs.define(eq=False)
class InstrumentedRuntime:
    inner: Runtime
    observe: Observer

    async def _call(self, method: str, call: Awaitable[T]) -> T:
        operation = OPERATIONS[method]
        started = trio.current_time()
        failed = False
        try:
            return await call
        except Exception:
            failed = True
            raise
        finally:
            self.observe(operation, trio.current_time() - started, failed)

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes not defined here: harness extras of the wrapped runtime.
        if name in ("inner", "observe") or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    # -- RuntimeService ------------------------------------------------------------------------------

    async def version(self, api_version: str = CRI_API_VERSION) -> pb.VersionResponse:
        return await self._call("version", self.inner.version(api_version))

    async def status(self, verbose: bool = False) -> pb.StatusResponse:
        return await self._call("status", self.inner.status(verbose))

    async def run_pod_sandbox(self, config: pb.PodSandboxConfig, runtime_handler: str = "") -> str:
        return await self._call("run_pod_sandbox", self.inner.run_pod_sandbox(config, runtime_handler))

    async def stop_pod_sandbox(self, pod_sandbox_id: str) -> None:
        return await self._call("stop_pod_sandbox", self.inner.stop_pod_sandbox(pod_sandbox_id))

    async def remove_pod_sandbox(self, pod_sandbox_id: str) -> None:
        return await self._call("remove_pod_sandbox", self.inner.remove_pod_sandbox(pod_sandbox_id))

    async def pod_sandbox_status(
        self, pod_sandbox_id: str, verbose: bool = False
    ) -> pb.PodSandboxStatusResponse:
        return await self._call("pod_sandbox_status", self.inner.pod_sandbox_status(pod_sandbox_id, verbose))

    async def list_pod_sandbox(self, filter: pb.PodSandboxFilter | None = None) -> list[pb.PodSandbox]:
        return await self._call("list_pod_sandbox", self.inner.list_pod_sandbox(filter))

    async def create_container(
        self, pod_sandbox_id: str, config: pb.ContainerConfig, sandbox_config: pb.PodSandboxConfig
    ) -> str:
        return await self._call(
            "create_container", self.inner.create_container(pod_sandbox_id, config, sandbox_config)
        )

    async def start_container(self, container_id: str) -> None:
        return await self._call("start_container", self.inner.start_container(container_id))

    async def stop_container(self, container_id: str, timeout_seconds: int) -> None:
        return await self._call("stop_container", self.inner.stop_container(container_id, timeout_seconds))

    async def remove_container(self, container_id: str) -> None:
        return await self._call("remove_container", self.inner.remove_container(container_id))

    async def list_containers(self, filter: pb.ContainerFilter | None = None) -> list[pb.Container]:
        return await self._call("list_containers", self.inner.list_containers(filter))

    async def container_status(self, container_id: str, verbose: bool = False) -> pb.ContainerStatusResponse:
        return await self._call("container_status", self.inner.container_status(container_id, verbose))

    async def reopen_container_log(self, container_id: str) -> None:
        return await self._call("reopen_container_log", self.inner.reopen_container_log(container_id))

    async def exec_sync(
        self, container_id: str, cmd: list[str], timeout_seconds: int = 0
    ) -> pb.ExecSyncResponse:
        return await self._call("exec_sync", self.inner.exec_sync(container_id, cmd, timeout_seconds))

    async def exec(self, request: pb.ExecRequest) -> str:
        return await self._call("exec", self.inner.exec(request))

    async def attach(self, request: pb.AttachRequest) -> str:
        return await self._call("attach", self.inner.attach(request))

    async def port_forward(self, request: pb.PortForwardRequest) -> str:
        return await self._call("port_forward", self.inner.port_forward(request))

    async def container_stats(self, container_id: str) -> pb.ContainerStats | None:
        return await self._call("container_stats", self.inner.container_stats(container_id))

    async def list_container_stats(
        self, filter: pb.ContainerStatsFilter | None = None
    ) -> list[pb.ContainerStats]:
        return await self._call("list_container_stats", self.inner.list_container_stats(filter))

    async def list_pod_sandbox_stats(
        self, filter: pb.PodSandboxStatsFilter | None = None
    ) -> list[pb.PodSandboxStats]:
        return await self._call("list_pod_sandbox_stats", self.inner.list_pod_sandbox_stats(filter))

    async def update_container_resources(
        self, container_id: str, linux: pb.LinuxContainerResources | None
    ) -> None:
        return await self._call(
            "update_container_resources", self.inner.update_container_resources(container_id, linux)
        )

    async def update_runtime_config(self, runtime_config: pb.RuntimeConfig) -> None:
        return await self._call("update_runtime_config", self.inner.update_runtime_config(runtime_config))

    # -- ImageService --------------------------------------------------------------------------------

    async def list_images(self, filter: pb.ImageFilter | None = None) -> list[pb.Image]:
        return await self._call("list_images", self.inner.list_images(filter))

    async def image_status(self, image: pb.ImageSpec, verbose: bool = False) -> pb.Image | None:
        return await self._call("image_status", self.inner.image_status(image, verbose))

    async def pull_image(
        self,
        image: pb.ImageSpec,
        auth: pb.AuthConfig | None = None,
        sandbox_config: pb.PodSandboxConfig | None = None,
    ) -> str:
        return await self._call("pull_image", self.inner.pull_image(image, auth, sandbox_config))

    async def remove_image(self, image: pb.ImageSpec) -> None:
        return await self._call("remove_image", self.inner.remove_image(image))

    async def image_fs_info(self) -> pb.ImageFsInfoResponse:
        return await self._call("image_fs_info", self.inner.image_fs_info())
