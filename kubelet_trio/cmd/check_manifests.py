"""``kubelet-trio check-manifests PATH...``: validate pod manifests as the kubelet would load them.

Prints ``PATH: ok`` for a good file, or one ``PATH:LINE: field.path: message`` line per problem.
Directories are expanded like the file source does (sorted, dot-files skipped, no recursion).
Exit status: 0 all valid, 1 some invalid, 2 usage error.
"""

from __future__ import annotations

import argparse
import os
import sys

from kubelet_trio.api import read_manifest_file

__all__ = ["main"]


def _expand(path: str) -> list[str] | None:
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if not n.startswith("."))
        return [os.path.join(path, n) for n in names if os.path.isfile(os.path.join(path, n))]
    if os.path.exists(path):
        return [path]
    return None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="kubelet-trio check-manifests",
        description="Validate pod manifest files or directories (YAML or JSON, one or more pods per file).",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="a manifest file or a directory of them")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    ok = True
    for path in args.paths:
        files = _expand(path)
        if files is None:
            print(f"{path}: no such file or directory")
            ok = False
            continue
        if not files:
            print(f"{path}: no manifest files")
        for file in files:
            result = read_manifest_file(file)
            if result.ok:
                print(f"{file}: ok")
            for error in result.errors:
                print(error)
            ok = ok and result.ok
    sys.stdout.flush()
    return 0 if ok else 1
