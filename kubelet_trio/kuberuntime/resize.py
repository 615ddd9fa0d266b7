"""In-place resize of running containers (Go: ``kuberuntime_manager.go`` ``computePodResizeAction``,
``doPodResizeAction``, ``validateMemoryResizeAction``, ``updatePodContainerResources``).

The pod the runtime manager syncs carries its *allocated* resources. For each running resizable container
(app containers; restartable init containers are not resized here yet) the allocated CPU and memory
requests and limits are compared with the *actuated* ones (what this kubelet last gave the runtime for the
container, ``<root-dir>/actuated_pods_state``):

- a resource whose ``resizePolicy`` is ``RestartContainer`` changed: the container is killed ("Container
  <name> resize requires restart") and started again with the new resources, nothing else of the pod;
- otherwise each changed resource (memory, cpu) lists the container for ``UpdateContainerResources``,
  decreases before increases.

Actuating: memory first, then CPU. For each, the pod cgroup grows before its containers and shrinks after
them (limits before requests when growing, requests before limits when shrinking); a memory limit may not
go below the current usage of the pod or of a container (Go's "cannot decrease memory limits: ..."), which
fails the resize for this sync (retried at the next).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import attrs

from kubelet_trio.allocation.manager import resize_policy
from kubelet_trio.api import Quantity
from kubelet_trio.api.container import Container, ResourceRequirements
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.kuberuntime.resources import linux_container_resources

if TYPE_CHECKING:
    from kubelet_trio.api import Pod
    from kubelet_trio.cm.helpers import ResourceConfig
    from kubelet_trio.container.types import PodStatus
    from kubelet_trio.cri.runtime import Runtime

__all__ = [
    "ContainerResourceValues",
    "ContainerToUpdate",
    "PodCgroupResizer",
    "ResizeDecision",
    "ResizeError",
    "compute_container_resize",
    "linux_resources_for",
    "update_order_key",
    "validate_memory_resize",
    "values_of",
]


class ResizeError(Exception):
    """The resize could not be actuated (this sync); the message is Go's."""


