"""The kubelet's HTTP endpoints (Go: ``pkg/kubelet/server``): ASGI apps on a small h11 server on Trio.

Names are imported on first use: a node with every server off loads none of the server stack (h11,
TLS, metrics exposition), and one with only ``/healthz`` loads no TLS.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.server.app import healthz_app, read_only_app
    from kubelet_trio.server.healthz import check_health
    from kubelet_trio.server.serve import serve_app, serve_kubelet_http

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "check_health": "kubelet_trio.server.healthz",
    "healthz_app": "kubelet_trio.server.app",
    "read_only_app": "kubelet_trio.server.app",
    "serve_app": "kubelet_trio.server.serve",
    "serve_kubelet_http": "kubelet_trio.server.serve",
}

__all__ = ["check_health", "healthz_app", "read_only_app", "serve_app", "serve_kubelet_http"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
