"""The ``v1.PodResourcesLister`` service (Go: ``server_v1.go``, served by ``ListenAndServePodResources``).

:class:`PodResourcesServer` builds the answers in Trio, from the kubelet's pods and the device manager;
:func:`serve_pod_resources` serves them with grpclib on an asyncio thread, each call hopping into Trio
(:mod:`kubelet_trio.apis.podresources.service`; loaded at the first client).
Go's answers, field for field: ``List`` names every pod the kubelet was given (a rejected one included,
with no devices) and its containers, after releasing the devices of pods no longer active; each device is
its own ``ContainerDevices`` (Go converts device by device; without topology it has no ``topology``);
``GetAllocatableResources`` lists the healthy devices; ``Get`` answers one pod, and is off unless enabled
(Go: the ``KubeletPodResourcesGet`` gate). Every call first takes a token from the rate limiter. There is
no CPU or memory manager: ``cpu_ids`` and ``memory`` are always empty.

Its clients are peers at the :data:`BOUNDARY`: the server bounds each (message size, handshake time, echoed
text: :mod:`kubelet_trio.cri.grpcserver`), and a name a client sent is truncated where it is echoed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from kubelet_trio.api import Pod
from kubelet_trio.api.container import Container
from kubelet_trio.apis.podresources.ratelimit import Limiter
from kubelet_trio.apis.podresources.types import DevicesProvider, PodsProvider
from kubelet_trio.boundary import BoundaryErrors, truncate
from kubelet_trio.cri.gen import v1 as pr
from kubelet_trio.cri.grpclisten import serve_on_first_peer
from kubelet_trio.fsio import RunSync, run_in_thread

if TYPE_CHECKING:
    from kubelet_trio.aiobridge import AsyncioThread, AsyncioThreadSource

__all__ = [
    "BOUNDARY",
    "SOCKET_DIR",
    "SOCKET_NAME",
    "PodResourcesError",
    "PodResourcesServer",
    "serve_pod_resources",
    "socket_path",
]


SOCKET_DIR = "pod-resources"
SOCKET_NAME = "kubelet.sock"  # Go: podresources.Socket + ".sock"
BOUNDARY = "pod-resources"  # the label of its failures and refused peers


def socket_path(root_dir: str) -> str:
    return os.path.join(root_dir, SOCKET_DIR, SOCKET_NAME)


class PodResourcesError(Exception):
    """A call Go answers with a plain error (gRPC ``Unknown``); ``str()`` is Go's message."""


def _container_devices(devices: Mapping[str, Sequence[str]]) -> list[pr.ContainerDevices]:
    """One entry per device, as Go's ``containerDevicesFromResourceDeviceInstances`` (Go's order is a
    map's; ours is sorted)."""
    return [
        pr.ContainerDevices(resource_name=resource, device_ids=[device_id])
        for resource, ids in sorted(devices.items())
        for device_id in sorted(ids)
    ]


def _listed_containers(pod: Pod) -> list[Container]:
    """The regular containers and, since Go has sidecars, the restartable init containers before them."""
    spec = pod.spec
    if spec is None:
        return []
    sidecars = [c for c in spec.init_containers or () if c.restart_policy == "Always"]
    return [*sidecars, *(spec.containers or ())]


@attrs.define(eq=False)
class PodResourcesServer:
    """The answers; ``get_enabled`` is Go's ``KubeletPodResourcesGet`` gate (off by default from 1.27 to
    1.33; Go 1.24 has no ``Get`` and answers it ``Unimplemented``)."""

    pods: PodsProvider
    devices: DevicesProvider
    get_enabled: bool = False
    limiter: Limiter = attrs.Factory(Limiter)

    def _resources(self, pod: Pod) -> pr.PodResources:
        return pr.PodResources(
            name=pod.name,
            namespace=pod.namespace,
            containers=[
                pr.ContainerResources(
                    name=c.name or "",
                    devices=_container_devices(self.devices.container_devices(pod.uid, c.name or "")),
                )
                for c in _listed_containers(pod)
            ],
        )

    def list(self) -> pr.ListPodResourcesResponse:
        pods = self.pods()
        self.devices.update_allocated_devices()
        return pr.ListPodResourcesResponse(pod_resources=[self._resources(p) for p in pods])

    def get_allocatable_resources(self) -> pr.AllocatableResourcesResponse:
        return pr.AllocatableResourcesResponse(devices=_container_devices(self.devices.allocatable_devices()))

    def get(self, namespace: str, name: str) -> pr.GetPodResourcesResponse:
        if not self.get_enabled:
            raise PodResourcesError("PodResources API Get method disabled")
        for pod in self.pods():
            if pod.namespace == namespace and pod.name == name:
                return pr.GetPodResourcesResponse(pod_resources=self._resources(pod))
        raise PodResourcesError(f"pod {truncate(name)} in namespace {truncate(namespace)} not found")


async def serve_pod_resources(
    threads: AsyncioThreadSource,
    path: str,
    server: PodResourcesServer,
    *,
    boundary_errors: BoundaryErrors | None = None,
    run_sync: RunSync = run_in_thread,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve on the unix socket ``path`` until cancelled; ``started`` once it accepts; removed on exit.
    The gRPC stack and the asyncio thread (from ``threads``) are loaded at the first client."""

    def services(bridge: AsyncioThread) -> list[Any]:
        from kubelet_trio.apis.podresources.service import Lister

        return [Lister(bridge, server, boundary_errors)]

    await serve_on_first_peer(
        threads,
        services,
        path,
        what="pod resources API",
        boundary_errors=boundary_errors,
        boundary=BOUNDARY,
        run_sync=run_sync,
        task_status=task_status,
    )
