"""An idle connection outlives the kubelet's 10 s periods (lease, node status): the next request reuses
it instead of paying a new TCP (and, against a real API server, TLS) handshake. Real time, for the sake
of the server on loopback (tests/apiserver/test_http1.py checks the expiry itself on Trio's clock)."""

from __future__ import annotations

import functools

import trio

from kubelet_trio.client import IDLE_CONNECTION_TIMEOUT, open_api_client

#: Longer than httpx's default keep-alive expiry (5 s), well below ours.
PAUSE = 6.0


async def test_an_idle_connection_is_reused_after_the_default_expiry() -> None:
    assert PAUSE < IDLE_CONNECTION_TIMEOUT
    accepted = 0

    async def handle(stream: trio.SocketStream) -> None:
        nonlocal accepted
        accepted += 1
        buffer = b""
        async with stream:
            while True:
                data = await stream.receive_some(65536)
                if not data:
                    return
                buffer += data
                while b"\r\n\r\n" in buffer:
                    _, buffer = buffer.split(b"\r\n\r\n", 1)  # bodiless GETs: the head is the request
                    await stream.send_all(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
                    )

    async with trio.open_nursery() as nursery:
        [listener] = await nursery.start(functools.partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
        port = listener.socket.getsockname()[1]
        async with open_api_client(server=f"http://127.0.0.1:{port}", qps=0) as client:
            assert await client.get("/api/v1/namespaces/default/pods/a") == {}
            await trio.sleep(PAUSE)
            assert await client.get("/api/v1/namespaces/default/pods/a") == {}
        assert accepted == 1
        nursery.cancel_scope.cancel()
