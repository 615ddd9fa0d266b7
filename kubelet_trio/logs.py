"""Structured logging in klog's layouts: constant messages, context as data (``--logging-format``).

Call sites log a constant message and hand the context over as data, the way klog's
``InfoS("msg", "pod", klog.KObj(pod))`` does::

    logger.info("pod added", extra=kv(pod=kobj(pod), uid=pod.uid))
    logger.log(vlevel(2), "probe succeeded", extra=kv(pod=kobj(pod)))  # klog.V(2).InfoS

``text`` is klog's text layout, ``I1123 06:56:04.081062    1234 kubelet.py:123] "pod added"
pod="default/web" uid="u1"`` (severity, local date and time, process id, the Python file and line);
``json`` is klog's JSON layout (``component-base/logs/json``): ``{"ts": <Unix milliseconds, float>,
"caller": "pod/manager.py:42", "msg": ..., "v": 0, <key/values at top level>, "err": ...}`` (error lines
carry ``err`` and no ``v``). Values keep their types in JSON; in text, strings are quoted with Go's
escaping and numbers and booleans are bare. ``kobj``/``kref`` are ``"namespace/name"`` in text and
``{"name", "namespace"}`` in JSON, as ``klog.KObj``.

The formatters never look inside the message, and every value is escaped onto the record's one line, so a
value (a probe's output, a runtime error) cannot end a field early or forge another one or a log line
(klog itself would print a value with line breaks as an indented block; here it stays on one line). A
field may not take a name the layout uses (``ts``, ``caller``, ``msg``, ``v``; ``err`` when the record has
an exception): it is renamed ``field.<name>``. The field ``error`` is written as klog's ``err``.

Verbosity, one mapping between klog's V-levels and Python's levels (:func:`vlevel`, :func:`verbosity_of`):
WARNING and above are always shown (V(0)); INFO is V(0); levels 19, 18, 17 are V(1)-V(3); DEBUG (10, and
11-16) is V(4), what the Go kubelet logs at ``klog.V(4)``; levels 9 down to 4 are V(5)-V(10). ``-v N``
shows the messages of V-level up to N.
"""

from __future__ import annotations

import enum
import json
import logging
import math
import os
import re
import sys
from collections.abc import Mapping
from typing import IO, Any, Protocol

import attrs

__all__ = [
    "FIELDS_ATTR",
    "FieldsFormatter",
    "KlogJsonFormatter",
    "KlogTextFormatter",
    "ObjectRef",
    "configure_logging",
    "error_text",
    "format_fields",
    "go_quote",
    "kobj",
    "kref",
    "kv",
    "level_for",
    "record_fields",
    "verbosity_of",
    "vlevel",
]

FIELDS_ATTR = "fields"  # the LogRecord attribute ``kv`` fills
MAX_VERBOSITY = 10
_KEY = re.compile(r"[A-Za-z_][\w.\-]*")
# Attributes every LogRecord has; anything else was passed through ``extra=`` and is context too.
_RECORD_FIELDS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", FIELDS_ATTR}


# -- verbosity ------------------------------------------------------------------------------------------


def vlevel(verbosity: int) -> int:
    """The Python level of klog's ``V(verbosity)``: 0 → INFO, 1-3 → 19-17, 4 → DEBUG, 5-10 → 9-4."""
    if not 0 <= verbosity <= MAX_VERBOSITY:
        raise ValueError(f"verbosity {verbosity} is not in 0-{MAX_VERBOSITY}")
    if verbosity < 4:
        return logging.INFO - verbosity
    return logging.DEBUG if verbosity == 4 else logging.DEBUG + 4 - verbosity


def verbosity_of(levelno: int) -> int:
    """The klog V-level of a record's Python level (the inverse of :func:`vlevel`; WARNING and up are 0)."""
    if levelno >= logging.INFO:
        return 0
    if levelno > logging.DEBUG + 6:
        return logging.INFO - levelno
    if levelno >= logging.DEBUG:
        return 4
    return min(MAX_VERBOSITY, 4 + logging.DEBUG - levelno)


