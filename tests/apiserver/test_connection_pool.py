"""The API client's keep-alive pool against a small HTTP/1.1 server over TLS that counts connections."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import attrs
import httpx
import pytest
import trio
import trustme

from kubelet_trio.client.pool import KeepAlivePool, keep_alive_transport


@attrs.define
class CountingServer:
    """``/ok`` answers; ``/close`` answers with ``Connection: close``; ``/hangup`` answers, then closes
    without saying so; ``/held`` answers once ``release`` is set."""

    connections: int = 0
    requests: int = 0
    held: int = 0
    release: trio.Event = attrs.Factory(trio.Event)

    async def handle(self, stream: trio.abc.Stream) -> None:
        self.connections += 1
        buffer = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffer:
                    chunk = await stream.receive_some(65536)
                    if not chunk:
                        return
                    buffer += chunk
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                path = head.split(b" ")[1].decode()
                self.requests += 1
                if path == "/held":
                    self.held += 1
                    await self.release.wait()
                close = "Connection: close\r\n" if path == "/close" else ""
                await stream.send_all(f"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n{close}\r\nok".encode())
                if path in ("/close", "/hangup"):
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return
        finally:
            await trio.aclose_forcefully(stream)


@asynccontextmanager
async def serve(ca: trustme.CA) -> AsyncIterator[tuple[str, CountingServer]]:
    server = CountingServer()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)

    async def handler(stream: trio.SocketStream) -> None:
        tls = trio.SSLStream(stream, context, server_side=True)
        with trio.move_on_after(20):
            try:
                await tls.do_handshake()
            except trio.BrokenResourceError:
                return
            await server.handle(tls)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        yield f"https://127.0.0.1:{port}", server
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def client(
    ca: trustme.CA, url: str, max_idle: int = 8
) -> AsyncIterator[tuple[httpx.AsyncClient, KeepAlivePool]]:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    transport = keep_alive_transport(context, max_idle=max_idle, keepalive_expiry=60)
    pool = transport._pool
    assert isinstance(pool, KeepAlivePool)
    async with httpx.AsyncClient(base_url=url, transport=transport) as http:
        yield http, pool


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


async def test_sequential_requests_share_one_connection(ca: trustme.CA) -> None:
    with trio.fail_after(20):
        async with serve(ca) as (url, server), client(ca, url) as (http, pool):
            for _ in range(5):
                assert (await http.get("/ok")).text == "ok"
    assert (server.connections, server.requests, pool.opened) == (1, 5, 1)


async def test_a_burst_opens_a_connection_per_request_and_keeps_them_for_the_next(ca: trustme.CA) -> None:
    with trio.fail_after(20):
        async with serve(ca) as (url, server), client(ca, url, max_idle=8) as (http, pool):

            async def burst(n: int) -> None:
                async with trio.open_nursery() as nursery:
                    for _ in range(n):
                        nursery.start_soon(http.get, "/held")
                    while server.held < n:  # noqa: ASYNC110 (the server counts, the test waits)
                        await trio.sleep(0.01)
                    server.release.set()
                server.release = trio.Event()
                server.held = 0

            await burst(6)
            assert (server.connections, len(pool.idle)) == (6, 6)
            await burst(6)  # all six reused
            assert server.connections == 6
            await burst(10)  # six reused, four new; eight kept
            assert (server.connections, pool.opened, len(pool.idle)) == (10, 10, 8)


async def test_a_connection_the_server_closes_is_not_reused(ca: trustme.CA) -> None:
    with trio.fail_after(20):
        async with serve(ca) as (url, server), client(ca, url) as (http, pool):
            assert (await http.get("/close")).text == "ok"  # says so: not kept
            assert pool.idle == []
            assert (await http.get("/hangup")).text == "ok"  # does not say so: found closed
            await trio.sleep(0.2)
            assert (await http.get("/ok")).text == "ok"
    assert (server.connections, pool.opened) == (3, 3)


async def test_a_request_cancelled_in_flight_closes_its_connection(ca: trustme.CA) -> None:
    with trio.fail_after(20):
        async with serve(ca) as (url, server), client(ca, url) as (http, pool):
            with trio.move_on_after(0.5):
                await http.get("/held")
            assert server.held == 1 and pool.idle == []
            server.release.set()
            assert (await http.get("/ok")).text == "ok"
    assert (server.connections, pool.opened) == (2, 2)
