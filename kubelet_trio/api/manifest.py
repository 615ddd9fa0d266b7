"""Loading pod manifests (YAML or JSON, one or more documents) with a field-path -> line map.

Each document becomes a :class:`Document` holding JSON-compatible data plus the line of every key and
list item, taken from PyYAML's composed node tree, so a problem found later at
``spec.containers[1].ports[0].containerPort`` can be reported at the line that holds it (the longest
known prefix of the path; the document's first line as a last resort). :func:`parse_manifest` runs the
whole pipeline - load, decode, default, optionally transform (static pods), validate - and returns the
good pods and every problem as a :class:`ManifestError` (file, line, field path, message), both overall
and per document (:class:`DocumentResult`): a syntax error in one document of a multi-document YAML file
does not hide the others (the file is then split at its ``---`` lines, as Kubernetes' YAML reader does).

Unknown fields (``spec.restartPolcy``; :func:`kubelet_trio.api.strict.unknown_fields`) are warnings: like
the Go kubelet, which decodes manifests non-strictly, the pod still runs. With ``strict=True`` they are
errors, as with the API server's ``fieldValidation=Strict``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from kubelet_trio.api import gojson
from kubelet_trio.api.defaults import default_pod
from kubelet_trio.api.errors import DecodeError, FieldPath, ManifestError
from kubelet_trio.api.pod import Pod, PodList
from kubelet_trio.api.strict import type_errors, unknown_fields
from kubelet_trio.api.validation import validate_pod

__all__ = [
    "MAX_MANIFEST_BYTES",
    "UNKNOWN_FIELD",
    "Document",
    "DocumentResult",
    "ManifestResult",
    "manifest_too_large",
    "parse_manifest",
    "read_manifest_bytes",
    "read_manifest_file",
]

#: Upstream ``maxConfigLength``: larger files and URL bodies are refused, not truncated.
MAX_MANIFEST_BYTES = 10 * 1024 * 1024
#: The message of an unknown-field finding (the API server's strict decoding says ``unknown field "PATH"``).
UNKNOWN_FIELD = "unknown field"


@attrs.define(eq=False)
class Document:
    """One decoded document of a manifest file: JSON-compatible ``data`` and where each path sits.

    ``lines`` may be given as a function, called the first time a line is asked for: a valid JSON
    manifest (the common case, a thousand of them in a directory) never pays for the second parse."""

    file: str
    index: int
    data: Any
    first_line: int = 1
    _lines: Mapping[FieldPath, int] | Callable[[], Mapping[FieldPath, int]] = attrs.field(
        factory=dict, repr=False, alias="lines"
    )

    @property
    def lines(self) -> Mapping[FieldPath, int]:
        if callable(self._lines):
            self._lines = self._lines()
        return self._lines

    def line_for(self, path: FieldPath) -> int:
        """The line of ``path``, or of its longest known prefix, or of the document start."""
        for end in range(len(path), 0, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return self.first_line

    def error(self, path: FieldPath, message: str) -> ManifestError:
        return ManifestError(self.file, self.line_for(path), path, message)


@attrs.frozen
class DocumentResult:
    """The verdict on one document of a manifest: its valid pods, errors and warnings."""

    #: 1-based position among the file's non-empty documents (a document that does not parse counts).
    number: int
    #: The line the document starts on.
    line: int
    pods: tuple[Pod, ...] = ()
    errors: tuple[ManifestError, ...] = ()
    warnings: tuple[ManifestError, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors


@attrs.frozen
class ManifestResult:
    """The valid pods of a manifest (defaulted, and transformed if asked) and the problems found, overall
    (``errors`` includes the documents' errors, sorted by line) and per document."""

    pods: tuple[Pod, ...] = ()
    errors: tuple[ManifestError, ...] = ()
    #: Findings that do not stop the pod (unknown fields unless ``strict``), sorted by line.
    warnings: tuple[ManifestError, ...] = ()
    documents: tuple[DocumentResult, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors


@attrs.frozen
class Unreadable:
    """A document that cannot be parsed, and the line it starts on."""

    first_line: int
    error: ManifestError


def _json_document(text: str, file: str) -> Document:
    data = gojson.loads(text)
    leading = text[: len(text) - len(text.lstrip())]
    first_line = leading.count("\n") + 1 if text.strip() else 1

    def lines() -> Mapping[FieldPath, int]:
        from kubelet_trio.api.manifest_yaml import json_lines

        return json_lines(text)

    return Document(file, 0, data, first_line, lines)


def manifest_too_large(file: str) -> ManifestError:
    """The error for a manifest file or URL body over :data:`MAX_MANIFEST_BYTES`."""
    limit = f"{MAX_MANIFEST_BYTES // 2**20} MiB limit ({MAX_MANIFEST_BYTES} bytes)"
    return ManifestError(file, 1, (), f"manifest is larger than the {limit}; refused")


def read_manifest_bytes(path: str) -> bytes:
    """A manifest file's bytes; one over the limit is refused by its size alone, or after reading one byte
    past the limit for what has no size (``/dev/stdin``, a FIFO). Blocking; raises OSError and
    :class:`ManifestError`."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size > MAX_MANIFEST_BYTES:
            raise manifest_too_large(path)
        content = f.read(MAX_MANIFEST_BYTES + 1)
    if len(content) > MAX_MANIFEST_BYTES:
        raise manifest_too_large(path)
    return content


def _load(content: bytes | str, file: str) -> list[Document | Unreadable]:
    """Split a manifest into documents, each read or failed on its own. JSON (content starting with ``{``)
    is read as one document; anything else as (multi-document) YAML. Raises :class:`ManifestError` for
    problems of the whole content (too large, not UTF-8)."""
    if isinstance(content, bytes):
        if len(content) > MAX_MANIFEST_BYTES:
            raise manifest_too_large(file)
        try:
            text = content.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            line = content[: err.start].count(b"\n") + 1
            raise ManifestError(file, line, (), "manifest is not valid UTF-8") from None
    else:
        text = content
    try:
        if text.lstrip().startswith("{"):
            try:
                return [_json_document(text, file)]
            except ValueError as err:  # JSONDecodeError, or a NaN/Infinity constant
                line = getattr(err, "lineno", 1)
                message = getattr(err, "msg", str(err))
                return [Unreadable(1, ManifestError(file, line, (), f"invalid JSON: {message}"))]
        from kubelet_trio.api.manifest_yaml import yaml_parts  # PyYAML: loaded by the first YAML manifest

        return yaml_parts(text, file)
    except RecursionError:
        raise ManifestError(file, 1, (), "manifest is nested too deeply") from None


def _check_type(doc: Document, kinds: tuple[str, ...]) -> str:
    data = doc.data
    kind, version = data.get("kind"), data.get("apiVersion")
    if not kind:
        raise doc.error(("kind",), "Required value: Object 'Kind' is missing")
    if kind not in kinds:
        supported = ", ".join(json.dumps(k) for k in kinds)
        raise doc.error(("kind",), f"Unsupported value: {json.dumps(kind)}: supported values: {supported}")
    if version != "v1":
        if not version:
            raise doc.error(("apiVersion",), "Required value: Object 'apiVersion' is missing")
        raise doc.error(("apiVersion",), f'Unsupported value: {json.dumps(version)}: supported values: "v1"')
    return str(kind)


def _decode(doc: Document, allow_lists: bool) -> list[tuple[Pod, FieldPath]]:
    if not isinstance(doc.data, dict):
        raise doc.error((), "a manifest must be a JSON/YAML object")
    kind = _check_type(doc, ("Pod", "PodList", "List") if allow_lists else ("Pod",))
    try:
        if kind == "Pod":
            return [(Pod.from_dict(doc.data), ())]
        pods = PodList.from_dict(doc.data).items or ()
    except DecodeError as err:
        raise doc.error(err.path, err.message) from None
    out: list[tuple[Pod, FieldPath]] = []
    for i, pod in enumerate(pods):
        if pod.kind not in (None, "Pod") or pod.api_version not in (None, "v1"):
            raise doc.error(
                ("items", i, "kind"), f"list items must be v1 Pods, got {pod.api_version}/{pod.kind}"
            )
        out.append((pod, ("items", i)))
    return out


def _prepare_for_create(pod: Pod) -> Pod:
    """What the API server does to a new pod before validating it: a negative grace period becomes 1 s
    (the pod registry's create strategy), and the deletion fields of a pod not yet created are cleared."""
    spec = pod.spec
    grace = spec.termination_grace_period_seconds if spec is not None else None
    if spec is not None and grace is not None and grace < 0:
        pod = attrs.evolve(pod, spec=attrs.evolve(spec, termination_grace_period_seconds=1))
    meta = pod.metadata
    if meta is not None and (meta.deletion_timestamp, meta.deletion_grace_period_seconds) != (None, None):
        meta = attrs.evolve(meta, deletion_timestamp=None, deletion_grace_period_seconds=None)
        pod = attrs.evolve(pod, metadata=meta)
    return pod


def _check_document(
    doc: Document, allow_lists: bool, strict: bool, prepare: Callable[[Pod], Pod] | None
) -> DocumentResult:
    pods: list[Pod] = []
    errors: list[ManifestError] = []
    warnings: list[ManifestError] = []
    unknown: list[FieldPath] = []
    wrong_types: list[DecodeError] = []
    if isinstance(doc.data, dict):
        kind = doc.data.get("kind")
        schema = "PodList" if allow_lists and kind in ("PodList", "List") else "Pod"
        unknown = unknown_fields(doc.data, schema)
        (errors if strict else warnings).extend(doc.error(path, UNKNOWN_FIELD) for path in unknown)
        wrong_types = type_errors(doc.data, schema)
    decoded: list[tuple[Pod, FieldPath]] = []
    try:
        decoded = _decode(doc, allow_lists)
    except ManifestError as err:
        if all(err.path != wrong.path for wrong in wrong_types):  # else it is reported below
            errors.append(err)
    if wrong_types:  # all of them, where decoding stops at the first
        errors.extend(doc.error(err.path, err.message) for err in wrong_types)
        decoded = []
    for pod, prefix in decoded:
        defaulted = _prepare_for_create(default_pod(pod))
        problems = validate_pod(defaulted)
        if not problems and prepare is not None:
            defaulted = prepare(defaulted)
            problems = validate_pod(defaulted)
        if problems:
            errors.extend(doc.error((*prefix, *p.path), p.message) for p in problems)
        elif not (strict and any(path[: len(prefix)] == prefix for path in unknown)):
            pods.append(defaulted)
    errors.sort(key=lambda e: e.line)
    warnings.sort(key=lambda e: e.line)
    return DocumentResult(doc.index + 1, doc.first_line, tuple(pods), tuple(errors), tuple(warnings))


def parse_manifest(
    content: bytes | str,
    *,
    file: str,
    allow_lists: bool = False,
    prepare: Callable[[Pod], Pod] | None = None,
    strict: bool = False,
) -> ManifestResult:
    """Load, decode, default, ``prepare`` (e.g. turn into a static pod) and validate every pod.

    Documents that are empty are skipped; a manifest with no document at all is an error. With
    ``allow_lists`` a document may also be a ``PodList`` or ``List`` (the HTTP source's formats). Unknown
    fields are warnings, or errors with ``strict``.
    """
    try:
        parts = _load(content, file)
    except ManifestError as err:
        return ManifestResult(errors=(err,))
    if not parts:
        return ManifestResult(errors=(ManifestError(file, 1, (), "no pod manifest in file (it is empty)"),))
    documents: list[DocumentResult] = []
    for number, part in enumerate(parts, 1):
        if isinstance(part, Unreadable):
            documents.append(DocumentResult(number, part.first_line, errors=(part.error,)))
        else:
            documents.append(_check_document(part, allow_lists, strict, prepare))
    return ManifestResult(
        pods=tuple(pod for d in documents for pod in d.pods),
        errors=tuple(sorted((e for d in documents for e in d.errors), key=lambda e: e.line)),
        warnings=tuple(sorted((w for d in documents for w in d.warnings), key=lambda e: e.line)),
        documents=tuple(documents),
    )


def read_manifest_file(
    path: str | os.PathLike[str],
    *,
    prepare: Callable[[Pod], Pod] | None = None,
    strict: bool = False,
) -> ManifestResult:
    """Read and :func:`parse_manifest` one file (blocking; call through ``trio.to_thread`` from async)."""
    name = os.fspath(path)
    try:
        content = read_manifest_bytes(name)
    except ManifestError as err:
        return ManifestResult(errors=(err,))
    except OSError as err:
        return ManifestResult(errors=(ManifestError(name, 1, (), f"cannot read: {err.strerror or err}"),))
    return parse_manifest(content, file=name, prepare=prepare, strict=strict)
