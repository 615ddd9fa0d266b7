"""A runtime's streaming server (Go: ``pkg/kubelet/cri/streaming/server.go``), for runtimes that have
none of their own, like the simulated one.

The CRI ``Exec``/``Attach``/``PortForward`` calls do not stream: the runtime stores the request under a
one-time token (valid ``TOKEN_TTL``, at most ``MAX_IN_FLIGHT`` waiting) and answers
``http://<address>/exec/<token>`` (``/attach/``, ``/portforward/``). The kubelet proxies the client's
upgrade request there; this server consumes the token, answers ``101 Switching Protocols`` to a
SPDY/3.1 upgrade with the negotiated ``X-Stream-Protocol-Version`` and serves the session
(:mod:`~kubelet_trio.cri.streaming.remotecommand`, :mod:`~kubelet_trio.cri.streaming.portforward`).
WebSocket upgrades are refused with 400, which makes kubectl fall back to SPDY. A session ends when its
command finishes, the client closes, or nothing moved for ``idle_timeout``; every task it started ends
with it and its connection is closed. A session that fails any other way (a client's bytes reaching a
corner of the protocol code, a backend that breaks on them) is that session's alone: contained at the
``streaming`` boundary (logged once, counted in ``boundary_errors``) and closed, and the server goes on.
"""

from __future__ import annotations

import base64
import logging
import math
import secrets
from collections.abc import Sequence
from typing import Protocol

import attrs
import trio

from kubelet_trio.boundary import BoundaryErrors, contain
from kubelet_trio.cri import errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.streaming.portforward import PROTOCOL_V1, Forwarder, serve_port_forward
from kubelet_trio.cri.streaming.remotecommand import PROTOCOL_V4, Runner, serve_remote_command
from kubelet_trio.cri.streaming.spdy import SpdyConnection
from kubelet_trio.httpserver.asgi import App, HttpError, Request, Response, Route

__all__ = ["MAX_IN_FLIGHT", "TOKEN_TTL", "StreamingBackend", "StreamingServer"]

logger = logging.getLogger(__name__)

TOKEN_TTL = 60.0
MAX_IN_FLIGHT = 1000
PROTOCOL_HEADER = "x-stream-protocol-version"


class StreamingBackend(Protocol):
    """What the runtime does once a session is set up."""

    def exec_runner(self, request: pb.ExecRequest) -> Runner: ...

    def attach_runner(self, request: pb.AttachRequest) -> Runner: ...

    def forwarder(self, request: pb.PortForwardRequest) -> Forwarder: ...


Cached = pb.ExecRequest | pb.AttachRequest | pb.PortForwardRequest
_KINDS: dict[type, str] = {
    pb.ExecRequest: "exec",
    pb.AttachRequest: "attach",
    pb.PortForwardRequest: "portforward",
}


def _negotiate(request: Request, supported: Sequence[str]) -> str:
    offered = [
        item.strip()
        for name, value in request.headers
        if name == PROTOCOL_HEADER
        for item in value.split(",")
    ]
    for protocol in offered:
        if protocol in supported:
            return protocol
    raise HttpError(
        403,
        f"unable to upgrade: unable to negotiate protocol: client supports {offered}, server supports"
        f" {list(supported)}",
    )


