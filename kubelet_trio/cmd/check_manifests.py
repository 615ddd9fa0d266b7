"""``kubelet-trio check-manifests [--strict] [--output text|json] PATH...``: validate pod manifests as the
kubelet would load them, and as the API server would check them.

Every document of every file is checked and reported: a document that does not parse does not hide the
ones after it. Directories are expanded like the file source does (sorted, dot-files skipped, no
recursion).

Text output: ``FILE: ok`` for a good single-document file; for a file of several documents one verdict
line per document, ``FILE: document N (line L): ok`` or ``... : N error(s)``. Each problem is a line
``FILE:LINE: FIELD.PATH: MESSAGE`` (``FILE:LINE: document N: FIELD.PATH: MESSAGE`` in a file of several
documents). Unknown fields (``spec.restartPolcy: unknown field``) are ``warning:`` lines that do not fail
the file - the kubelet, like Go's, ignores them and runs the pod - unless ``--strict`` makes them errors
(the API server's ``fieldValidation=Strict``).

``--output json`` prints one JSON document (schema version 1)::

    {"version": 1, "strict": false, "ok": false,
     "summary": {"files": 2, "documents": 3, "errors": 1, "warnings": 1},
     "files": [
       {"path": "pods.yaml", "ok": false,
        "errors": [],            # problems of the file as a whole (unreadable, too large, empty, missing)
        "documents": [
          {"document": 1, "line": 1, "ok": true, "pods": ["default/web"], "errors": [],
           "warnings": [{"line": 6, "field": "spec.restartPolcy", "message": "unknown field"}]},
          {"document": 2, "line": 14, "ok": false, "pods": [], "warnings": [],
           "errors": [{"line": 20, "field": "spec.containers[0].image", "message": "Required value"}]}]}]}

``document`` counts the non-empty documents of a file from 1; ``line`` is 1-based; ``field`` is the API
server's field path, ``""`` for a problem of the whole document (such as a syntax error). ``pods`` lists
``namespace/name`` of the document's valid pods. A file's ``ok`` is false when it or any of its
documents has an error; the top-level ``ok`` is false when any file's is.

Exit status: 0 all valid (warnings allowed), 1 some invalid, 2 usage error. A reader that stops early
(``| head``) ends the output quietly, as it ends a Unix tool: no traceback, status 141 (128 + SIGPIPE, what
a shell reports for a tool that SIGPIPE stopped).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Iterable
from typing import Any

import attrs

from kubelet_trio.api.errors import ManifestError
from kubelet_trio.api.manifest import DocumentResult, ManifestResult, read_manifest_file

__all__ = ["BROKEN_PIPE_STATUS", "JSON_SCHEMA_VERSION", "main"]

JSON_SCHEMA_VERSION = 1
BROKEN_PIPE_STATUS = 128 + signal.SIGPIPE


@attrs.frozen
class FileReport:
    """The verdict on one path: the file's own problems and each of its documents'."""

    path: str
    errors: tuple[ManifestError, ...] = ()
    documents: tuple[DocumentResult, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors and all(d.ok for d in self.documents)


def _expand(path: str) -> list[str] | None:
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if not n.startswith("."))
        return [os.path.join(path, n) for n in names if os.path.isfile(os.path.join(path, n))]
    if os.path.exists(path):
        return [path]
    return None


def _report(path: str, result: ManifestResult) -> FileReport:
    in_documents = {id(e) for d in result.documents for e in d.errors}
    own = tuple(e for e in result.errors if id(e) not in in_documents)
    return FileReport(path, own, result.documents)


def _pod_names(document: DocumentResult) -> list[str]:
    return [f"{pod.namespace or 'default'}/{pod.name}" for pod in document.pods]


def _problem_line(error: ManifestError, document: int | None, warning: bool = False) -> str:
    parts = [f"{error.file}:{error.line}"]
    if warning:
        parts.append("warning")
    if document is not None:
        parts.append(f"document {document}")
    if error.field:
        parts.append(error.field)
    parts.append(error.message)
    return ": ".join(parts)


def _text(reports: Iterable[FileReport]) -> Iterable[str]:
    for report in reports:
        for error in report.errors:
            yield str(error) if error.line else f"{report.path}: {error.message}"
        several = len(report.documents) > 1
        for document in report.documents:
            number = document.number if several else None
            findings = [(e, False) for e in document.errors] + [(w, True) for w in document.warnings]
            findings.sort(key=lambda finding: finding[0].line)
            for error, warning in findings:
                yield _problem_line(error, number, warning)
            if several:
                count = len(document.errors)
                verdict = "ok" if document.ok else f"{count} error{'s' if count > 1 else ''}"
                yield f"{report.path}: document {document.number} (line {document.line}): {verdict}"
        if not several and report.ok:
            yield f"{report.path}: ok"


def _problem(error: ManifestError) -> dict[str, Any]:
    return {"line": error.line or None, "field": error.field, "message": error.message}


def _json(reports: list[FileReport], strict: bool) -> dict[str, Any]:
    documents = [d for r in reports for d in r.documents]
    return {
        "version": JSON_SCHEMA_VERSION,
        "strict": strict,
        "ok": all(r.ok for r in reports),
        "summary": {
            "files": len(reports),
            "documents": len(documents),
            "errors": sum(len(r.errors) for r in reports) + sum(len(d.errors) for d in documents),
            "warnings": sum(len(d.warnings) for d in documents),
        },
        "files": [
            {
                "path": r.path,
                "ok": r.ok,
                "errors": [_problem(e) for e in r.errors],
                "documents": [
                    {
                        "document": d.number,
                        "line": d.line,
                        "ok": d.ok,
                        "pods": _pod_names(d),
                        "errors": [_problem(e) for e in d.errors],
                        "warnings": [_problem(w) for w in d.warnings],
                    }
                    for d in r.documents
                ],
            }
            for r in reports
        ],
    }


def check_paths(paths: Iterable[str], *, strict: bool = False) -> tuple[list[FileReport], list[str]]:
    """The report of every file under ``paths``, and the directories that held no file."""
    reports: list[FileReport] = []
    empty: list[str] = []
    for path in paths:
        files = _expand(path)
        if files is None:
            reports.append(FileReport(path, (ManifestError(path, 0, (), "no such file or directory"),)))
            continue
        if not files:
            empty.append(path)
        reports.extend(_report(file, read_manifest_file(file, strict=strict)) for file in files)
    return reports, empty


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="kubelet-trio check-manifests",
        description="Validate pod manifest files or directories (YAML or JSON, one or more pods per file).",
        allow_abbrev=False,
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="a manifest file or a directory of them")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="unknown fields are errors (the API server's fieldValidation=Strict), not warnings",
    )
    parser.add_argument(
        "--output",
        "-o",
        choices=("text", "json"),
        default="text",
        help="text: one line per problem and verdict (default); json: one document for CI",
    )
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    reports, empty = check_paths(args.paths, strict=args.strict)
    try:
        _write(reports, empty, args.output, args.strict)
    except BrokenPipeError:
        # the reader is gone: point stdout at /dev/null so that the interpreter's own flush at exit
        # does not fail on the same pipe, and stop like a tool that SIGPIPE ended
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return BROKEN_PIPE_STATUS
    return 0 if all(r.ok for r in reports) else 1


def _write(reports: list[FileReport], empty: list[str], output: str, strict: bool) -> None:
    if output == "json":
        json.dump(_json(reports, strict), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for line in _text(reports):
            print(line)
        for path in empty:
            print(f"{path}: no manifest files")
    sys.stdout.flush()