def level_for(verbosity: int) -> int:
    """The logger level that shows the messages of V-level up to ``verbosity``."""
    return vlevel(max(0, min(MAX_VERBOSITY, verbosity)))


# -- the context of a record ----------------------------------------------------------------------------


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


def _safe_key(key: str) -> str:
    return key if _KEY.fullmatch(key) else "_" + re.sub(r"[^\w.\-]", "_", key)


def error_text(exc: BaseException) -> str:
    """An exception's text for a message, never empty: its type's name when ``str()`` is empty
    (``trio.TooSlowError()``, a bare ``ConnectionError``), so "runtime is down: " always says why."""
    return str(exc) or type(exc).__name__


def _klog_fields(record: logging.LogRecord) -> tuple[list[tuple[str, Any]], str | None]:
    """The record's fields for a klog layout and its ``err`` (from the exception or an ``err`` field)."""
    fields = record_fields(record)
    if "error" in fields and "err" not in fields:  # klog's key for errors
        fields = {("err" if key == "error" else key): value for key, value in fields.items()}
    err: str | None = None
    if record.exc_info and record.exc_info[1] is not None:
        err = error_text(record.exc_info[1])
    elif "err" in fields:
        value = fields.pop("err")
        err = error_text(value) if isinstance(value, BaseException) else _text(value)
    reserved = {"ts", "caller", "msg", "v", "err", "stacktrace"}
    out = []
    for key, value in fields.items():
        name = _safe_key(key)
        out.append((f"field.{name}" if name in reserved else name, value))
    return out, err


# -- text: Go's quoting ---------------------------------------------------------------------------------

_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_quote(text: str) -> str:
    """Go's ``strconv.Quote``: printable characters as they are, the rest escaped (one line, always)."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'  # the common case (names, IDs, paths), without a loop per character
    out = ['"']
    for char in text:
        code = ord(char)
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char == " " or (char.isprintable() and code != 0x7F):
            out.append(char)
        elif char in _GO_ESCAPES:
            out.append(_GO_ESCAPES[char])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif 0xD800 <= code <= 0xDFFF:  # a lone surrogate is not a valid rune: Go writes U+FFFD
            out.append("\\ufffd")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def _go_float(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return repr(value)


def _text(value: Any) -> str:
    if isinstance(value, enum.Enum) and isinstance(value.value, str | int):
        return str(value.value)
    return str(value)


def _klog_value(value: Any) -> str:
    """A value in klog's text layout: numbers and booleans bare, everything else a quoted string."""
    if isinstance(value, enum.Enum) and isinstance(value.value, str | int | float):
        value = value.value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    if value is None:
        return "<nil>"
    if isinstance(value, BaseException):
        return go_quote(error_text(value))
    if isinstance(value, list | tuple | set | frozenset):  # Go's %v of a slice, quoted
        return go_quote("[" + " ".join(_text(item) for item in value) + "]")
    if isinstance(value, Mapping):
        return go_quote("map[" + " ".join(f"{k}:{_text(v)}" for k, v in value.items()) + "]")
    return go_quote(_text(value))


_SEVERITY = {logging.CRITICAL: "E", logging.ERROR: "E", logging.WARNING: "W"}


class KlogTextFormatter(logging.Formatter):
    """klog's text layout: ``I1123 06:56:04.081062    1234 manager.py:42] "msg" key="value" n=3``."""

    def format(self, record: logging.LogRecord) -> str:
        severity = next((char for level, char in _SEVERITY.items() if record.levelno >= level), "I")
        when = self.converter(record.created)  # local time, as klog (a test may set time.gmtime)
        micros = round(record.created * 1_000_000) % 1_000_000
        header = (
            f"{severity}{when.tm_mon:02d}{when.tm_mday:02d} {when.tm_hour:02d}:{when.tm_min:02d}:"
            f"{when.tm_sec:02d}.{micros:06d} {record.process or os.getpid():7d} "
            f"{record.filename}:{record.lineno}] "
        )
        fields, err = _klog_fields(record)
        parts = [go_quote(record.getMessage())]
        if err is not None:  # klog.ErrorS writes err right after the message
            parts.append(f"err={go_quote(err)}")
        parts += [f"{key}={_klog_value(value)}" for key, value in fields]
        if record.exc_info:
            parts.append(f"stacktrace={go_quote(self.formatException(record.exc_info))}")
        return header + " ".join(parts)


