"""Tiny in-process servers on 127.0.0.1 for probe and hook tests (real sockets, Trio's real clock)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from functools import partial

import attrs
import trio

Route = tuple[int, dict[str, str], bytes]  # status, headers, body


@attrs.define
class HttpServer:
    port: int
    routes: dict[str, Route | Callable[[], Route]] = attrs.Factory(dict)
    requests: list[tuple[str, dict[str, str]]] = attrs.Factory(list)  # (path, lowercased headers)
    delay: float = 0.0

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


async def _handle(server: HttpServer, stream: trio.SocketStream) -> None:
    async with stream:
        data = b""
        with trio.move_on_after(5):
            while b"\r\n\r\n" not in data:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    return
                data += chunk
        head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        _method, target, _ = head[0].split(" ", 2)
        headers = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        server.requests.append((target, headers))
        if server.delay:
            await trio.sleep(server.delay)
        route = server.routes.get(target.split("?", 1)[0], (404, {}, b"not found"))
        status, extra, body = route() if callable(route) else route
        lines = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", "Connection: close"]
        lines += [f"{k}: {v}" for k, v in extra.items()]
        with contextlib.suppress(trio.BrokenResourceError):
            await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode() + body)


@contextlib.asynccontextmanager
async def http_server(
    routes: dict[str, Route | Callable[[], Route]] | None = None,
) -> AsyncIterator[HttpServer]:
    async with trio.open_nursery() as nursery:
        server = HttpServer(0, dict(routes or {}))
        listeners = await nursery.start(
            partial(trio.serve_tcp, partial(_handle, server), 0, host="127.0.0.1")
        )
        server.port = listeners[0].socket.getsockname()[1]
        yield server
        nursery.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def tcp_listener() -> AsyncIterator[int]:
    """A port that accepts connections (and closes them)."""

    async def close(stream: trio.SocketStream) -> None:
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, close, 0, host="127.0.0.1"))
        yield listeners[0].socket.getsockname()[1]
        nursery.cancel_scope.cancel()


def closed_port() -> int:
    """A port nothing listens on (bound then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
