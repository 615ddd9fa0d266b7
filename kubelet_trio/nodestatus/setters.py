"""The Node object the kubelet reports, built from pure functions (``pkg/kubelet/nodestatus/setters.go``,
``kubelet_node_status.go`` ``initialNode``).

Nodes stay plain JSON dicts here: the kubelet owns a handful of fields (labels it defaults, capacity,
allocatable, addresses, nodeInfo, daemonEndpoints, images and four conditions) and must pass everything
else through untouched, including conditions written by other agents.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import attrs

from kubelet_trio import defaults
from kubelet_trio.cm.allocatable import NodeAllocatable, node_allocatable
from kubelet_trio.nodestatus.machine import MachineInfo

__all__ = [
    "DEFAULT_EVICTION_HARD",
    "KUBELET_CONDITIONS",
    "NodeStatusConfig",
    "build_status",
    "default_labels",
    "initial_node",
    "node_resources",
    "status_changed",
]

#: Hard eviction thresholds subtracted from allocatable (``defaults_linux.go``).
DEFAULT_EVICTION_HARD: Mapping[str, str] = defaults.EVICTION_HARD
MAX_IMAGES = 50  # nodeStatusMaxImages
MAX_NAMES_PER_IMAGE = 5
CONTROLLER_ATTACH_DETACH = "volumes.kubernetes.io/controller-managed-attach-detach"

#: type -> (reason, message) when the condition is False (no pressure) - the eviction manager's view.
_PRESSURE = {
    "MemoryPressure": ("KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    "DiskPressure": ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    "PIDPressure": ("KubeletHasSufficientPID", "kubelet has sufficient PID available"),
}
#: type -> (reason, message) when the eviction manager reports the pressure (Go's condition setters).
_UNDER_PRESSURE = {
    "MemoryPressure": ("KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
    "DiskPressure": ("KubeletHasDiskPressure", "kubelet has disk pressure"),
    "PIDPressure": ("KubeletHasInsufficientPID", "kubelet has insufficient PID available"),
}
KUBELET_CONDITIONS = (*_PRESSURE, "Ready")


@attrs.frozen
class NodeStatusConfig:
    node_name: str
    kubelet_version: str
    hostname: str | None = None  # default: the node name
    node_ips: tuple[str, ...] = ()
    node_labels: Mapping[str, str] = attrs.Factory(dict)
    register_with_taints: tuple[Mapping[str, Any], ...] = ()
    register_schedulable: bool = True
    max_pods: int = defaults.MAX_PODS
    kubelet_port: int = defaults.PORT
    kube_reserved: Mapping[str, str] = attrs.Factory(dict)
    system_reserved: Mapping[str, str] = attrs.Factory(dict)
    eviction_hard: Mapping[str, str] = DEFAULT_EVICTION_HARD


def _binary(n: int) -> str:
    """A byte count in Kubernetes' canonical BinarySI form (``16Gi``, ``16374176Ki``, ``1000``)."""
    n = max(n, 0)
    for suffix, power in (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)):
        if n and n % (1 << power) == 0:
            return f"{n >> power}{suffix}"
    return str(n)


def _cpu(milli: int) -> str:
    milli = max(milli, 0)
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def default_labels(config: NodeStatusConfig, machine: MachineInfo) -> dict[str, str]:
    """The labels the kubelet owns and reconciles (``updateDefaultLabels``)."""
    hostname = (config.hostname or config.node_name).lower()
    return {
        "kubernetes.io/hostname": hostname,
        "kubernetes.io/os": machine.operating_system,
        "kubernetes.io/arch": machine.architecture,
        "beta.kubernetes.io/os": machine.operating_system,
        "beta.kubernetes.io/arch": machine.architecture,
    }


def node_resources(config: NodeStatusConfig, machine: MachineInfo) -> tuple[dict[str, str], dict[str, str]]:
    """(capacity, allocatable): allocatable = capacity - kube/system reserved - hard eviction, at least 0."""
    cpu_milli = machine.num_cores * 1000
    memory = machine.memory_bytes
    storage = machine.ephemeral_storage_bytes
    capacity = {
        "cpu": _cpu(cpu_milli),
        "memory": _binary(memory),
        "ephemeral-storage": _binary(storage),
        "pods": str(config.max_pods),
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
    }
    allocatable_resources = node_allocatable(
        NodeAllocatable(milli_cpu=cpu_milli, memory=memory, ephemeral_storage=storage),
        reserved=(config.kube_reserved, config.system_reserved),
        eviction_hard=config.eviction_hard,
    )
    allocatable = dict(capacity)
    allocatable["cpu"] = _cpu(allocatable_resources.milli_cpu)
    allocatable["memory"] = _binary(allocatable_resources.memory)
    allocatable["ephemeral-storage"] = _binary(allocatable_resources.ephemeral_storage)
    return capacity, allocatable


def _addresses(config: NodeStatusConfig) -> list[dict[str, str]]:
    addresses = [{"type": "InternalIP", "address": ip} for ip in config.node_ips]
    addresses.append({"type": "Hostname", "address": (config.hostname or config.node_name).lower()})
    return addresses


