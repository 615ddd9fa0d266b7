"""CSI drivers (Go: ``pkg/volume/csi``): registration through the plugin manager, the node's CSI record
(``CSINode``, the node-ID annotation, topology labels) and the client of a driver's Node service."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.volume.csi.client import CsiClient, CsiError
    from kubelet_trio.volume.csi.drivers import CsiDriver, CsiDrivers, highest_supported_version
    from kubelet_trio.volume.csi.nodeinfo import NODE_ID_ANNOTATION, NodeInfoManager
    from kubelet_trio.volume.csi.registration import CsiRegistrationHandler

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "CsiClient": "kubelet_trio.volume.csi.client",
    "CsiError": "kubelet_trio.volume.csi.client",
    "CsiDriver": "kubelet_trio.volume.csi.drivers",
    "CsiDrivers": "kubelet_trio.volume.csi.drivers",
    "highest_supported_version": "kubelet_trio.volume.csi.drivers",
    "NODE_ID_ANNOTATION": "kubelet_trio.volume.csi.nodeinfo",
    "NodeInfoManager": "kubelet_trio.volume.csi.nodeinfo",
    "CsiRegistrationHandler": "kubelet_trio.volume.csi.registration",
}

__all__ = [
    "NODE_ID_ANNOTATION",
    "CsiClient",
    "CsiDriver",
    "CsiDrivers",
    "CsiError",
    "CsiRegistrationHandler",
    "NodeInfoManager",
    "highest_supported_version",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
