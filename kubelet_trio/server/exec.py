"""``/exec``, ``/attach``, ``/portForward`` and ``/run`` on the Kubelet API (Go: ``server.go``
``getExec``/``getAttach``/``getPortForward``/``getRun``, ``kubelet_pods.go`` ``GetExec``...).

Exec, attach and port-forward ask the runtime (CRI ``Exec``/``Attach``/``PortForward``) for a streaming
URL and proxy the client's upgraded connection there unchanged (:mod:`kubelet_trio.server.proxy`): SPDY/3.1
or WebSocket, whatever the client and the runtime's streaming server agree on. Query parameters are the
API server's: ``command`` (repeated), ``input``/``output``/``error``/``tty`` (``1`` for on) and, for a
WebSocket port-forward, ``ports``. ``/run`` runs ``cmd`` (space-separated) with ``ExecSync`` and answers
its combined output.

The container is the running instance of the named container in the pod cache; attach uses the TTY
setting of the container's spec, since a running process's terminal cannot change.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

import trio

from kubelet_trio.container.types import ContainerState
from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.httpserver.asgi import HttpError, Request, Response, Route
from kubelet_trio.server.proxy import StreamProxy

if TYPE_CHECKING:
    from kubelet_trio.api import Pod
    from kubelet_trio.server.host import HostInterface

__all__ = ["exec_routes", "stream_options"]

logger = logging.getLogger(__name__)

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
    namespace, name = request.params["namespace"], request.params["pod"]
    for pod in kubelet.pod_manager.pods():
        if pod.namespace == namespace and pod.name == name:
            return pod
    raise HttpError(404, "pod does not exist")


def _running_container(kubelet: HostInterface, pod: Pod, name: str) -> str:
    """The running instance's id (500 "container not found" otherwise, as from the Go kubelet)."""
    for status in kubelet.cache.get(pod.uid).instances(name):
        if status.state is ContainerState.RUNNING:
            return status.id
    raise HttpError(500, f'container not found ("{name}")')


def _sandbox(kubelet: HostInterface, pod: Pod) -> str:
    sandboxes = kubelet.cache.get(pod.uid).sandbox_statuses
    ready = [s for s in sandboxes if s.ready]
    if not (ready or sandboxes):
        raise HttpError(500, f'failed to find sandbox for pod "{pod.name}"')
    return (ready or list(sandboxes))[0].id


def _cri_error(err: cri_errors.CriError) -> HttpError:
    return HttpError(_CRI_STATUS.get(err.code, 500), err.message)


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
        container_id = _running_container(kubelet, pod, request.params["container"])
        exec_request = pb.ExecRequest(
            container_id=container_id, cmd=command, tty=tty, stdin=stdin, stdout=stdout, stderr=stderr
        )
        try:
            url = await kubelet.runtime.exec(exec_request)
        except cri_errors.CriError as err:
            raise _cri_error(err) from None
        return _upgrade(proxy, url, request)

    async def handle_attach(request: Request) -> Response:
        stdin, stdout, stderr, _ = stream_options(request)
        pod = _find_pod(kubelet, request)
        _require_upgrade(proxy, request)
        name = request.params["container"]
        spec = next((c for c in pod.spec.all_containers() if c.name == name), None) if pod.spec else None
        if spec is None:
            raise HttpError(500, f'container not found ("{name}")')
        tty = bool(spec.tty)
        container_id = _running_container(kubelet, pod, name)
        attach = pb.AttachRequest(
            container_id=container_id, stdin=stdin, tty=tty, stdout=stdout, stderr=stderr and not tty
        )
        try:
            url = await kubelet.runtime.attach(attach)
        except cri_errors.CriError as err:
            raise _cri_error(err) from None
        return _upgrade(proxy, url, request)

    async def handle_port_forward(request: Request) -> Response:
        ports = _port_forward_ports(request)
        pod = _find_pod(kubelet, request)
        _require_upgrade(proxy, request)
        forward = pb.PortForwardRequest(pod_sandbox_id=_sandbox(kubelet, pod), port=ports)
        try:
            url = await kubelet.runtime.port_forward(forward)
        except cri_errors.CriError as err:
            raise _cri_error(err) from None
        return _upgrade(proxy, url, request)

    async def handle_run(request: Request) -> Response:
        pod = _find_pod(kubelet, request)
        command = (request.arg("cmd") or "").split(" ")
        container_id = _running_container(kubelet, pod, request.params["container"])
        try:
            answer = await kubelet.runtime.exec_sync(container_id, command, 0)
        except cri_errors.CriError as err:
            raise _cri_error(err) from None
        output = bytes(answer.stdout) + bytes(answer.stderr)
        if answer.exit_code != 0:
            quoted = " ".join(command)
            message = f"command '{quoted}' exited with {answer.exit_code}: {output.decode(errors='replace')}"
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