def _node_info(machine: MachineInfo, runtime_version: str, kubelet_version: str) -> dict[str, str]:
    return {
        "machineID": machine.machine_id,
        "systemUUID": machine.system_uuid,
        "bootID": machine.boot_id,
        "kernelVersion": machine.kernel_version,
        "osImage": machine.os_image,
        "containerRuntimeVersion": runtime_version,
        "kubeletVersion": kubelet_version,
        "kubeProxyVersion": "",
        "operatingSystem": machine.operating_system,
        "architecture": machine.architecture,
    }


def node_images(images: Iterable[tuple[Sequence[str], int]]) -> list[dict[str, Any]]:
    """Up to 50 images, largest first, each with at most 5 names (``(names, size)`` pairs in)."""
    ordered = sorted(((list(names), size) for names, size in images if names), key=lambda i: -i[1])
    return [{"names": names[:MAX_NAMES_PER_IMAGE], "sizeBytes": size} for names, size in ordered[:MAX_IMAGES]]


def _condition(
    old: Mapping[str, Any] | None, type_: str, status: str, reason: str, message: str, now: str
) -> dict[str, Any]:
    transition = old.get("lastTransitionTime") if old and old.get("status") == status else None
    return {
        "type": type_,
        "status": status,
        "lastHeartbeatTime": now,
        "lastTransitionTime": transition or now,
        "reason": reason,
        "message": message,
    }


def _conditions(
    old: Sequence[Mapping[str, Any]], errors: Sequence[str], now: str, pressure: Collection[str] = ()
) -> list[dict[str, Any]]:
    """Pressure conditions (True for those in ``pressure``, the eviction manager's), then Ready, after any
    conditions other agents own (kept as they are)."""
    by_type = {c.get("type"): c for c in old}
    out: list[dict[str, Any]] = [dict(c) for c in old if c.get("type") not in KUBELET_CONDITIONS]
    for type_, (reason, message) in _PRESSURE.items():
        status = "False"
        if type_ in pressure:
            status, (reason, message) = "True", _UNDER_PRESSURE[type_]
        out.append(_condition(by_type.get(type_), type_, status, reason, message, now))
    if errors:
        ready = _condition(by_type.get("Ready"), "Ready", "False", "KubeletNotReady", ",".join(errors), now)
    else:
        ready = _condition(
            by_type.get("Ready"), "Ready", "True", "KubeletReady", "kubelet is posting ready status", now
        )
    out.append(ready)
    return out


def build_status(
    old_status: Mapping[str, Any] | None,
    *,
    config: NodeStatusConfig,
    machine: MachineInfo,
    runtime_version: str,
    errors: Sequence[str],
    now: str,
    images: list[dict[str, Any]] | None = None,
    pressure: Collection[str] = (),
    extended: tuple[Mapping[str, str], Mapping[str, str]] = ({}, {}),
) -> dict[str, Any]:
    """The node status the kubelet reports now, over ``old_status`` (fields it does not own are kept).
    ``extended``: the device plugins' (capacity, allocatable), added to the machine's."""
    status = dict(old_status or {})
    capacity, allocatable = node_resources(config, machine)
    capacity.update(extended[0])
    allocatable.update(extended[1])
    status["capacity"] = {**(status.get("capacity") or {}), **capacity}
    status["allocatable"] = {**(status.get("allocatable") or {}), **allocatable}
    status["addresses"] = _addresses(config)
    status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": config.kubelet_port}}
    status["nodeInfo"] = _node_info(machine, runtime_version, config.kubelet_version)
    if images is not None:
        status["images"] = images
    old_conditions = list((old_status or {}).get("conditions") or ())
    status["conditions"] = _conditions(old_conditions, errors, now, pressure)
    return status


def initial_node(config: NodeStatusConfig, machine: MachineInfo, status: dict[str, Any]) -> dict[str, Any]:
    """The Node the kubelet creates when it registers (``initialNode``): user labels override defaults."""
    taints = [dict(t) for t in config.register_with_taints]
    if not config.register_schedulable:
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if not config.register_schedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": config.node_name,
            "labels": {**default_labels(config, machine), **config.node_labels},
            "annotations": {CONTROLLER_ATTACH_DETACH: "true"},
        },
        "spec": spec,
        "status": status,
    }


def _without_heartbeats(status: Mapping[str, Any] | None) -> dict[str, Any]:
    # Go compares with semantic equality, where an empty list is no list: the API server drops empty
    # ``images`` (omitempty), which must not make every status look changed.
    out = {k: v for k, v in (status or {}).items() if v != [] and v != {}}
    out["conditions"] = [
        {k: v for k, v in c.items() if k != "lastHeartbeatTime"} for c in out.get("conditions") or ()
    ]
    return out


def status_changed(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether a report is needed for anything but the heartbeat (``nodeStatusHasChanged``)."""
    return _without_heartbeats(old) != _without_heartbeats(new)
