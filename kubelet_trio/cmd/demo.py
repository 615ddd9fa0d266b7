"""``kubelet-trio demo``: ``kubelet-trio --runonce`` over ``examples/`` on the simulated runtime, then on a
private containerd (``LocalCriEnvironment``) when this machine can run one. The user-facing text is
:data:`DESCRIPTION`.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path

from kubelet_trio.cmd import kubelet

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

#: ``demo --help``: plain text for a terminal.
DESCRIPTION = """\
The main job: kubelet-trio --runonce over examples/, on the simulated runtime (any machine) and then on a
private containerd when this machine can run one.

Each step prints the exact command it runs, then its progress and report. The containerd step starts a
throw-away containerd and a loopback registry that also answers for docker.io, so the examples'
busybox:1.36 resolves offline. Other flags are passed on to each kubelet-trio --runonce run.
"""


def _run(title: str, args: list[str]) -> int:
    print(f"\n== {title} ==\n$ kubelet-trio {shlex.join(args)}", flush=True)
    code = kubelet.main(args)
    sys.stdout.flush()
    return code


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="kubelet-trio demo",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument(
        "--containerd",
        choices=["auto", "yes", "no"],
        default="auto",
        help="also run on a private containerd (auto: when this machine can)",
    )
    parser.add_argument(
        "--examples", default=str(EXAMPLES), help="the manifest directory (default: examples/)"
    )
    args, extra = parser.parse_known_args(argv)
    common = [
        "--runonce",
        "--pod-manifest-path",
        args.examples,
        "--runonce-wait=completion",
        "--runonce-cleanup",
    ]
    with tempfile.TemporaryDirectory(prefix="kubelet-trio-demo-") as tmp:
        sim = [*common, "--runtime", "sim", "--pod-logs-dir", f"{tmp}/sim-logs", "--root-dir", f"{tmp}/sim"]
        codes = [_run("simulated runtime", sim + extra)]
        if args.containerd != "no":
            from kubelet_trio.testing.env import LocalCriEnvironment, missing_prerequisites

            missing = missing_prerequisites()
            if missing:
                print(f"\n(containerd skipped: {'; '.join(missing)})", file=sys.stderr)
                if args.containerd == "yes":
                    return 1
            else:
                with LocalCriEnvironment(Path(tmp) / "cri") as env:
                    cri = [*common, "--container-runtime-endpoint", env.endpoint]
                    cri += ["--pod-logs-dir", f"{tmp}/cri-logs", "--root-dir", f"{tmp}/cri-root"]
                    codes.append(_run(f"containerd via CRI at {env.endpoint}", cri + extra))
    return 0 if all(code == 0 for code in codes) else 1
