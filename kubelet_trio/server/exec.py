"""``/exec``, ``/attach``, ``/portForward`` and ``/run`` on the Kubelet API (Go: ``server.go``
``getExec``/``getAttach``/``getPortForward``/``getRun``, ``kubelet_pods.go`` ``GetExec``...).

Exec, attach and port-forward ask the runtime (CRI ``Exec``/``Attach``/``PortForward``) for a streaming
URL and proxy the client's upgraded connection there unchanged (:mod:`kubelet_trio.server.proxy`): SPDY/3.1
or WebSocket, whatever the client and the runtime's streaming server agree on. Query parameters are the
API server's: ``command`` (repeated), ``input``/``output``/``error``/``tty`` (``1`` for on) and, for a
WebSocket port-forward, ``ports``. ``/run`` runs ``cmd`` (space-separated) with ``ExecSync`` and answers
its combined output.

The kubelet finds the running instance of the named container (in the pod cache) and asks the runtime
(:class:`~kubelet_trio.server.host.HostInterface` ``exec_url`` and the like); attach uses the TTY setting of
the container's spec, since a running process's terminal cannot change.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable
from typing import TYPE_CHECKING, TypeVar

import trio

from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.httpserver.asgi import HttpError, Request, Response, Route
from kubelet_trio.server.proxy import StreamProxy

if TYPE_CHECKING:
    from kubelet_trio.api import Pod
    from kubelet_trio.server.host import HostInterface

__all__ = ["exec_routes", "stream_options"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_CRI_STATUS = {
    "NOT_FOUND": 404,
    "INVALID_ARGUMENT": 400,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
    "UNIMPLEMENTED": 501,
}
_METHODS = ("GET", "POST")


def stream_options(request: Request) -> tuple[bool, bool, bool, bool]:
    """(stdin, stdout, stderr, tty) from ``input``/``output``/``error``/``tty``; with a TTY stderr is
    merged into stdout (Go drops it too); 400 when no stream is asked for."""
    stdin, stdout, stderr, tty = (request.arg(name) == "1" for name in ("input", "output", "error", "tty"))
    if tty and stderr:
        stderr = False
    if not (stdin or stdout or stderr):
        raise HttpError(400, "you must specify at least 1 of stdin, stdout, stderr")
    return stdin, stdout, stderr, tty


#: Bytes that make net/http's content sniffing call a body binary rather than text.
_BINARY = re.compile(rb"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f]")


def _sniffed_type(output: bytes) -> str:
    """What net/http labels ``/run``'s output with (Go's getRun writes it with no type and the server
    sniffs its first 512 bytes): text, or octet-stream for binary output. The other signatures Go knows
    (HTML, images, archives) are not looked for."""
    return "application/octet-stream" if _BINARY.search(output, 0, 512) else "text/plain; charset=utf-8"


def _port_forward_ports(request: Request) -> list[int]:
    """The ``ports`` of a WebSocket port-forward (required there); SPDY names its ports per stream."""
    if (request.header("upgrade") or "").lower() != "websocket":
        return []
    raw = ",".join(request.query.get("ports", ()))
    if not raw:
        raise HttpError(400, 'query parameter "port" is required')
    ports: list[int] = []
    for item in raw.split(","):
        try:
            port = int(item.strip())
        except ValueError:
            raise HttpError(400, f'unable to parse "{item}" as a port') from None
        if not 0 < port < 65536:
            raise HttpError(400, f'"{item}" is not a valid port')
        ports.append(port)
    return ports


def _find_pod(kubelet: HostInterface, request: Request) -> Pod:
    pod = kubelet.pod_by_name(request.params["namespace"], request.params["pod"])
    if pod is None:
        raise HttpError(404, "pod does not exist")
    return pod


async def _ask(call: Awaitable[T]) -> T:
    """The kubelet's answer; a container or sandbox it cannot find is a 500 (as from the Go kubelet), a
    runtime error the status of its code."""
    try:
        return await call
    except LookupError as err:
        raise HttpError(500, str(err)) from None
    except cri_errors.CriError as err:
        raise HttpError(_CRI_STATUS.get(err.code, 500), err.message) from None


def _upgrade(proxy: StreamProxy, url: str, request: Request) -> Response:
    async def take_over(stream: trio.abc.Stream) -> None:
        await proxy.proxy(stream, url, request.method, request.headers)

    return Response(upgrade=take_over)


def _require_upgrade(proxy: StreamProxy, request: Request) -> None:
    """Checked before the CRI call, so a plain request costs the runtime nothing."""
    if not request.can_upgrade:
        raise HttpError(400, "Upgrade request required")
    if proxy.full():
        raise HttpError(429, f"too many streaming connections (at most {proxy.max_streams})")


def exec_routes(kubelet: HostInterface, proxy: StreamProxy) -> list[Route]:
    """The streaming routes of the Kubelet API (not of the read-only port), each also with ``{uid}``."""

    async def handle_exec(request: Request) -> Response:
        stdin, stdout, stderr, tty = stream_options(request)
        command = list(request.query.get("command", ()))
        if not command:
            raise HttpError(400, "command is required")
        pod = _find_pod(kubelet, request)
        _require_upgrade(proxy, request)
        container = request.params["container"]
        url = await _ask(
            kubelet.exec_url(pod, container, command, stdin=stdin, stdout=stdout, stderr=stderr, tty=tty)
        )
        return _upgrade(proxy, url, request)

    async def handle_attach(request: Request) -> Response:
        stdin, stdout, stderr, _ = stream_options(request)
        pod = _find_pod(kubelet, request)
        _require_upgrade(proxy, request)
        container = request.params["container"]
        url = await _ask(kubelet.attach_url(pod, container, stdin=stdin, stdout=stdout, stderr=stderr))
        return _upgrade(proxy, url, request)

    async def handle_port_forward(request: Request) -> Response:
        ports = _port_forward_ports(request)
        pod = _find_pod(kubelet, request)
        _require_upgrade(proxy, request)
        url = await _ask(kubelet.port_forward_url(pod, ports))
        return _upgrade(proxy, url, request)

    async def handle_run(request: Request) -> Response:
        pod = _find_pod(kubelet, request)
        command = (request.arg("cmd") or "").split(" ")
        exit_code, output = await _ask(kubelet.run_in_container(pod, request.params["container"], command))
        if exit_code != 0:
            quoted = " ".join(command)
            message = f"command '{quoted}' exited with {exit_code}: {output.decode(errors='replace')}"
            raise HttpError(500, message)
        return Response(200, output, _sniffed_type(output))

    routes: list[Route] = []
    for prefix, handler in (("/exec", handle_exec), ("/attach", handle_attach)):
        routes.append(Route(prefix + "/{namespace}/{pod}/{container}", handler, _METHODS))
        routes.append(Route(prefix + "/{namespace}/{pod}/{uid}/{container}", handler, _METHODS))
    routes.append(Route("/portForward/{namespace}/{pod}", handle_port_forward, _METHODS))
    routes.append(Route("/portForward/{namespace}/{pod}/{uid}", handle_port_forward, _METHODS))
    routes.append(Route("/run/{namespace}/{pod}/{container}", handle_run, ("POST",)))
    routes.append(Route("/run/{namespace}/{pod}/{uid}/{container}", handle_run, ("POST",)))
    return routes
