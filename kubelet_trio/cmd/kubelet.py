"""``kubelet-trio [flags]``: run a node until SIGTERM/SIGINT (Go: ``cmd/kubelet``).

Standalone mode: pods come from a manifest directory and/or a manifest URL; the runtime is containerd (or
any CRI runtime) at ``--container-runtime-endpoint``, or the built-in simulated runtime with
``--runtime sim``. On SIGTERM or SIGINT the node stops and leaves its pods running, like the Go kubelet;
a new process over the same runtime and manifests adopts them.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import trio

from kubelet_trio.config.file import FILE_CHECK_FREQUENCY, FileSource
from kubelet_trio.config.http import HTTP_CHECK_FREQUENCY, HttpSource, parse_manifest_url_headers
from kubelet_trio.config.podconfig import PodConfig
from kubelet_trio.config.types import FILE_SOURCE, HTTP_SOURCE
from kubelet_trio.cri.remote import DEFAULT_REQUEST_TIMEOUT, open_cri_runtime
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.kubelet import Kubelet, KubeletConfig, PodSource

logger = logging.getLogger("kubelet_trio")

DEFAULT_ENDPOINT = "unix:///run/containerd/containerd.sock"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubelet-trio",
        description="A Kubernetes node agent on Trio. Runs pods from manifests until SIGTERM/SIGINT.",
        epilog="Other commands: kubelet-trio {demo,sim-cri,check-manifests} --help",
    )
    pods = parser.add_argument_group("pod sources")
    pods.add_argument(
        "--pod-manifest-path", metavar="PATH", help="directory (or file) of static pod manifests"
    )
    pods.add_argument("--manifest-url", metavar="URL", help="URL serving a Pod, PodList or List")
    pods.add_argument(
        "--manifest-url-header",
        metavar="KEY:VALUE",
        action="append",
        default=[],
        help="HTTP header for --manifest-url (repeatable; 'Key:v1,v2')",
    )
    pods.add_argument("--file-check-frequency", type=float, default=FILE_CHECK_FREQUENCY, metavar="SECONDS")
    pods.add_argument("--http-check-frequency", type=float, default=HTTP_CHECK_FREQUENCY, metavar="SECONDS")

    runtime = parser.add_argument_group("container runtime")
    runtime.add_argument(
        "--runtime", choices=["cri", "sim"], default="cri", help="cri (default) or the simulator"
    )
    runtime.add_argument("--container-runtime-endpoint", default=DEFAULT_ENDPOINT, metavar="unix:///SOCKET")
    runtime.add_argument("--image-service-endpoint", default=None, metavar="unix:///SOCKET")
    runtime.add_argument(
        "--runtime-request-timeout", type=float, default=DEFAULT_REQUEST_TIMEOUT, metavar="SECONDS"
    )

    node = parser.add_argument_group("node")
    node.add_argument("--hostname-override", metavar="NAME", help="node name (default: the hostname)")
    node.add_argument("--node-ip", metavar="IP", help="the node's IP address")
    node.add_argument("--root-dir", default="/var/lib/kubelet", metavar="DIR")
    node.add_argument("--pod-logs-dir", default="/var/log/pods", metavar="DIR", help="container logs root")
    node.add_argument("--sync-frequency", type=float, default=60.0, metavar="SECONDS")

    logs = parser.add_argument_group("logging")
    logs.add_argument("--v", type=int, default=0, metavar="LEVEL", help="verbosity (0-10)")
    return parser


def node_name(args: argparse.Namespace) -> str:
    return (args.hostname_override or socket.gethostname()).lower()


def build_sources(args: argparse.Namespace, name: str) -> tuple[PodConfig, list[PodSource]]:
    names = ([FILE_SOURCE] if args.pod_manifest_path else []) + ([HTTP_SOURCE] if args.manifest_url else [])
    pod_config = PodConfig(sources=tuple(names))
    sources: list[PodSource] = []
    if args.pod_manifest_path:
        sources.append(
            FileSource(
                args.pod_manifest_path,
                name,
                pod_config.source_channel(FILE_SOURCE),
                check_period=args.file_check_frequency,
            )
        )
    if args.manifest_url:
        sources.append(
            HttpSource(
                args.manifest_url,
                name,
                pod_config.source_channel(HTTP_SOURCE),
                headers=parse_manifest_url_headers(args.manifest_url_header),
                check_period=args.http_check_frequency,
            )
        )
    return pod_config, sources


@contextlib.asynccontextmanager
async def open_runtime(args: argparse.Namespace) -> AsyncIterator[Runtime]:
    if args.runtime == "sim":
        from kubelet_trio.sim.runtime import SimRuntime

        yield SimRuntime()
        return
    async with open_cri_runtime(
        args.container_runtime_endpoint,
        args.image_service_endpoint,
        request_timeout=args.runtime_request_timeout,
    ) as runtime:
        yield runtime


def configure_logging(verbosity: int) -> None:
    level = logging.DEBUG if verbosity >= 4 else logging.INFO
    logging.basicConfig(
        level=level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname).1s %(name)s] %(message)s",
    )


async def serve(args: argparse.Namespace) -> int:
    name = node_name(args)
    pod_config, sources = build_sources(args, name)
    config = KubeletConfig(
        node_name=name,
        pod_logs_dir=args.pod_logs_dir,
        root_dir=args.root_dir,
        node_ips=(args.node_ip,) if args.node_ip else (),
        sync_frequency=args.sync_frequency,
    )
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with open_runtime(args) as runtime, trio.open_nursery() as nursery:
            kubelet = Kubelet(config, runtime, pod_config, sources)
            await nursery.start(kubelet.run)
            async for signum in signals:
                logger.info("received %s, stopping (pods are left running)", signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break
    return 0


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if not args.pod_manifest_path and not args.manifest_url:
        print("kubelet-trio: no pod source: give --pod-manifest-path and/or --manifest-url", file=sys.stderr)
        return 2
    if args.pod_manifest_path and not Path(args.pod_manifest_path).exists():
        print(
            f"kubelet-trio: warning: --pod-manifest-path {args.pod_manifest_path} does not exist (yet)",
            file=sys.stderr,
        )
    configure_logging(args.v)
    return trio.run(serve, args)