@attrs.frozen
class ContainerResourceValues:
    """Go ``containerResources``: CPU in millicores, memory in bytes; 0 when unset."""

    cpu_request: int = 0
    cpu_limit: int = 0
    memory_request: int = 0
    memory_limit: int = 0

    def with_resource(self, resource: str, other: ContainerResourceValues) -> ContainerResourceValues:
        """These values with ``resource`` (cpu or memory) taken from ``other``."""
        if resource == "memory":
            return attrs.evolve(self, memory_request=other.memory_request, memory_limit=other.memory_limit)
        return attrs.evolve(self, cpu_request=other.cpu_request, cpu_limit=other.cpu_limit)

    def requirements(self) -> ResourceRequirements:
        """As requirements (what UpdateContainerResources is given and the actuated state keeps)."""

        def rl(cpu: int, memory: int) -> dict[str, Quantity] | None:
            out = {}
            if cpu:
                out["cpu"] = Quantity(f"{cpu}m" if cpu % 1000 else str(cpu // 1000))
            if memory:
                out["memory"] = Quantity(str(memory))
            return out or None

        return ResourceRequirements(
            limits=rl(self.cpu_limit, self.memory_limit), requests=rl(self.cpu_request, self.memory_request)
        )


def values_of(res: ResourceRequirements | None) -> ContainerResourceValues:
    """Go ``containerResourcesFromRequirements`` (without pod-level resources)."""
    requests = (res.requests if res else None) or {}
    limits = (res.limits if res else None) or {}

    def milli(values: Mapping[str, Quantity]) -> int:
        q = values.get("cpu")
        return q.milli_value() if q is not None else 0

    def value(values: Mapping[str, Quantity]) -> int:
        q = values.get("memory")
        return q.int_value() if q is not None else 0

    return ContainerResourceValues(
        cpu_request=milli(requests),
        cpu_limit=milli(limits),
        memory_request=value(requests),
        memory_limit=value(limits),
    )


@attrs.frozen
class ContainerToUpdate:
    """Go ``containerToUpdateInfo``."""

    container: Container
    container_id: str
    desired: ContainerResourceValues
    current: ContainerResourceValues


@attrs.define
class ResizeDecision:
    """What :func:`compute_container_resize` decided for one container."""

    restart_message: str | None = None  # set: kill and restart the container
    updates: dict[str, ContainerToUpdate] = attrs.Factory(dict)  # resource -> the update


def compute_container_resize(
    container: Container, container_id: str, actuated: ResourceRequirements | None
) -> ResizeDecision | None:
    """Go ``computePodResizeAction`` for one running container: None when nothing changed."""
    desired = values_of(container.resources)
    current = values_of(actuated)
    if desired == current:
        return None

    def changed(resource: str, want: int, have: int) -> tuple[bool, bool]:
        if want == have:
            return False, False
        return True, resize_policy(container, resource) == "RestartContainer"

    mem_lim = changed("memory", desired.memory_limit, current.memory_limit)
    mem_req = changed("memory", desired.memory_request, current.memory_request)
    cpu_lim = changed("cpu", desired.cpu_limit, current.cpu_limit)
    cpu_req = changed("cpu", desired.cpu_request, current.cpu_request)
    if mem_lim[1] or mem_req[1] or cpu_lim[1] or cpu_req[1]:
        return ResizeDecision(restart_message=f"Container {container.name} resize requires restart")
    decision = ResizeDecision()
    update = ContainerToUpdate(container, container_id, desired, current)
    if mem_lim[0] or mem_req[0]:
        decision.updates["memory"] = update
    if cpu_lim[0] or cpu_req[0]:
        decision.updates["cpu"] = update
    return decision


def update_order_key(resource: str, update: ContainerToUpdate) -> int:
    """Go's order of the updates of one resource: decreases first, then increases (by the limit when it
    changed, else the request)."""
    d, c = update.desired, update.current
    if resource == "memory":
        want, have = (
            (d.memory_limit, c.memory_limit)
            if d.memory_limit != c.memory_limit
            else (d.memory_request, c.memory_request)
        )
    else:
        want, have = (
            (d.cpu_limit, c.cpu_limit) if d.cpu_limit != c.cpu_limit else (d.cpu_request, c.cpu_request)
        )
    return 0 if want < have else 1


class PodCgroupResizer(Protocol):
    """The pod cgroups (:class:`kubelet_trio.cm.pod_container_manager.PodContainerManager`)."""

    def resource_config(self, pod: Pod) -> ResourceConfig: ...

    async def set_pod_cgroup_config(self, pod: Pod, config: ResourceConfig) -> None: ...


def linux_resources_for(
    pod: Pod, container: Container, values: ContainerResourceValues, memory_capacity: int = 0
) -> pb.LinuxContainerResources:
    """What ``UpdateContainerResources`` is given for ``values`` (Go ``generateLinuxContainerResources``
    of the container with those requests and limits)."""
    resized = attrs.evolve(container, resources=values.requirements())
    return linux_container_resources(pod, resized, memory_capacity)


async def memory_usage(runtime: Runtime, container_id: str) -> int | None:
    """The container's memory usage from the runtime's stats (``usage_bytes``, else the working set)."""
    stats = await runtime.container_stats(container_id)
    memory = stats.memory if stats is not None else None
    if memory is None:
        return None
    for value in (memory.usage_bytes, memory.working_set_bytes):
        if value is not None:
            return value.value
    return None


async def validate_memory_resize(
    runtime: Runtime,
    pod: Pod,
    status: PodStatus,
    current_pod_memory: int | None,
    desired_pod_memory: int | None,
    updates: Sequence[ContainerToUpdate],
    update_pod_resources: bool,
    killed: Collection[str] = (),
) -> None:
    """Go ``validateMemoryResizeAction``: no memory limit may go below current usage. The containers of
    ``killed`` (ids: stopped earlier in this sync, to be restarted with their new resources) use none: Go
    reads the pod cgroup's usage after they are gone, and their stats can no longer be asked for."""
    if not updates and not update_pod_resources:
        return
    pod_decreasing = desired_pod_memory is not None and (
        current_pod_memory is None or desired_pod_memory < current_pod_memory
    )
    decreasing = {
        u.container.name or "": u.desired.memory_limit
        for u in updates
        if u.desired.memory_limit
        and (not u.current.memory_limit or u.desired.memory_limit < u.current.memory_limit)
    }
    if not pod_decreasing and not decreasing:
        return
    usage: dict[str, int | None] = {}
    for container in status.running_containers:
        if container.id in killed:
            continue
        if container.name not in usage:
            usage[container.name] = await memory_usage(runtime, container.id)
    errs: list[str] = []
    if pod_decreasing and desired_pod_memory is not None:
        if any(v is None for v in usage.values()):
            errs.append("missing pod memory usage")
        else:
            total = sum(v or 0 for v in usage.values())
            if total >= desired_pod_memory:
                errs.append(
                    f"attempting to set pod memory limit ({desired_pod_memory}) below current usage ({total})"
                )
    for name, limit in decreasing.items():
        used = usage.get(name)
        if used is None:
            errs.append(f'missing container "{name}" memory usage')
        elif used >= limit:
            # Go reports the pod's usage here, not the container's; the container's is what is compared
            errs.append(
                f'attempting to set container "{name}" memory limit ({limit}) below current usage ({used})'
            )
    if errs:
        joined = errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"
        raise ResizeError(f"cannot decrease memory limits: {joined}")
