"""Connect/close cycles against the kubelet's HTTP server on loopback: no descriptor or memory growth, and
the rate against a bare Trio TCP server. Prints JSON.

One cycle is a TCP connection to 127.0.0.1, to a server in this process, made by a client in this process
and, by mode: ``request``, a ``GET`` with ``Connection: close`` whose answer is read until the server
closes; ``silent``, closed at once without a byte (the server must notice and close its end); ``cut``,
half a request head and then closed. Cycles run one at a time (``--concurrency`` clients at once).

Servers: ``http11``, :class:`~kubelet_trio.httpserver.http11.HttpServer` serving a one-route
:class:`~kubelet_trio.httpserver.asgi.App`; ``floor``, ``trio.serve_listeners`` with a handler that reads
until the end of the head, writes a fixed response and returns: the least any server on Trio does.
Rounds interleave the two. Reported per server and mode: cycles/s (median over rounds), and over the
whole run after a warm-up, open descriptors (``/proc/self/fd``) and RSS before and after, each after the
server has closed every connection; ``ratio`` is http11 cycles/s over the floor's.

Usage: python bench/http_connections.py [--cycles 10000] [--warmup 500] [--rounds 3] [--concurrency 1]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from _common import proc_rss_mb

from kubelet_trio.boundary import BoundaryErrors
from kubelet_trio.httpserver.asgi import App, Request, Response, Route
from kubelet_trio.httpserver.http11 import HttpServer

HOST = "127.0.0.1"
REQUEST = b"GET /ok HTTP/1.1\r\nHost: kubelet\r\nConnection: close\r\n\r\n"
FLOOR_RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
MODES = ("request", "silent", "cut")

Handler = Callable[[trio.abc.Stream], Awaitable[None]]


class Tracker:
    """Counts a server's open connections, so that a measurement waits until it has closed them all."""

    def __init__(self) -> None:
        self.open = 0
        self._idle = trio.Event()

    def wrap(self, handler: Handler) -> Handler:
        async def tracked(stream: trio.abc.Stream) -> None:
            self.open += 1
            try:
                await handler(stream)
            finally:
                self.open -= 1
                if not self.open:
                    self._idle.set()

        return tracked

    async def wait_idle(self) -> None:
        while self.open:
            self._idle = trio.Event()
            await self._idle.wait()


async def floor_handler(stream: trio.abc.Stream) -> None:
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            data += chunk
        await stream.send_all(FLOOR_RESPONSE)
    except trio.BrokenResourceError:
        pass  # serve_listeners closes the stream


async def ok(request: Request) -> Response:
    return Response.text("ok")


async def cycle(port: int, mode: str) -> None:
    sock = trio.socket.socket()
    await sock.connect((HOST, port))
    stream = trio.SocketStream(sock)
    try:
        if mode == "request":
            await stream.send_all(REQUEST)
            answer = b""
            while chunk := await stream.receive_some(65536):
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(b"ok"), answer
        elif mode == "cut":
            await stream.send_all(REQUEST[:20])
    finally:
        await stream.aclose()


async def run_cycles(port: int, mode: str, count: int, concurrency: int) -> float:
    """Seconds for ``count`` cycles, ``concurrency`` clients at once."""

    async def client(n: int) -> None:
        for _ in range(n):
            await cycle(port, mode)

    t0 = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for i in range(concurrency):
            nursery.start_soon(client, count // concurrency + (i < count % concurrency))
    return time.perf_counter() - t0


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def bench(cycles: int, warmup: int, rounds: int, concurrency: int) -> dict[str, Any]:
    errors = BoundaryErrors()
    http11 = HttpServer(App([Route("/ok", ok)]), errors=errors)
    trackers = {"http11": Tracker(), "floor": Tracker()}
    handlers: dict[str, Handler] = {"http11": http11.handle, "floor": floor_handler}
    ports: dict[str, int] = {}
    rates: dict[str, dict[str, list[float]]] = {name: {m: [] for m in MODES} for name in handlers}
    async with trio.open_nursery() as nursery:
        for name, handler in handlers.items():
            listeners = await trio.open_tcp_listeners(0, host=HOST)
            ports[name] = listeners[0].socket.getsockname()[1]
            await nursery.start(trio.serve_listeners, trackers[name].wrap(handler), listeners)

        async def settle() -> None:
            for tracker in trackers.values():
                await tracker.wait_idle()
            gc.collect()

        for name in handlers:
            for mode in MODES:
                await run_cycles(ports[name], mode, warmup, concurrency)
        await settle()
        before = {"open_fds": fds(), "rss_mb": round(proc_rss_mb(os.getpid()), 1)}
        for _ in range(rounds):
            for name in handlers:
                for mode in MODES:
                    seconds = await run_cycles(ports[name], mode, cycles, concurrency)
                    await trackers[name].wait_idle()
                    rates[name][mode].append(cycles / seconds)
        await settle()
        after = {"open_fds": fds(), "rss_mb": round(proc_rss_mb(os.getpid()), 1)}
        nursery.cancel_scope.cancel()
    per_s = {
        name: {m: round(statistics.median(r)) for m, r in by_mode.items()} for name, by_mode in rates.items()
    }
    return {
        "cycles_per_round": cycles,
        "rounds": rounds,
        "concurrency": concurrency,
        "total_cycles": cycles * rounds * len(MODES) * len(handlers),
        "cycles_per_s": per_s,
        "ratio_http11_to_floor": {m: round(per_s["http11"][m] / per_s["floor"][m], 2) for m in MODES},
        "before": before,
        "after": after,
        "fd_growth": after["open_fds"] - before["open_fds"],
        "rss_growth_mb": round(after["rss_mb"] - before["rss_mb"], 1),
        "http11_open_connections_after": http11.connections,
        "boundary_errors": dict(errors.counts),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=10_000, help="per server, mode and round")
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=1)
    args = parser.parse_args()
    report = trio.run(bench, args.cycles, args.warmup, args.rounds, args.concurrency)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
