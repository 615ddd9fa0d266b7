"""Connect/close cycles on real loopback sockets leave no file descriptor behind (counts, not timings;
``bench/http_connections.py`` measures 10 000 cycles and the memory)."""

from __future__ import annotations

import os

import trio
import trio.testing

from kubelet_trio.boundary import BoundaryErrors
from kubelet_trio.httpserver.http11 import HttpServer
from tests.httpserver.wire import CLOSING_GET, counting_app, read_to_eof

CYCLES = 300


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_connect_close_cycles_leave_no_descriptor_behind() -> None:
    calls: list[str] = []
    errors = BoundaryErrors()
    closed = 0
    all_closed = trio.Event()

    def on_close(client: tuple[str, int] | None) -> None:
        nonlocal closed
        closed += 1
        if closed == 3 * CYCLES:
            all_closed.set()

    server = HttpServer(counting_app(calls), errors=errors, on_close=on_close)
    with trio.fail_after(60):
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run, listeners)
            before = open_fds()
            for _ in range(CYCLES):
                silent = await trio.open_tcp_stream("127.0.0.1", port)  # connects and goes
                await silent.aclose()
                asking = await trio.open_tcp_stream("127.0.0.1", port)
                await asking.send_all(CLOSING_GET)
                assert (await read_to_eof(asking)).endswith(b"ok")
                await asking.aclose()
                cut = await trio.open_tcp_stream("127.0.0.1", port)  # goes mid-head
                await cut.send_all(b"GET /ok HTTP/1.1\r\nHo")
                await cut.aclose()
            await all_closed.wait()
            await trio.testing.wait_all_tasks_blocked()
            assert open_fds() <= before
            assert server.connections == 0
            nursery.cancel_scope.cancel()
    assert len(calls) == CYCLES
    assert not errors.counts
