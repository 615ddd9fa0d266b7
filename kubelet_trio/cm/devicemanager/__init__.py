"""Device plugins (Go: ``pkg/kubelet/cm/devicemanager``): extended resources such as
``example.com/widget`` advertised by plugins over gRPC, counted in the Node's capacity, allocated to
containers at admission and handed to them at start.

Not re-exported by :mod:`kubelet_trio.cm`: importing node allocatable must not load the gRPC stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.cm.devicemanager.errors import (
        AllocationError,
        DeviceManagerError,
        PluginCallError,
        RegistrationError,
    )
    from kubelet_trio.cm.devicemanager.manager import (
        ENDPOINT_STOP_GRACE_PERIOD,
        HEALTHY,
        KUBELET_SOCKET,
        UNEXPECTED_ADMISSION_ERROR,
        UNHEALTHY,
        DeviceManager,
        is_extended_resource_name,
    )
    from kubelet_trio.cm.devicemanager.pod_devices import DeviceRunOptions

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "AllocationError": "kubelet_trio.cm.devicemanager.errors",
    "DeviceManagerError": "kubelet_trio.cm.devicemanager.errors",
    "PluginCallError": "kubelet_trio.cm.devicemanager.errors",
    "RegistrationError": "kubelet_trio.cm.devicemanager.errors",
    "ENDPOINT_STOP_GRACE_PERIOD": "kubelet_trio.cm.devicemanager.manager",
    "HEALTHY": "kubelet_trio.cm.devicemanager.manager",
    "KUBELET_SOCKET": "kubelet_trio.cm.devicemanager.manager",
    "UNEXPECTED_ADMISSION_ERROR": "kubelet_trio.cm.devicemanager.manager",
    "UNHEALTHY": "kubelet_trio.cm.devicemanager.manager",
    "DeviceManager": "kubelet_trio.cm.devicemanager.manager",
    "is_extended_resource_name": "kubelet_trio.cm.devicemanager.manager",
    "DeviceRunOptions": "kubelet_trio.cm.devicemanager.pod_devices",
}

__all__ = [
    "ENDPOINT_STOP_GRACE_PERIOD",
    "HEALTHY",
    "KUBELET_SOCKET",
    "UNEXPECTED_ADMISSION_ERROR",
    "UNHEALTHY",
    "AllocationError",
    "DeviceManager",
    "DeviceManagerError",
    "DeviceRunOptions",
    "PluginCallError",
    "RegistrationError",
    "is_extended_resource_name",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
