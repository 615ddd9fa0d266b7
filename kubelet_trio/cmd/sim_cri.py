"""``kubelet-trio sim-cri``: serve the simulated runtime as a CRI gRPC server on a unix socket.

Any CRI client can then drive it: ``crictl --runtime-endpoint unix:///tmp/sim.sock ps``, the Go
kubelet, or ``kubelet-trio`` itself. Runs until SIGINT or SIGTERM, then exits 0.

Its defaults are the CRI's answers, so that a CRI client's judge (cri-tools' critest) passes with no
flag but ``--listen``: StopContainer and StopPodSandbox of an unknown id succeed (the CRI asks stops to
be idempotent; containerd 1.7 and later answer so, 1.6 said NotFound: ``--containerd-1.6``), an absent
image takes a moment to pull (``DEFAULT_PULL_DELAY``), and pods get addresses of the host's loopback
network on which their containers' ports answer for real (``--pod-cidr``).
"""

from __future__ import annotations

import argparse
import functools
import ipaddress
import logging
import random
import signal
import sys

import trio

from kubelet_trio.cri.remote import socket_path
from kubelet_trio.logs import FieldsFormatter, kv
from kubelet_trio.sim.runtime import IMAGE_FS_MOUNTPOINT, SimRuntime
from kubelet_trio.sim.script import ScriptError, parse_script
from kubelet_trio.sim.server import serve_sim_cri

logger = logging.getLogger(__name__)

#: Seconds an absent image takes to pull: never instant, as no registry pull is (critest checks that a
#: 1 ms deadline ends a pull with DEADLINE_EXCEEDED), and quick for suites that pull hundreds.
DEFAULT_PULL_DELAY = 0.01


def loopback_pod_cidr() -> str:
    """The pod CIDR when none is given: a /16 of 127.0.0.0/8, all of which is the host's own on Linux, so
    that the pods' web servers and port-forward are reachable with no setup; picked at random (127.64 to
    127.254), so that two sim-cri at once rarely hand out the same addresses."""
    return f"127.{random.randint(64, 254)}.0.0/16"


def _socket_path(endpoint: str) -> str:
    try:
        return socket_path(endpoint)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _image_behaviour(text: str) -> tuple[str, str]:
    ref, sep, script = text.partition("=")
    if not sep or not ref:
        raise argparse.ArgumentTypeError(f"expected REF=SCRIPT, got {text!r}")
    try:
        parse_script(script)
    except ScriptError as err:
        raise argparse.ArgumentTypeError(f"{ref}: {err}") from None
    return ref, script


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text!r}")
    return value


def _cidr(text: str) -> str:
    try:
        return str(ipaddress.ip_network(text, strict=False))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubelet-trio sim-cri",
        description="Serve a simulated container runtime (scripted containers, no processes) over CRI.",
        epilog="Container behaviour scripts are documented in kubelet_trio.sim.script "
        "(e.g. 'print \"hello\"; exit 3 after 2s').",
    )
    parser.add_argument(
        "--listen", required=True, type=_socket_path, metavar="unix:///PATH", help="socket to serve on"
    )
    parser.add_argument(
        "--image-behaviour",
        action="append",
        default=[],
        type=_image_behaviour,
        metavar="REF=SCRIPT",
        help="default behaviour of containers of image REF (repeatable)",
    )
    parser.add_argument(
        "--pull-delay",
        type=_non_negative,
        default=DEFAULT_PULL_DELAY,
        metavar="SECONDS",
        help=f"how long each pull of an absent image takes (default: {DEFAULT_PULL_DELAY})",
    )
    parser.add_argument(
        "--preload",
        action="append",
        default=[],
        metavar="REF",
        help="image present without a pull (repeatable)",
    )
    parser.add_argument(
        "--containerd-1.6",
        dest="containerd_1_6",
        action="store_true",
        help="answer as containerd 1.6 where it departs from the CRI: StopContainer/StopPodSandbox of an "
        "unknown id fail with NotFound (default: they succeed, as the CRI asks and containerd 1.7+ answer)",
    )
    # What --containerd-1.6's absence now means; accepted so that command lines written for it still run.
    parser.add_argument("--idempotent-stops", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--image-fs-dir",
        default=IMAGE_FS_MOUNTPOINT,
        metavar="DIR",
        help="the image filesystem ImageFsInfo reports; a kubelet with cAdvisor (the Go kubelet) stats it, "
        "so serve one of those with an existing directory",
    )
    parser.add_argument(
        "--pod-cidr",
        type=_cidr,
        metavar="CIDR",
        help="give pods IPs from CIDR; their containers' listening ports (nginx, httpd, a script's "
        "'listen') are served on them for real, port-forward and mapped host ports included, so CIDR must "
        "be addresses this host owns (default: a random /16 of 127.0.0.0/8, e.g. 127.88.0.0/16)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log every CRI call")
    return parser


async def serve(sim: SimRuntime, socket_path: str) -> None:
    """Serve until SIGINT/SIGTERM, pods' ports included."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(functools.partial(serve_sim_cri, sim, socket_path, pod_network=True))
            logger.info("serving CRI on unix://%s", socket_path, extra=kv(pod_cidr=sim.pod_cidr))
            async for signum in signals:
                logger.info("shutting down", extra=kv(signal=signal.Signals(signum).name))
                nursery.cancel_scope.cancel()
                break


def simulator(args: argparse.Namespace) -> SimRuntime:
    """The SimRuntime the parsed command line asks for."""
    return SimRuntime(
        image_behaviours=dict(args.image_behaviour),
        pull_delay=args.pull_delay,
        preloaded_images=args.preload,
        stop_missing_ok=not args.containerd_1_6,
        image_fs_mountpoint=args.image_fs_dir,
        pod_cidr=args.pod_cidr or loopback_pod_cidr(),
        run_commands=True,
    )


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(FieldsFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, handlers=[handler])
    sim = simulator(args)
    failures: list[BaseException] = []
    try:
        trio.run(serve, sim, args.listen)
    except* OSError as group:  # e.g. the socket's directory cannot be created
        failures.extend(_leaves(group))
    for err in failures:
        logger.error("cannot serve CRI", extra=kv(endpoint=f"unix://{args.listen}", error=err))
    return 1 if failures else 0
