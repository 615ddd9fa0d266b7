"""The kubelet's HTTP endpoints (Go: ``pkg/kubelet/server``): ASGI apps on a small h11 server on Trio."""

from __future__ import annotations

from kubelet_trio.server.app import healthz_app, read_only_app
from kubelet_trio.server.healthz import check_health
from kubelet_trio.server.serve import serve_app, serve_kubelet_http

__all__ = ["check_health", "healthz_app", "read_only_app", "serve_app", "serve_kubelet_http"]
