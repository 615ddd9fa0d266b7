"""httpGet probes: CPU per probe of the prober's client (h11, ``kubelet_trio.client.http1.Get``) against
httpx, the client it replaced. Prints JSON.

A server in another process (so its CPU is not counted) answers every request with a small body and
closes the connection, as a container's health endpoint does for a probe that sent ``Connection:
close``. This process runs probes one at a time and in bursts of ``--concurrency`` (pods probed at the
same second), through:

- ``h11``: :class:`kubelet_trio.prober.probe.http.HttpProbe`, the prober's code path;
- ``httpx``: the code this replaced: one shared ``httpx.AsyncClient`` (no certificate checks, no
  keep-alive, no redirects of its own), the same-host redirect loop and the 10 KiB body read;
- ``floor``: no HTTP at all: connect (and TLS), send a fixed request, read to the end, close. What is left
  of a probe once its HTTP is free.

Rounds alternate between the clients; each figure is the median over rounds of this process's CPU time
per probe (µs). ``--tls`` serves HTTPS (a throwaway certificate, not verified: ``scheme: HTTPS``).

Usage: python bench/probe_transport.py [--rounds 5] [--probes 600] [--concurrency 30] [--tls]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from kubelet_trio.api import Container, HTTPGetAction
from kubelet_trio.prober.probe import Result
from kubelet_trio.prober.probe.http import HttpProbe, HttpRequest, request_for_action
from kubelet_trio.prober.probe.result import MAX_OUTPUT_LENGTH

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"

Probe = Callable[[], Awaitable[tuple[Result, str]]]


# -- the server (a child process) --------------------------------------------------------------------


async def serve(port_file: str, cert: str | None, key: str | None) -> None:
    async def handle(stream: trio.abc.Stream) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            async with stream:
                buffer = b""
                while b"\r\n\r\n" not in buffer:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    buffer += data
                await stream.send_all(ANSWER)

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1", backlog=1024)
    await trio.Path(port_file).write_text(str(listeners[0].socket.getsockname()[1]))
    if cert and key:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        ssl_listeners = [trio.SSLListener(lis, context, https_compatible=True) for lis in listeners]
        await trio.serve_listeners(handle, ssl_listeners)
    await trio.serve_listeners(handle, listeners)


# -- the clients -------------------------------------------------------------------------------------


def h11_probe(request: HttpRequest) -> Probe:
    async def probe() -> tuple[Result, str]:
        return await HttpProbe(request).run()

    return probe


def floor_probe(port: int, tls: bool) -> Probe:
    request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE

    async def probe() -> tuple[Result, str]:
        stream: trio.abc.Stream = await trio.open_tcp_stream("127.0.0.1", port)
        if tls:
            stream = trio.SSLStream(stream, context, https_compatible=True)
        async with stream:
            await stream.send_all(request)
            answer = b""
            while data := await stream.receive_some(65536):
                answer += data
        return (Result.SUCCESS, "ok") if answer.endswith(b"ok") else (Result.FAILURE, "")

    return probe


@contextlib.asynccontextmanager
async def httpx_probe(request: HttpRequest) -> Any:
    """The replaced code: ``new_client()`` shared by the probe manager, ``http_get`` and ``http_probe``."""
    import httpx

    async with httpx.AsyncClient(
        verify=False,
        trust_env=False,
        follow_redirects=False,
        timeout=None,
        limits=httpx.Limits(max_keepalive_connections=0),
    ) as client:
        url, fields = request
        headers = dict(fields)
        first_host = httpx.URL(url).host

        async def get_once(target: str) -> tuple[httpx.Response, bytes]:
            async with client.stream("GET", target, headers=headers) as response:
                body = b""
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) >= MAX_OUTPUT_LENGTH:
                        body = body[:MAX_OUTPUT_LENGTH]
                        break
            return response, body

        async def probe() -> tuple[Result, str]:
            current = url
            for _ in range(11):
                response, body = await get_once(current)
                if not response.has_redirect_location or response.next_request is None:
                    break
                if response.next_request.url.host != first_host:
                    break
                current = str(response.next_request.url)
            text = body.decode("utf-8", "replace")
            if 200 <= response.status_code < 300:
                return Result.SUCCESS, text
            return Result.FAILURE, f"HTTP probe failed with statuscode: {response.status_code}"

        yield probe


async def burst_round(probe: Probe, probes: int, concurrency: int) -> float:
    """CPU seconds of this process for ``probes`` probes, ``concurrency`` at a time."""
    started = time.process_time()
    for _ in range(probes // concurrency):
        async with trio.open_nursery() as nursery:
            for _ in range(concurrency):
                nursery.start_soon(probe)
    return time.process_time() - started


async def run(args: argparse.Namespace, port: int) -> dict[str, Any]:
    scheme = "HTTPS" if args.tls else "HTTP"
    action = HTTPGetAction.from_dict({"port": port, "path": "/healthz", "scheme": scheme})
    request = request_for_action(action, Container(name="app"), "127.0.0.1")
    figures: dict[str, dict[str, list[float]]] = {"one at a time": {}, f"bursts of {args.concurrency}": {}}
    async with httpx_probe(request) as old:
        clients = {"h11": h11_probe(request), "httpx": old, "floor": floor_probe(port, args.tls)}
        for probe in clients.values():  # warm up: imports, TLS contexts
            assert await probe() == (Result.SUCCESS, "ok")
        for _ in range(args.rounds):
            for name, probe in clients.items():
                for mode, concurrency in (
                    ("one at a time", 1),
                    (f"bursts of {args.concurrency}", args.concurrency),
                ):
                    seconds = await burst_round(probe, args.probes, concurrency)
                    figures[mode].setdefault(name, []).append(seconds / args.probes * 1e6)
    return {
        "cpu_us_per_probe": {
            mode: {name: round(statistics.median(v), 1) for name, v in by_name.items()}
            for mode, by_name in figures.items()
        },
        "cpu_us_per_probe_rounds": {
            mode: {name: [round(x, 1) for x in v] for name, v in by_name.items()}
            for mode, by_name in figures.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--probes", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=30)
    parser.add_argument("--tls", action="store_true")
    parser.add_argument("--serve", default="", help=argparse.SUPPRESS)
    parser.add_argument("--cert", default="", help=argparse.SUPPRESS)
    parser.add_argument("--key", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        trio.run(serve, args.serve, args.cert or None, args.key or None)
        return
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, __file__, "--serve", f"{tmp}/port"]
        if args.tls:
            import trustme

            leaf = trustme.CA().issue_cert("127.0.0.1")
            leaf.private_key_pem.write_to_path(f"{tmp}/key.pem")
            leaf.cert_chain_pems[0].write_to_path(f"{tmp}/cert.pem")
            command += ["--cert", f"{tmp}/cert.pem", "--key", f"{tmp}/key.pem"]
        server = subprocess.Popen(command)
        try:
            while not Path(f"{tmp}/port").exists() or not Path(f"{tmp}/port").read_text():
                time.sleep(0.05)
            result = trio.run(run, args, int(Path(f"{tmp}/port").read_text()))
        finally:
            server.terminate()
            server.wait()
    result["settings"] = {
        "rounds": args.rounds,
        "probes": args.probes,
        "concurrency": args.concurrency,
        "tls": args.tls,
        "python": sys.version.split()[0],
        "load_average_at_end": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
