"""The API client's HTTP/1.1 transport against httpx: CPU per request. Prints JSON.

A server in another process (a raw keep-alive HTTP/1.1 loop, so its CPU is not counted) answers every
request with a pod's worth of JSON (2 KB). This process sends status-PATCH-like requests (the kubelet's
headers, a 300-byte merge patch) in bursts of ``--concurrency`` at once, ``--requests`` per round, through:

- ``http1``: :class:`kubelet_trio.client.http1.Http1Pool` (h11 on Trio streams, the API client's transport);
- ``httpx``: ``httpx.AsyncClient`` with a keep-alive pool as large as the API client's (48);
- ``http1_old`` (with ``--old-http1 FILE``): another version of ``http1.py``, such as the hand-written
  parser this one replaced (``git show <rev>:kubelet_trio/client/http1.py > FILE``).

Rounds alternate between the clients; each figure is the median over rounds of this process's CPU time
per request (µs), with the connections each client opened. ``--tls`` puts TLS (a throwaway CA) on every
connection; ``--hold-fds N`` opens N descriptors on /dev/null first, so that the client's sockets are
numbered above 1 024 (where ``select()`` fails).

Usage: python bench/api_client_transport.py [--rounds 5] [--requests 2000] [--concurrency 30] [--tls]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import resource
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import trio

from kubelet_trio.client import http1

POD = json.dumps(
    {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"name": "web-0", "namespace": "bench", "uid": "0" * 36, "resourceVersion": "12345"},
        "spec": {"containers": [{"name": "app", "image": "busybox", "command": ["sh", "-c", "x" * 1200]}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}] * 4},
    }
).encode()
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%b" % (
    len(POD),
    POD,
)
PATCH = json.dumps({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "x" * 200}]}})
PATH = "/api/v1/namespaces/bench/pods/web-0/status"
HEADERS = {
    "Accept": "application/json",
    "User-Agent": "kubelet-trio/bench (linux/amd64)",
    "Content-Type": "application/merge-patch+json",
    "Authorization": "Bearer " + "t" * 40,
}

Send = Callable[[], Awaitable[bytes]]


# -- the server (a child process) --------------------------------------------------------------------


async def serve(port_file: str, cert: str | None, key: str | None) -> None:
    context = None
    if cert and key:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)

    async def handle(stream: trio.abc.Stream) -> None:
        buffer = b""
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            async with stream:
                while True:
                    end = buffer.find(b"\r\n\r\n")
                    while end < 0:
                        data = await stream.receive_some(65536)
                        if not data:
                            return
                        buffer += data
                        end = buffer.find(b"\r\n\r\n")
                    head = buffer[:end].lower()
                    at = head.find(b"content-length:")
                    length = int(head[at + 15 :].split(b"\r\n", 1)[0]) if at >= 0 else 0
                    while len(buffer) < end + 4 + length:
                        buffer += await stream.receive_some(65536)
                    buffer = buffer[end + 4 + length :]
                    await stream.send_all(ANSWER)

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    await trio.Path(port_file).write_text(str(listeners[0].socket.getsockname()[1]))
    if context is not None:
        ssl_listeners = [trio.SSLListener(lis, context, https_compatible=True) for lis in listeners]
        await trio.serve_listeners(handle, ssl_listeners)
    await trio.serve_listeners(handle, listeners)


# -- the clients -------------------------------------------------------------------------------------


def load_module(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("http1_other", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.asynccontextmanager
async def pool_client(module: Any, port: int, context: ssl.SSLContext | None) -> Any:
    pool = module.Http1Pool("127.0.0.1", port, context, max_idle=48)
    body = PATCH.encode()

    async def send() -> bytes:
        response = await pool.request("PATCH", PATH, HEADERS.items(), body)
        return bytes(response.content)

    try:
        yield send, lambda: pool.opened
    finally:
        await pool.aclose()


@contextlib.asynccontextmanager
async def httpx_client(port: int, context: ssl.SSLContext | None) -> Any:
    import httpx

    scheme = "https" if context is not None else "http"
    limits = httpx.Limits(max_keepalive_connections=48, keepalive_expiry=60.0)
    opened = 0

    async def count(_request: httpx.Request) -> None:
        nonlocal opened  # a rough count: the connections are httpcore's
        opened = max(opened, len(client._transport._pool.connections))  # type: ignore[attr-defined]

    async with httpx.AsyncClient(
        base_url=f"{scheme}://127.0.0.1:{port}",
        verify=context if context is not None else True,
        limits=limits,
        timeout=None,
        trust_env=False,
        event_hooks={"request": [count]},
    ) as client:
        body = PATCH.encode()

        async def send() -> bytes:
            response = await client.request("PATCH", PATH, content=body, headers=HEADERS)
            return response.content

        yield send, lambda: opened


async def burst_round(send: Send, requests: int, concurrency: int) -> float:
    """CPU seconds of this process for ``requests`` requests, ``concurrency`` at a time."""
    started = time.process_time()
    for _ in range(requests // concurrency):
        async with trio.open_nursery() as nursery:
            for _ in range(concurrency):
                nursery.start_soon(send)
    return time.process_time() - started


async def run(args: argparse.Namespace, port: int, context: ssl.SSLContext | None) -> dict[str, Any]:
    makers: dict[str, Callable[[], Any]] = {
        "http1": lambda: pool_client(http1, port, context),
        "httpx": lambda: httpx_client(port, context),
    }
    if args.old_http1:
        old = load_module(args.old_http1)
        makers["http1_old"] = lambda: pool_client(old, port, context)
    cpu: dict[str, list[float]] = {name: [] for name in makers}
    connections: dict[str, int] = {}
    async with contextlib.AsyncExitStack() as stack:
        clients = {name: await stack.enter_async_context(make()) for name, make in makers.items()}
        for send, _opened in clients.values():  # warm up: connections, imports
            assert await send() == POD
            await burst_round(send, args.concurrency, args.concurrency)
        for _ in range(args.rounds):
            for name, (send, _opened) in clients.items():
                seconds = await burst_round(send, args.requests, args.concurrency)
                cpu[name].append(seconds / args.requests * 1e6)
        for name, (_send, opened) in clients.items():
            connections[name] = opened()
    return {
        "cpu_us_per_request": {name: round(statistics.median(v), 1) for name, v in cpu.items()},
        "cpu_us_per_request_rounds": {name: [round(x, 1) for x in v] for name, v in cpu.items()},
        "connections_opened": connections,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=30)
    parser.add_argument("--tls", action="store_true")
    parser.add_argument("--hold-fds", type=int, default=0)
    parser.add_argument("--old-http1", default="")
    parser.add_argument("--serve", default="", help=argparse.SUPPRESS)
    parser.add_argument("--cert", default="", help=argparse.SUPPRESS)
    parser.add_argument("--key", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        trio.run(serve, args.serve, args.cert or None, args.key or None)
        return
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, __file__, "--serve", f"{tmp}/port"]
        context = None
        if args.tls:
            import trustme

            ca = trustme.CA()
            leaf = ca.issue_cert("127.0.0.1")
            leaf.private_key_pem.write_to_path(f"{tmp}/key.pem")
            leaf.cert_chain_pems[0].write_to_path(f"{tmp}/cert.pem")
            command += ["--cert", f"{tmp}/cert.pem", "--key", f"{tmp}/key.pem"]
            context = ssl.create_default_context()
            ca.configure_trust(context)
        server = subprocess.Popen(command)
        held: list[int] = []
        try:
            while not Path(f"{tmp}/port").exists() or not Path(f"{tmp}/port").read_text():
                time.sleep(0.05)
            port = int(Path(f"{tmp}/port").read_text())
            if args.hold_fds:
                soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
                resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, args.hold_fds + 512), hard))
                held = [os.open(os.devnull, os.O_RDONLY) for _ in range(args.hold_fds)]
            result = trio.run(run, args, port, context)
        finally:
            for fd in held:
                os.close(fd)
            server.terminate()
            server.wait()
    result["settings"] = {
        "rounds": args.rounds,
        "requests": args.requests,
        "concurrency": args.concurrency,
        "tls": args.tls,
        "hold_fds": args.hold_fds,
        "python": sys.version.split()[0],
        "load_average_at_end": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