@attrs.define(eq=False)
class StreamingServer:
    """Start with ``await nursery.start(server.run)``; then the ``get_*`` methods hand out URLs."""

    backend: StreamingBackend
    address: str = "127.0.0.1"
    idle_timeout: float = 4 * 3600.0
    base_url: str = ""
    #: Sessions being served right now (for tests: all end with their connection).
    active: int = 0
    #: Where sessions that failed are counted (None: only logged).
    boundary_errors: BoundaryErrors | None = None
    _cache: dict[str, tuple[float, Cached]] = attrs.Factory(dict)

    async def run(self, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        from kubelet_trio.httpserver.http11 import HttpServer  # h11: only once streaming is served

        listeners = await trio.open_tcp_listeners(0, host=self.address)
        host, port = listeners[0].socket.getsockname()[:2]
        self.base_url = f"http://{host}:{port}" if ":" not in host else f"http://[{host}]:{port}"
        app = App(
            [
                Route("/exec/{token}", self._handle, ("GET", "POST")),
                Route("/attach/{token}", self._handle, ("GET", "POST")),
                Route("/portforward/{token}", self._handle, ("GET", "POST")),
            ]
        )
        async with trio.open_nursery() as nursery:
            server = HttpServer(app, errors=self.boundary_errors, log_path=_without_token)
            await nursery.start(server.run, listeners)
            task_status.started(self.base_url)

    # -- the CRI side ------------------------------------------------------------------------------

    def _insert(self, op: str, kind: str, request: Cached) -> str:
        if not self.base_url:
            raise errors.CriCallError(op, "streaming server is not running")
        now = trio.current_time()
        for token in [t for t, (expires, _) in self._cache.items() if expires <= now]:
            del self._cache[token]
        if len(self._cache) >= MAX_IN_FLIGHT:
            raise errors.CriCallError(
                op, "maximum number of in-flight requests exceeded", code="RESOURCE_EXHAUSTED"
            )
        token = base64.urlsafe_b64encode(secrets.token_bytes(8)).decode().rstrip("=")
        self._cache[token] = (now + TOKEN_TTL, request)
        return f"{self.base_url}/{kind}/{token}"

    def get_exec(self, request: pb.ExecRequest) -> str:
        if not request.container_id:
            raise errors.InvalidArgumentError("Exec", "missing required container_id")
        if request.tty and request.stderr:
            raise errors.InvalidArgumentError("Exec", "tty and stderr cannot both be true")
        if not (request.stdin or request.stdout or request.stderr):
            raise errors.InvalidArgumentError("Exec", "one of stdin, stdout, or stderr must be set")
        return self._insert("Exec", "exec", request)

    def get_attach(self, request: pb.AttachRequest) -> str:
        if not request.container_id:
            raise errors.InvalidArgumentError("Attach", "missing required container_id")
        if request.tty and request.stderr:
            raise errors.InvalidArgumentError("Attach", "tty and stderr cannot both be true")
        if not (request.stdin or request.stdout or request.stderr):
            raise errors.InvalidArgumentError("Attach", "one of stdin, stdout, and stderr must be set")
        return self._insert("Attach", "attach", request)

    def get_port_forward(self, request: pb.PortForwardRequest) -> str:
        if not request.pod_sandbox_id:
            raise errors.InvalidArgumentError("PortForward", "missing required pod_sandbox_id")
        return self._insert("PortForward", "portforward", request)

    # -- the HTTP side -----------------------------------------------------------------------------

    async def _handle(self, request: Request) -> Response:
        found = self._cache.pop(request.params["token"], None)
        if found is None or found[0] <= trio.current_time():
            raise HttpError(404, "404 page not found")
        cached = found[1]
        upgrade = (request.header("upgrade") or "").lower()
        if upgrade == "websocket":
            raise HttpError(400, "unable to upgrade: WebSocket streaming is not supported, use SPDY/3.1")
        if upgrade != "spdy/3.1" or not request.can_upgrade:
            raise HttpError(400, "unable to upgrade: missing upgrade headers in request")
        kind = request.path.split("/")[1]
        expected_kind = {
            pb.ExecRequest: "exec",
            pb.AttachRequest: "attach",
            pb.PortForwardRequest: "portforward",
        }
        if expected_kind[type(cached)] != kind:
            raise HttpError(404, "404 page not found")
        protocol = _negotiate(request, [PROTOCOL_V1] if kind == "portforward" else [PROTOCOL_V4])

        async def session(stream: trio.abc.Stream) -> None:
            await self._session(stream, protocol, cached)

        return Response(upgrade=session)

    async def _session(self, stream: trio.abc.Stream, protocol: str, cached: Cached) -> None:
        self.active += 1
        target = cached.pod_sandbox_id if isinstance(cached, pb.PortForwardRequest) else cached.container_id
        try:
            with contain("streaming", self.boundary_errors, kind=_KINDS[type(cached)], target=target):
                await self._run_session(stream, protocol, cached)
        finally:
            self.active -= 1
            with trio.move_on_after(1, shield=True):
                await trio.aclose_forcefully(stream)

    async def _run_session(self, stream: trio.abc.Stream, protocol: str, cached: Cached) -> None:
        limit = self.idle_timeout if self.idle_timeout > 0 else math.inf
        try:
            await stream.send_all(
                b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
                + f"X-Stream-Protocol-Version: {protocol}\r\n\r\n".encode()
            )
            connection = SpdyConnection(_IdleStream(stream, limit))
            async with trio.open_nursery() as nursery:

                async def read_frames() -> None:
                    await connection.run()
                    nursery.cancel_scope.cancel()  # the client is gone: so is the session

                nursery.start_soon(read_frames)
                await self._serve(connection, cached)
                with trio.move_on_after(1):
                    await connection.goaway()
                nursery.cancel_scope.cancel()
        except* (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError):
            pass  # the client went away (from the session's nursery, so in a group)

    async def _serve(self, connection: SpdyConnection, cached: Cached) -> None:
        if isinstance(cached, pb.ExecRequest):
            await serve_remote_command(
                connection,
                stdin=cached.stdin,
                stdout=cached.stdout,
                stderr=cached.stderr,
                tty=cached.tty,
                run=self.backend.exec_runner(cached),
            )
        elif isinstance(cached, pb.AttachRequest):
            await serve_remote_command(
                connection,
                stdin=cached.stdin,
                stdout=cached.stdout,
                stderr=cached.stderr,
                tty=cached.tty,
                run=self.backend.attach_runner(cached),
            )
        else:
            await serve_port_forward(connection, self.backend.forwarder(cached), cached.pod_sandbox_id)


class _IdleStream(trio.abc.Stream):
    """The session's connection, failing with ``trio.TooSlowError`` when nothing was received for
    ``limit`` seconds (``streamingConnectionIdleTimeout``)."""

    def __init__(self, stream: trio.abc.Stream, limit: float) -> None:
        self.stream = stream
        self.limit = limit

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        with trio.fail_after(self.limit):
            return await self.stream.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.stream.aclose()


def _without_token(path: str) -> str:
    """``/exec/<token>`` as logged: a token is a session's only credential."""
    return path.rpartition("/")[0] + "/<token>"
