"""The YAML side of manifest loading (PyYAML), imported by the first manifest that is YAML or whose JSON
needs its line map: a node whose manifests are all valid JSON, or that has none, never loads PyYAML.

Documents are composed into PyYAML's node tree so that each key and list item keeps its line
(:func:`_line_map`), then constructed and made JSON-compatible by the manifest module's rules.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from kubelet_trio.api.errors import DecodeError, FieldPath, ManifestError
from kubelet_trio.api.manifest import Document, Unreadable

__all__ = ["json_lines", "yaml_parts"]

#: Guard against alias bombs: a document may not expand to more values than this.
MAX_VALUES_PER_DOCUMENT = 1_000_000
#: Bounds of the path -> line map (real manifests are far below both).
MAX_DEPTH = 100
MAX_LINE_MAP_ENTRIES = 200_000
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
_SURROGATE = re.compile("[\ud800-\udfff]")
#: A line that starts a YAML document (``---`` followed by a blank, a comment, content or the end).
_DOCUMENT_START = re.compile(r"^---(?=[ \t\r\n]|$)", re.MULTILINE)


class _Loader(yaml.SafeLoader):
    """SafeLoader that leaves unquoted timestamps as strings (Kubernetes sees them as JSON strings)."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != _TIMESTAMP_TAG]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }


def _line_map(root: Node, offset: int = 0) -> dict[FieldPath, int]:
    """Path -> line for every key and list item, bounded in depth and size (aliases can make the node
    graph cyclic or exponentially large; such documents are rejected later, but must not hang here).
    ``offset`` is the number of lines before the parsed text in its file."""
    lines: dict[FieldPath, int] = {}
    stack: list[tuple[Node, FieldPath]] = [(root, ())]
    while stack and len(lines) < MAX_LINE_MAP_ENTRIES:
        node, path = stack.pop()
        if len(path) >= MAX_DEPTH:
            continue
        if isinstance(node, MappingNode):
            for key_node, value_node in node.value:
                if not isinstance(key_node, ScalarNode):
                    continue
                child = (*path, str(key_node.value))
                if child not in lines:
                    lines[child] = key_node.start_mark.line + 1 + offset
                    stack.append((value_node, child))
        elif isinstance(node, SequenceNode):
            for i, item in enumerate(node.value):
                child = (*path, i)
                if child not in lines:
                    lines[child] = item.start_mark.line + 1 + offset
                    stack.append((item, child))
    return lines


def _json_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, int | float):
        return str(key)
    raise ValueError(f"mapping keys must be strings, got {type(key).__name__}")


def _normalise(value: Any, path: FieldPath, budget: list[int], stack: set[int]) -> Any:
    """Make YAML-constructed data JSON-compatible; refuse cycles, alias bombs and non-JSON values."""
    budget[0] -= 1
    if budget[0] < 0:
        raise DecodeError(path, f"document expands to more than {MAX_VALUES_PER_DOCUMENT} values")
    if isinstance(value, str):
        if _SURROGATE.search(value):  # from a "\ud800" escape: Go's YAML scanner refuses every one
            raise DecodeError(path, "found invalid Unicode character escape code")
        return value
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise DecodeError(path, "NaN and infinite numbers are not allowed")
        return value
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, list | dict):
        if id(value) in stack:
            raise DecodeError(path, "recursive alias")
        stack.add(id(value))
        try:
            if isinstance(value, list):
                return [_normalise(item, (*path, i), budget, stack) for i, item in enumerate(value)]
            out: dict[str, Any] = {}
            for key, item in value.items():
                try:
                    name = _json_key(key)
                    if _SURROGATE.search(name):
                        raise ValueError("found invalid Unicode character escape code")
                except ValueError as err:
                    raise DecodeError(path, str(err)) from None
                out[name] = _normalise(item, (*path, name), budget, stack)
            return out
        finally:
            stack.discard(id(value))
    raise DecodeError(path, f"{type(value).__name__} values are not allowed in a manifest")


def _yaml_error(file: str, text: str, err: yaml.YAMLError, offset: int = 0) -> ManifestError:
    mark = getattr(err, "problem_mark", None)
    context = getattr(err, "context_mark", None)
    if mark is None or (context is not None and mark.index >= len(text.rstrip())):
        mark = context  # "unexpected end of stream": point at what was left open instead
    line = min(mark.line + 1, text.count("\n") + 1) if mark is not None else 1
    problem = getattr(err, "problem", None)
    message = f"invalid YAML: {problem}" if problem else f"invalid YAML: {err}"
    return ManifestError(file, line + offset, (), message)


def _yaml_documents(text: str, file: str, *, offset: int = 0, first_index: int = 0) -> Iterator[Document]:
    """The non-empty documents of ``text`` (which starts after ``offset`` lines of its file), numbered
    from ``first_index``. Raises :class:`ManifestError` at the first problem."""
    try:
        loader = _Loader(text)
    except yaml.YAMLError as err:  # a character YAML does not allow
        raise _yaml_error(file, text, err, offset) from None
    try:
        index = first_index
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            data = loader.construct_document(node)
            first_line = node.start_mark.line + 1 + offset
            if data is None:
                continue  # an empty document (``---`` with nothing after it)
            lines = _line_map(node, offset)
            doc = Document(file, index, None, first_line, lines)
            try:
                data = _normalise(data, (), [MAX_VALUES_PER_DOCUMENT], set())
            except DecodeError as err:
                raise doc.error(err.path, err.message) from None
            yield attrs.evolve(doc, data=data)
            index += 1
    except yaml.YAMLError as err:
        raise _yaml_error(file, text, err, offset) from None
    finally:
        loader.dispose()


def yaml_parts(text: str, file: str) -> list[Document | Unreadable]:
    """Every document of a YAML stream, or the problem of each document that cannot be read.

    The stream is parsed as a whole; if that fails, it is split at its ``---`` lines (YAML forbids them
    inside a document's content) and each part is parsed on its own, so that a syntax error in one
    document is reported with the others still checked.
    """
    try:
        return list(_yaml_documents(text, file))
    except ManifestError:
        pass
    out: list[Document | Unreadable] = []
    starts = [0, *(m.start() for m in _DOCUMENT_START.finditer(text) if m.start() > 0)]
    for begin, end in zip(starts, [*starts[1:], len(text)], strict=True):
        part = text[begin:end]
        offset = text.count("\n", 0, begin)
        try:
            out.extend(_yaml_documents(part, file, offset=offset, first_index=len(out)))
        except ManifestError as err:
            out.append(Unreadable(offset + _first_content_line(part), err))
    return out


def _first_content_line(part: str) -> int:
    """1-based line within ``part`` of its first line of content (not the ``---`` marker, a blank line or a
    comment); 1 if there is none."""
    for number, line in enumerate(part.splitlines(), 1):
        text = line.strip()
        if (
            text
            and not text.startswith("#")
            and not (number == 1 and _DOCUMENT_START.match(line) and text == "---")
        ):
            return number
    return 1


def json_lines(text: str) -> Mapping[FieldPath, int]:
    """The line map of a JSON manifest (JSON is YAML): asked for only when a problem needs a line."""
    try:
        node = yaml.compose(text, Loader=_Loader)
    except (yaml.YAMLError, RecursionError):
        return {}
    return _line_map(node) if node is not None else {}
