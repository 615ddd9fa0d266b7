"""``/stats/summary``, ``/metrics/resource`` and ``/metrics/cadvisor`` (Go: ``pkg/kubelet/server/stats``,
``metrics/collectors/resource_metrics.go``, the cAdvisor handler of ``server.go``), the first two from
the node's :class:`~kubelet_trio.stats.CriStatsProvider`, the last from CRI and the containers' cgroups
(:mod:`kubelet_trio.stats.cadvisor`).

``/stats/summary?only_cpu_and_memory=true`` skips the disk usage walks, as Go's does. ``usageNanoCores``
of the node needs two readings: it appears from the second request on (containers: when the runtime does
not report it).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.httpserver.asgi import Handler, Request, Response
from kubelet_trio.logs import kv
from kubelet_trio.metrics import CONTENT_TYPE, render_registry
from kubelet_trio.stats import Summary, summary_json
from kubelet_trio.stats.resource_metrics import resource_metrics_registry

if TYPE_CHECKING:
    from kubelet_trio.server.host import HostInterface

__all__ = ["cadvisor_metrics_handler", "resource_metrics_handler", "stats_summary_handler"]

logger = logging.getLogger(__name__)


def stats_summary_handler(kubelet: HostInterface) -> Handler:
    async def handle(request: Request) -> Response:
        only = request.flag("only_cpu_and_memory")
        summary = await kubelet.stats_summary(cpu_and_memory_only=only)
        return Response.json(summary_json(summary))

    return handle


def resource_metrics_handler(kubelet: HostInterface) -> Handler:
    async def handle(request: Request) -> Response:
        summary: Summary | None = None
        try:
            summary = await kubelet.stats_summary(cpu_and_memory_only=True)
        except (cri_errors.CriError, OSError) as err:
            logger.error("error getting summary for resource metrics", extra=kv(err=err))
        return Response(200, render_registry(resource_metrics_registry(summary)), CONTENT_TYPE)

    return handle


def cadvisor_metrics_handler(kubelet: HostInterface) -> Handler:
    async def handle(request: Request) -> Response:
        from kubelet_trio.stats.cadvisor import cadvisor_registry

        snapshot = await kubelet.cadvisor_snapshot()
        return Response(200, render_registry(cadvisor_registry(snapshot)), CONTENT_TYPE)

    return handle
