"""The pod resources API (Go: ``pkg/kubelet/apis/podresources``): node-local monitoring agents ask the
kubelet, on ``<root-dir>/pod-resources/kubelet.sock``, which devices each container holds and which the
node can allocate.

Not re-exported by :mod:`kubelet_trio.apis`: serving it loads the gRPC stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
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

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "DEFAULT_BURST_TOKENS": "kubelet_trio.apis.podresources.ratelimit",
    "DEFAULT_QPS": "kubelet_trio.apis.podresources.ratelimit",
    "Limiter": "kubelet_trio.apis.podresources.ratelimit",
    "SOCKET_DIR": "kubelet_trio.apis.podresources.server",
    "SOCKET_NAME": "kubelet_trio.apis.podresources.server",
    "PodResourcesError": "kubelet_trio.apis.podresources.server",
    "PodResourcesServer": "kubelet_trio.apis.podresources.server",
    "serve_pod_resources": "kubelet_trio.apis.podresources.server",
    "socket_path": "kubelet_trio.apis.podresources.server",
    "DevicesProvider": "kubelet_trio.apis.podresources.types",
    "PodsProvider": "kubelet_trio.apis.podresources.types",
}

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


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
