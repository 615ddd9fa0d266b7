"""The kubelet's two ASGI apps: the healthz server and the read-only server (Go: ``server.go``,
``cmd/kubelet/app/server.go``).

- :func:`healthz_app` (``--healthz-port``, default 127.0.0.1:10248): ``/healthz`` only (defined in
  :mod:`kubelet_trio.server.healthz`, which loads none of the other handlers).
- :func:`read_only_app` (``--read-only-port``, off by default): ``/healthz``, ``/pods``, ``/runningpods/``,
  ``/metrics``, ``/metrics/cadvisor``, ``/metrics/probes``, ``/metrics/resource``, ``/stats/summary`` and
  ``/containerLogs/{namespace}/{pod}/{container}``. Without authentication, like the Go kubelet's
  read-only port, so keep it on a trusted address.
- :func:`kubelet_api_app` (``--port``, default 10250): the same handlers, ``/configz`` (Go installs it
  with the debugging handlers, on this port only) and ``/exec``, ``/attach``, ``/portForward`` and
  ``/run`` (:mod:`kubelet_trio.server.exec`); served over TLS behind authentication and authorization
  (:mod:`kubelet_trio.server.serve`, :mod:`kubelet_trio.server.auth`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubelet_trio.httpserver.asgi import App, Handler, Request, Response, Route
from kubelet_trio.metrics import CONTENT_TYPE
from kubelet_trio.server.container_logs import container_logs_handler
from kubelet_trio.server.exec import exec_routes
from kubelet_trio.server.healthz import healthz_app, healthz_routes
from kubelet_trio.server.pods import pods_handler, running_pods_handler
from kubelet_trio.server.proxy import StreamProxy
from kubelet_trio.server.stats import (
    cadvisor_metrics_handler,
    resource_metrics_handler,
    stats_summary_handler,
)

if TYPE_CHECKING:
    from kubelet_trio.server.host import HostInterface

__all__ = ["healthz_app", "kubelet_api_app", "read_only_app"]


def metrics_handler(kubelet: HostInterface) -> Handler:
    async def handle(request: Request) -> Response:
        return Response(200, kubelet.render_metrics(), CONTENT_TYPE)

    return handle


def probe_metrics_handler(kubelet: HostInterface) -> Handler:
    async def handle(request: Request) -> Response:
        return Response(200, kubelet.render_probe_metrics(), CONTENT_TYPE)

    return handle


def configz_handler(configz: Mapping[str, Any] | None) -> Handler:
    """``{"kubeletconfig": {...}}`` (:mod:`kubelet_trio.configz`); a node built without options has
    nothing to show."""

    async def handle(request: Request) -> Response:
        if configz is None:
            return Response.text("configz: this node was built without a KubeletConfiguration\n", 404)
        return Response.json(configz)

    return handle


def read_only_app(kubelet: HostInterface) -> App:
    pods = pods_handler(kubelet)
    running = running_pods_handler(kubelet)
    summary = stats_summary_handler(kubelet)
    return App(
        [
            *healthz_routes(kubelet),
            Route("/pods", pods),
            Route("/pods/", pods),
            Route("/runningpods", running),
            Route("/runningpods/", running),
            Route("/metrics", metrics_handler(kubelet)),
            Route("/metrics/cadvisor", cadvisor_metrics_handler(kubelet)),
            Route("/metrics/probes", probe_metrics_handler(kubelet)),
            Route("/metrics/resource", resource_metrics_handler(kubelet)),
            Route("/stats/summary", summary),
            Route("/stats/summary/", summary),
            Route("/containerLogs/{namespace}/{pod}/{container}", container_logs_handler(kubelet)),
        ]
    )


def kubelet_api_app(
    kubelet: HostInterface, proxy: StreamProxy | None = None, *, configz: Mapping[str, Any] | None = None
) -> App:
    """The Kubelet API's handlers (the caller wraps them in authentication and authorization): the
    read-only ones, ``/configz`` (``configz``: :func:`kubelet_trio.configz.configz_body`) and exec,
    attach, port-forward and run, whose streams go through ``proxy``."""
    if proxy is None:
        proxy = StreamProxy(
            idle_timeout=kubelet.kubelet_config().streaming_connection_idle_timeout,
            boundary_errors=kubelet.boundary_errors(),
        )
    return App(
        [
            *read_only_app(kubelet).routes,
            Route("/configz", configz_handler(configz)),
            *exec_routes(kubelet, proxy),
        ]
    )
