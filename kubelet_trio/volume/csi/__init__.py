"""CSI drivers (Go: ``pkg/volume/csi``): registration through the plugin manager, the node's CSI record
(``CSINode``, the node-ID annotation, topology labels) and the client of a driver's Node service."""

from kubelet_trio.volume.csi.client import CsiClient, CsiError
from kubelet_trio.volume.csi.drivers import CsiDriver, CsiDrivers, highest_supported_version
from kubelet_trio.volume.csi.nodeinfo import NODE_ID_ANNOTATION, NodeInfoManager
from kubelet_trio.volume.csi.registration import CsiRegistrationHandler

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