# -- JSON -----------------------------------------------------------------------------------------------

# json.dumps leaves these line breaks raw; a line-oriented reader must not see them.
_SURROGATE = re.compile("[\ud800-\udfff]")
_LINE_BREAKS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _json_value(value: Any) -> Any:
    if isinstance(value, ObjectRef):
        return {"name": value.name, "namespace": value.namespace}
    if isinstance(value, enum.Enum):
        return _json_value(value.value) if isinstance(value.value, str | int) else str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return _go_float(value)  # zap writes NaN and infinities as strings
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, BaseException):
        return error_text(value)
    if isinstance(value, list | tuple | set | frozenset):
        return [_json_value(item) for item in value]
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    return str(value)


def _caller(record: logging.LogRecord) -> str:
    """zap's short caller: the file's directory and name, ``pod/manager.py:42``."""
    directory = os.path.basename(os.path.dirname(record.pathname))
    return (
        f"{directory}/{record.filename}:{record.lineno}"
        if directory
        else f"{record.filename}:{record.lineno}"
    )


class KlogJsonFormatter(logging.Formatter):
    """klog's JSON layout: ``{"ts", "caller", "msg", "v" (not on errors), <key/values>..., "err"?}``."""

    def format(self, record: logging.LogRecord) -> str:
        obj: dict[str, Any] = {
            "ts": record.created * 1000.0,  # Unix milliseconds, as component-base's JSON encoder
            "caller": _caller(record),
            "msg": record.getMessage(),
        }
        is_error = record.levelno >= logging.ERROR
        if not is_error:
            obj["v"] = verbosity_of(record.levelno)
        fields, err = _klog_fields(record)
        for key, value in fields:
            obj.setdefault(key, _json_value(value))
        if err is not None:
            obj["err"] = err
        if record.exc_info:
            obj["stacktrace"] = self.formatException(record.exc_info)
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))  # compact, as zap writes
        for raw, escaped in _LINE_BREAKS.items():
            text = text.replace(raw, escaped)
        return _SURROGATE.sub(lambda m: f"\\u{ord(m[0]):04x}", text)  # else the line cannot be encoded


# -- logfmt pairs (tests, the sim-cri tool) -------------------------------------------------------------

_NEEDS_QUOTES = re.compile(r'[\s"=\\]|[^\x21-\x7e]')


def _quote(value: Any) -> str:
    """A logfmt value: bare if it is a plain printable token, else a JSON string (quotes, escapes)."""
    text = _text(value)
    if text == "" or _NEEDS_QUOTES.search(text):
        quoted = json.dumps(text, ensure_ascii=False)
        for raw, escaped in _LINE_BREAKS.items():
            quoted = quoted.replace(raw, escaped)
        return quoted
    return text


def format_fields(record: logging.LogRecord) -> str:
    """The record's fields as logfmt pairs, ``pod=default/web uid=u1`` (for plain formats and tests)."""
    return " ".join(f"{_safe_key(key)}={_quote(value)}" for key, value in record_fields(record).items())


class FieldsFormatter(logging.Formatter):
    """A classic ``fmt`` line (``%(message)s`` etc.) followed by the record's fields in logfmt."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        context = format_fields(record)
        return f"{line} {context}" if context else line


def configure_logging(
    verbosity: int = 0,
    log_format: str = "text",
    *,
    stream: IO[str] | None = None,
    level: int | None = None,
) -> logging.Handler:
    """Route the root logger to ``stream`` (stderr) in klog's ``text`` or ``json`` layout; returns the
    handler.

    ``level`` overrides the level derived from ``verbosity`` (run-once shows only warnings by default).
    Third-party libraries log at WARNING and above.
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(KlogJsonFormatter() if log_format == "json" else KlogTextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    ours = level if level is not None else level_for(verbosity)
    logging.getLogger("kubelet_trio").setLevel(ours)
    return handler
