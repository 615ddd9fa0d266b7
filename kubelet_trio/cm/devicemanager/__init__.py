"""Device plugins (Go: ``pkg/kubelet/cm/devicemanager``): extended resources such as
``example.com/widget`` advertised by plugins over gRPC, counted in the Node's capacity, allocated to
containers at admission and handed to them at start.

Not re-exported by :mod:`kubelet_trio.cm`: importing node allocatable must not load the gRPC stack.
"""

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
