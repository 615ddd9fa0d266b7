"""``kubelet-trio shutdown-node [--root-dir DIR] [--socket PATH] [--timeout DURATION]``: tell the running
kubelet that the machine is about to shut down, and wait until it has stopped the pods.

The kubelet (with ``shutdownGracePeriod`` set) then stops its pods in priority order within their budgets,
marks them Failed (reason ``Terminated``), reports the Node NotReady and rejects new pods; see
:mod:`kubelet_trio.nodeshutdown`. It listens on ``<root-dir>/nodeshutdown.sock``. The command prints the
kubelet's answers (``shutting down``, ``done``) as they come.

Exit status: 0 the pods are stopped, 1 no kubelet answered (or not in time), 2 usage error.
"""

from __future__ import annotations

import argparse
import sys

from kubelet_trio import defaults
from kubelet_trio.nodeshutdown.trigger import TriggerError, request_shutdown, socket_path
from kubelet_trio.options import parse_duration

__all__ = ["main"]


def _timeout(text: str) -> float:
    try:
        seconds = parse_duration(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r} (e.g. 2m or 30s)") from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: must not be negative")
    return seconds


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubelet-trio shutdown-node",
        description="Trigger the running kubelet's graceful node shutdown; wait until its pods are stopped.",
    )
    parser.add_argument(
        "--root-dir", default=defaults.ROOT_DIR, help="the kubelet's --root-dir (default %(default)s)"
    )
    parser.add_argument(
        "--socket", default="", help="the trigger socket (default: <root-dir>/nodeshutdown.sock)"
    )
    parser.add_argument(
        "--timeout",
        type=_timeout,
        default=0.0,
        help="give up when the kubelet is silent this long, e.g. 5m (default: wait as long as it takes)",
    )
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    path = args.socket or socket_path(args.root_dir)
    answered_done = False
    try:
        for line in request_shutdown(path, timeout=args.timeout or None):
            print(line, flush=True)
            answered_done = answered_done or line == "done"
    except TriggerError as err:
        print(f"kubelet-trio shutdown-node: {err}", file=sys.stderr)
        return 1
    if not answered_done:
        print(
            f"kubelet-trio shutdown-node: the kubelet at {path} hung up before it was done", file=sys.stderr
        )
        return 1
    return 0
