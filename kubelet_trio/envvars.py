"""Service environment variables (Go: ``pkg/kubelet/envvars`` and ``kubelet_pods.go``
``getServiceEnvVarMap``): every container learns the address of the ``kubernetes`` service in ``default``
(what in-cluster clients read) and, with ``enableServiceLinks`` (the default), of every service of its own
namespace, as ``<NAME>_SERVICE_HOST``/``_SERVICE_PORT`` and Docker's link variables (``<NAME>_PORT_...``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import attrs

from kubelet_trio.netaddr import join_host_port

__all__ = [
    "MASTER_SERVICES",
    "ServiceInfo",
    "ServiceLister",
    "from_services",
    "service_env_map",
]

#: Services of the ``default`` namespace given to every pod, whatever its ``enableServiceLinks``.
MASTER_SERVICES = frozenset({"kubernetes"})
DEFAULT_NAMESPACE = "default"


@attrs.frozen
class ServicePort:
    name: str
    port: int
    protocol: str  # TCP, UDP or SCTP


@attrs.frozen
class ServiceInfo:
    """What the variables need of a Service: its name, namespace, cluster IP and ports."""

    namespace: str
    name: str
    cluster_ip: str
    ports: tuple[ServicePort, ...]

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ServiceInfo:
        """Raises ``TypeError``/``ValueError``/``AttributeError`` for an object of the wrong shape."""
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        ports = tuple(
            ServicePort(str(p.get("name") or ""), int(p["port"]), str(p.get("protocol") or "TCP"))
            for p in spec.get("ports") or ()
        )
        return cls(str(meta["namespace"]), str(meta["name"]), str(spec.get("clusterIP") or ""), ports)

    @property
    def ip_set(self) -> bool:
        """Go ``IsServiceIPSet``: headless (``None``) and unset addresses give no variables."""
        return self.cluster_ip not in ("", "None")


class ServiceLister(Protocol):
    """The node's view of the cluster's services (API mode's informer)."""

    def services(self) -> Iterable[ServiceInfo]: ...

    def has_synced(self) -> bool: ...


def _variable(name: str) -> str:
    return name.upper().replace("-", "_")


def from_services(services: Iterable[ServiceInfo]) -> list[tuple[str, str]]:
    """Go ``envvars.FromServices``: the host, the first port, each named port, then the link variables."""
    result: list[tuple[str, str]] = []
    for service in services:
        if not service.ip_set or not service.ports:
            continue
        prefix = _variable(service.name)
        first = f"{prefix}_SERVICE_PORT"
        result.append((f"{prefix}_SERVICE_HOST", service.cluster_ip))
        result.append((first, str(service.ports[0].port)))
        result.extend((f"{first}_{_variable(p.name)}", str(p.port)) for p in service.ports if p.name)
        for i, port in enumerate(service.ports):
            protocol = port.protocol or "TCP"
            url = f"{protocol.lower()}://{join_host_port(service.cluster_ip, port.port)}"
            if i == 0:
                result.append((f"{prefix}_PORT", url))
            port_prefix = f"{prefix}_PORT_{port.port}_{protocol.upper()}"
            result += [
                (port_prefix, url),
                (f"{port_prefix}_PROTO", protocol.lower()),
                (f"{port_prefix}_PORT", str(port.port)),
                (f"{port_prefix}_ADDR", service.cluster_ip),
            ]
    return result


def service_env_map(
    services: Iterable[ServiceInfo], namespace: str, enable_service_links: bool
) -> dict[str, str]:
    """Go ``getServiceEnvVarMap``: the master services always, the namespace's with service links; a
    namespace's own service shadows a master service of the same name."""
    chosen: dict[str, ServiceInfo] = {}
    for service in services:
        if not service.ip_set:
            continue
        if service.namespace == DEFAULT_NAMESPACE and service.name in MASTER_SERVICES:
            chosen.setdefault(service.name, service)
        elif service.namespace == namespace and enable_service_links:
            chosen[service.name] = service
    return dict(from_services(chosen.values()))
