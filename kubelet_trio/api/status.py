"""``core/v1`` PodStatus and its parts. Built by the node loop (keyword arguments, all optional) and
serialised with ``to_dict()``; fields left ``None`` are omitted, so set ``ready``/``restart_count``
explicitly where the API requires them."""

from __future__ import annotations

from typing import Any

from kubelet_trio.api.serialize import Model, field, model

__all__ = [
    "ContainerState",
    "ContainerStateRunning",
    "ContainerStateTerminated",
    "ContainerStateWaiting",
    "ContainerStatus",
    "HostIP",
    "PodCondition",
    "PodIP",
    "PodStatus",
]


@model
class ContainerStateWaiting(Model):
    reason: str | None = field()
    message: str | None = field()


@model
class ContainerStateRunning(Model):
    started_at: str | None = field()


@model
class ContainerStateTerminated(Model):
    exit_code: int | None = field()
    signal: int | None = field()
    reason: str | None = field()
    message: str | None = field()
    started_at: str | None = field()
    finished_at: str | None = field()
    container_id: str | None = field(json="containerID")


@model
class ContainerState(Model):
    waiting: ContainerStateWaiting | None = field()
    running: ContainerStateRunning | None = field()
    terminated: ContainerStateTerminated | None = field()


@model
class ContainerStatus(Model):
    name: str | None = field()
    state: ContainerState | None = field()
    last_state: ContainerState | None = field()
    ready: bool | None = field()
    restart_count: int | None = field()
    image: str | None = field()
    image_id: str | None = field(json="imageID")
    container_id: str | None = field(json="containerID")
    started: bool | None = field()
    allocated_resources: Any = field()
    resources: Any = field()
    volume_mounts: Any = field()
    user: Any = field()
    allocated_resources_status: Any = field()
    stop_signal: str | None = field()


@model
class PodCondition(Model):
    type: str | None = field()
    status: str | None = field()
    observed_generation: int | None = field()
    last_probe_time: str | None = field()
    last_transition_time: str | None = field()
    reason: str | None = field()
    message: str | None = field()


@model
class PodIP(Model):
    ip: str | None = field()


@model
class HostIP(Model):
    ip: str | None = field()


@model
class PodStatus(Model):
    phase: str | None = field()
    conditions: tuple[PodCondition, ...] | None = field()
    message: str | None = field()
    reason: str | None = field()
    nominated_node_name: str | None = field()
    host_ip: str | None = field(json="hostIP")
    host_ips: tuple[HostIP, ...] | None = field(json="hostIPs")
    pod_ip: str | None = field(json="podIP")
    pod_ips: tuple[PodIP, ...] | None = field(json="podIPs")
    start_time: str | None = field()
    init_container_statuses: tuple[ContainerStatus, ...] | None = field()
    container_statuses: tuple[ContainerStatus, ...] | None = field()
    ephemeral_container_statuses: tuple[ContainerStatus, ...] | None = field()
    qos_class: str | None = field()
    observed_generation: int | None = field()
