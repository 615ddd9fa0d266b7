"""Serving the kubelet's ASGI apps with hypercorn's Trio worker, inside the Kubelet's nursery.

:func:`serve_kubelet_http` starts the healthz server and the read-only server (each only when its port
is not 0) and reports the URLs it listens on. Like the Go kubelet, a healthz server that cannot bind
logs the error and tries again every ``HEALTHZ_RETRY`` seconds without stopping the node, while a
read-only server that cannot bind is fatal. Cancelling the nursery stops both at once.
"""

from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING, Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from kubelet_trio.server.app import healthz_app, read_only_app

if TYPE_CHECKING:
    from kubelet_trio.kubelet import Kubelet

__all__ = ["HEALTHZ_RETRY", "bind_address", "serve_app", "serve_kubelet_http"]

logger = logging.getLogger(__name__)

HEALTHZ_RETRY = 5.0


def bind_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _bound_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port``, closed again if binding fails (hypercorn's own binding would
    leave the failed socket to the garbage collector)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def _config(sock: socket.socket) -> Config:
    config = Config()
    config.bind = [f"fd://{sock.detach()}"]  # hypercorn takes the descriptor over
    config.errorlog = logging.getLogger("hypercorn.error")
    config.accesslog = None
    config.graceful_timeout = 1.0
    config.keep_alive_timeout = 90.0  # the Go kubelet's IdleTimeout
    return config


async def serve_app(app: Any, host: str, port: int, *, task_status: trio.TaskStatus[str]) -> None:
    """Serve ``app`` on ``host:port`` until cancelled; reports the URL once listening."""
    config = _config(_bound_socket(host, port))
    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(serve, app, config)
        task_status.started(binds[0] if binds else f"http://{bind_address(host, port)}")


async def _serve_healthz(kubelet: Kubelet, *, task_status: trio.TaskStatus[str | None]) -> None:
    host, port = kubelet.config.healthz_bind_address, kubelet.config.healthz_port
    reported = False
    while True:
        try:
            async with trio.open_nursery() as nursery:
                url = await nursery.start(serve_app, healthz_app(kubelet), host, port)
                logger.info("healthz server listening url=%s", url)
                if not reported:
                    reported = True
                    task_status.started(url)
        except* OSError as group:
            logger.error(
                "failed to start healthz server, retrying in %gs address=%s error=%s",
                HEALTHZ_RETRY,
                bind_address(host, port),
                group.exceptions[0],
            )
        if not reported:
            reported = True
            task_status.started(None)
        await trio.sleep(HEALTHZ_RETRY)


async def serve_kubelet_http(kubelet: Kubelet, *, task_status: trio.TaskStatus[dict[str, str]]) -> None:
    """Run the enabled servers until cancelled; reports ``{"healthz": url, "readonly": url}``."""
    urls: dict[str, str] = {}
    async with trio.open_nursery() as nursery:
        if kubelet.config.healthz_port:
            url = await nursery.start(_serve_healthz, kubelet)
            if url:
                urls["healthz"] = url
        if kubelet.config.read_only_port:
            urls["readonly"] = await nursery.start(
                serve_app, read_only_app(kubelet), kubelet.config.address, kubelet.config.read_only_port
            )
            logger.info("read-only server listening url=%s", urls["readonly"])
        task_status.started(urls)
