"""``/healthz``: is this node doing its job? (Go: ``k8s.io/apiserver/pkg/server/healthz``,
``Kubelet.SyncLoopHealthCheck``, the PLEG and runtime health checks.)

Checks, in order:

- ``ping``: always ok.
- ``syncloop``: the sync loop iterated within ``max(2 * syncFrequency, 5 min)``. The 1 s sync tick keeps it
  iterating, so a stale timestamp means the loop is stuck (or skipping iterations because the runtime
  is in error, as in Go). Before the first iteration it passes, as in Go.
- ``pleg``: the last successful relist started less than 3 min ago (message from ``pleg.healthy()``).
- ``runtime``: the container runtime answered its last Status call and reported RuntimeReady.

``GET /healthz`` answers 200 ``ok``, or 500 listing every check (``[-]pleg failed: <reason>``);
``?verbose`` lists them on success too; ``/healthz/<check>`` runs one check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from kubelet_trio.httpserver.asgi import App, Handler, HttpError, Request, Response, Route

if TYPE_CHECKING:
    from kubelet_trio.server.host import HostInterface

__all__ = ["SYNC_LOOP_MIN_THRESHOLD", "check_health", "healthz_app", "healthz_handlers", "healthz_routes"]

SYNC_LOOP_MIN_THRESHOLD = 300.0

Check = Callable[["HostInterface"], str | None]


def _ping(kubelet: HostInterface) -> str | None:
    return None


def _syncloop(kubelet: HostInterface) -> str | None:
    threshold = max(2 * kubelet.resync_interval(), SYNC_LOOP_MIN_THRESHOLD)
    if trio.current_time() - kubelet.latest_loop_entry_time() > threshold:
        return "sync Loop took longer than expected"
    return None


def _pleg(kubelet: HostInterface) -> str | None:
    healthy, message = kubelet.pleg_health()
    return None if healthy else message


def _runtime(kubelet: HostInterface) -> str | None:
    return kubelet.runtime_health()


CHECKS: dict[str, Check] = {"ping": _ping, "syncloop": _syncloop, "pleg": _pleg, "runtime": _runtime}


def check_health(kubelet: HostInterface) -> list[tuple[str, str | None]]:
    """``(check, failure message or None)`` for every check."""
    return [(name, check(kubelet)) for name, check in CHECKS.items()]


def _report(results: list[tuple[str, str | None]]) -> str:
    lines = [f"[-]{name} failed: {error}" if error else f"[+]{name} ok" for name, error in results]
    return "\n".join(lines) + "\n"


def healthz_handlers(kubelet: HostInterface) -> tuple[Handler, Handler]:
    """The handlers for ``/healthz`` and ``/healthz/{check}``."""

    async def healthz(request: Request) -> Response:
        results = check_health(kubelet)
        if any(error for _, error in results):
            return Response.text(_report(results) + "healthz check failed\n", 500)
        if request.arg("verbose") is not None:
            return Response.text(_report(results) + "healthz check passed\n")
        return Response.text("ok")

    async def one_check(request: Request) -> Response:
        name = request.params["check"]
        check = CHECKS.get(name)
        if check is None:
            raise HttpError(404, f"no such health check: {name}")
        error = check(kubelet)
        if error:
            return Response.text(f"internal server error: {error}\n", 500)
        return Response.text("ok")

    return healthz, one_check


def healthz_routes(kubelet: HostInterface) -> list[Route]:
    healthz, one_check = healthz_handlers(kubelet)
    return [Route("/healthz", healthz), Route("/healthz/{check}", one_check)]


def healthz_app(kubelet: HostInterface) -> App:
    """The healthz server's app (``--healthz-port``): ``/healthz`` only, without the read-only server's
    handlers and what they import."""
    return App(healthz_routes(kubelet))
