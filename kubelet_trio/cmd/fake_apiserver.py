"""``kubelet-trio fake-apiserver``: the test harness's fake Kubernetes API server as a process.

Serves :mod:`kubelet_trio.testing.fakeapi` over HTTP on ``--listen`` and writes a kubeconfig for it, so
``kubectl``, ``kubelet-trio --kubeconfig``, ``kubelet-trio sim-nodes`` or any other client can talk to it.
State is in memory only. Runs until SIGINT or SIGTERM, then exits 0.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

import trio

from kubelet_trio.logs import configure_logging, kv
from kubelet_trio.testing.fakeapi import open_served_fake_api

logger = logging.getLogger(__name__)

#: Watch history kept (events); a watch further behind is answered 410 Gone and relists.
HISTORY_LIMIT = 20_000


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    try:
        number = int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"port must be a number, got {port!r}") from None
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0-65535, got {number}")
    return host, number


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubelet-trio fake-apiserver",
        description="Serve an in-memory fake Kubernetes API server (pods, nodes, leases, events, configmaps, "
        "secrets, service accounts, runtime classes) for tests and demos.",
    )
    parser.add_argument(
        "--listen",
        type=_host_port,
        default=("127.0.0.1", 0),
        metavar="HOST:PORT",
        help="address to serve on (default 127.0.0.1:0, an ephemeral port)",
    )
    parser.add_argument(
        "--kubeconfig-out", required=True, type=Path, metavar="FILE", help="write a kubeconfig for it here"
    )
    parser.add_argument("--token", default=None, help="require this bearer token (written to the kubeconfig)")
    parser.add_argument(
        "--namespace",
        action="append",
        default=[],
        metavar="NAME",
        help="namespaces to create with their default ServiceAccount (repeatable; 'default' always is)",
    )
    parser.add_argument("--v", type=int, default=0, metavar="LEVEL", help="log verbosity")
    return parser


async def serve(args: argparse.Namespace) -> int:
    host, port = args.listen
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with open_served_fake_api(
            args.kubeconfig_out, host=host, port=port, token=args.token, history_limit=HISTORY_LIMIT
        ) as api:
            api.app.record_requests = False  # a long-running server keeps no request log
            for namespace in ["default", *args.namespace]:
                api.seed_namespace(namespace)
            logger.info("serving", extra=kv(url=api.url, kubeconfig=str(args.kubeconfig_out)))
            print(api.url, flush=True)  # for scripts: the address, once it accepts connections
            async for signum in signals:
                logger.info("stopping", extra=kv(signal=signal.Signals(signum).name))
                break
    return 0


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.v)
    try:
        return trio.run(serve, args)
    except KeyboardInterrupt:
        return 130
    except OSError as err:
        print(f"kubelet-trio fake-apiserver: {err.strerror or err}", file=sys.stderr)
        return 1
