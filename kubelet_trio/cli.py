"""``kubelet-trio`` entry point.

The daemon takes Go-kubelet-style flags at top level (``kubelet-trio --pod-manifest-path ...``); tools that
the Go kubelet does not have are subcommands (:data:`~kubelet_trio.subcommands.SUBCOMMANDS`), each a module
under :mod:`kubelet_trio.cmd` exposing ``main(argv: list[str]) -> int``.
"""

from __future__ import annotations

import importlib
import sys

from kubelet_trio.subcommands import SUBCOMMANDS

__all__ = ["SUBCOMMANDS", "main", "usage"]


def usage() -> str:
    lines = [
        "usage: kubelet-trio [FLAGS...]     run a node (see kubelet-trio --help)",
        "       kubelet-trio COMMAND [ARGS...]",
        "",
        "commands:",
    ]
    lines += [f"  {name:<16} {help_}" for name, (_, help_) in SUBCOMMANDS.items()]
    lines += ["", "Run 'kubelet-trio COMMAND --help' for a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(usage(), file=sys.stderr)
        return 2
    name, rest = args[0], args[1:]
    if name.startswith("-"):
        from kubelet_trio.cmd import kubelet

        return kubelet.main(args)
    if name not in SUBCOMMANDS:
        print(f"kubelet-trio: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(SUBCOMMANDS[name][0])
    return int(module.main(rest))


if __name__ == "__main__":
    sys.exit(main())
