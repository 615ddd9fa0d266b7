"""Structured logging: constant messages, context as data, logfmt text or JSON lines (``--log-format``).

Call sites log a constant message and hand the context over as data, the way klog's
``InfoS("msg", "pod", klog.KObj(pod))`` does::

    logger.info("pod added", extra=kv(pod=kobj(pod), uid=pod.uid))

The formatters lay the fields out and never look inside the message, so a value (a probe's output, a runtime
error) cannot end a field early or forge another one: in logfmt every value that is not a plain token is
quoted and escaped, in JSON it is a typed JSON value. ``kobj``/``kref`` render as ``namespace/name`` in text
and as ``{"namespace": ..., "name": ...}`` in JSON. Attributes passed through plain ``extra=`` are fields too.

Verbosity follows the Go kubelet's ``--v``: 0-3 show info and above, 4 and more debug.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import logging
import re
import sys
from collections.abc import Mapping
from typing import IO, Any, Protocol

import attrs

__all__ = [
    "FIELDS_ATTR",
    "FieldsFormatter",
    "JsonFormatter",
    "LogfmtFormatter",
    "ObjectRef",
    "configure_logging",
    "format_fields",
    "kobj",
    "kref",
    "kv",
    "level_for",
    "record_fields",
]

DEBUG_VERBOSITY = 4
FIELDS_ATTR = "fields"  # the LogRecord attribute ``kv`` fills
_RESERVED = frozenset({"time", "ts", "level", "logger", "msg"})  # and "error" when there is a traceback
_KEY = re.compile(r"[A-Za-z_][\w.\-]*")
_NEEDS_QUOTES = re.compile(r'[\s"=\\]|[^\x21-\x7e]')
# json.dumps leaves these line breaks raw; a line-oriented reader must not see them.
_LINE_BREAKS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
# Attributes every LogRecord has; anything else was passed through ``extra=`` and is context too.
_RECORD_FIELDS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", FIELDS_ATTR}


class _Named(Protocol):
    @property
    def namespace(self) -> str: ...
    @property
    def name(self) -> str: ...


@attrs.frozen
class ObjectRef:
    """A namespaced object in a log line (klog's ``ObjectRef``): ``ns/name`` in text, an object in JSON."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def kobj(obj: _Named) -> ObjectRef:
    """The reference to log for an object with ``namespace`` and ``name`` (a pod), as ``klog.KObj``."""
    return ObjectRef(obj.namespace, obj.name)


def kref(namespace: str, name: str) -> ObjectRef:
    """The reference to log from a namespace and a name, as ``klog.KRef``."""
    return ObjectRef(namespace, name)


def kv(**fields: Any) -> dict[str, Any]:
    """``extra=`` for a log call: the fields, kept apart from the record's own attributes."""
    return {FIELDS_ATTR: fields}


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The context of a record: fields from ``kv`` first, then any other ``extra=`` attributes."""
    fields: dict[str, Any] = dict(getattr(record, FIELDS_ATTR, None) or {})
    for key, value in record.__dict__.items():
        if key not in _RECORD_FIELDS:
            fields.setdefault(key, value)
    return fields


def _context(record: logging.LogRecord) -> list[tuple[str, Any]]:
    """Fields to lay out; a field may not take a reserved name or a malformed key (it is renamed)."""
    out = []
    reserved = _RESERVED | {"error"} if record.exc_info else _RESERVED
    for key, value in record_fields(record).items():
        name = key if _KEY.fullmatch(key) else "_" + re.sub(r"[^\w.\-]", "_", key)
        out.append((f"field.{name}" if name in reserved else name, value))
    return out


def _timestamp(record: logging.LogRecord) -> str:
    stamp = dt.datetime.fromtimestamp(record.created, dt.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond:06d}Z"


def _text(value: Any) -> str:
    if isinstance(value, enum.Enum) and isinstance(value.value, str | int):
        return str(value.value)
    return str(value)


def _quote(value: Any) -> str:
    """A logfmt value: bare if it is a plain printable token, else a JSON string (quotes, escapes)."""
    text = _text(value)
    if text == "" or _NEEDS_QUOTES.search(text):
        quoted = json.dumps(text, ensure_ascii=False)
        for raw, escaped in _LINE_BREAKS.items():
            quoted = quoted.replace(raw, escaped)
        return quoted
    return text


class LogfmtFormatter(logging.Formatter):
    """``time=... level=info logger=kubelet_trio.kubelet msg="pod added" pod=default/web uid=...``."""

    def format(self, record: logging.LogRecord) -> str:
        fields: list[tuple[str, Any]] = [
            ("time", _timestamp(record)),
            ("level", record.levelname.lower()),
            ("logger", record.name),
            ("msg", record.getMessage()),
            *_context(record),
        ]
        line = " ".join(f"{key}={_quote(value)}" for key, value in fields)
        if record.exc_info:
            line += " error=" + _quote(self.formatException(record.exc_info))
        return line


class FieldsFormatter(logging.Formatter):
    """A classic ``fmt`` line (``%(message)s`` etc.) followed by the record's fields in logfmt."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        context = format_fields(record)
        return f"{line} {context}" if context else line


def format_fields(record: logging.LogRecord) -> str:
    """The record's fields as logfmt pairs, ``pod=default/web uid=u1`` (for plain formats and tests)."""
    return " ".join(f"{key}={_quote(value)}" for key, value in _context(record))


def _json_value(value: Any) -> Any:
    if isinstance(value, ObjectRef):
        return {"namespace": value.namespace, "name": value.name}
    if isinstance(value, enum.Enum):
        return _json_value(value.value) if isinstance(value.value, str | int) else str(value)
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, list | tuple | set | frozenset):
        return [_json_value(item) for item in value]
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    return str(value)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``{"ts", "level", "logger", "msg", <context>..., "error"?}``."""

    def format(self, record: logging.LogRecord) -> str:
        obj: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in _context(record):
            obj.setdefault(key, _json_value(value))
        if record.exc_info:
            obj["error"] = self.formatException(record.exc_info)
        text = json.dumps(obj, ensure_ascii=False)
        for raw, escaped in _LINE_BREAKS.items():
            text = text.replace(raw, escaped)
        return text


def level_for(verbosity: int) -> int:
    return logging.DEBUG if verbosity >= DEBUG_VERBOSITY else logging.INFO


def configure_logging(
    verbosity: int = 0,
    log_format: str = "text",
    *,
    stream: IO[str] | None = None,
    level: int | None = None,
) -> logging.Handler:
    """Route the root logger to ``stream`` (stderr) in the chosen format; returns the handler.

    ``level`` overrides the level derived from ``verbosity`` (run-once shows only warnings by default).
    Third-party libraries log at WARNING and above, except the HTTP server's start-up lines.
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else LogfmtFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    ours = level if level is not None else level_for(verbosity)
    logging.getLogger("kubelet_trio").setLevel(ours)
    return handler
