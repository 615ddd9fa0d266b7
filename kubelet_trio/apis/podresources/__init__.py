"""The pod resources API (Go: ``pkg/kubelet/apis/podresources``): node-local monitoring agents ask the
kubelet, on ``<root-dir>/pod-resources/kubelet.sock``, which devices each container holds and which the
node can allocate.

Not re-exported by :mod:`kubelet_trio.apis`: serving it loads the gRPC stack.
"""

from kubelet_trio.apis.podresources.ratelimit import DEFAULT_BURST_TOKENS, DEFAULT_QPS, Limiter
from kubelet_trio.apis.podresources.server import (
    SOCKET_DIR,
    SOCKET_NAME,
    PodResourcesError,
    PodResourcesServer,
    serve_pod_resources,
    socket_path,
)
from kubelet_trio.apis.podresources.types import DevicesProvider, PodsProvider

__all__ = [
    "DEFAULT_BURST_TOKENS",
    "DEFAULT_QPS",
    "SOCKET_DIR",
    "SOCKET_NAME",
    "DevicesProvider",
    "Limiter",
    "PodResourcesError",
    "PodResourcesServer",
    "PodsProvider",
    "serve_pod_resources",
    "socket_path",
]
