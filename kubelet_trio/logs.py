"""Log output for the daemon and run-once: logfmt text or one JSON object per line (``--log-format``).

The code logs ``logger.info("pod added pod=%s/%s uid=%s", ...)``: a short message followed by
``key=value`` context. The formatters split such a message back into its text and its pairs, so every line
about a pod carries ``pod``/``uid`` as fields in either format, without a structured-logging API spread
through the code base. In JSON, ``pod=ns/name`` becomes ``{"namespace": ..., "name": ...}`` (what klog's
``KObj`` renders), so log processors can select on the pod's namespace and name.

Verbosity follows the Go kubelet's ``--v``: 0-3 show info and above, 4 and more debug.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import sys
from typing import IO, Any

__all__ = ["JsonFormatter", "LogfmtFormatter", "configure_logging", "level_for", "split_message"]

DEBUG_VERBOSITY = 4
_KEY = re.compile(r"(?<![^\s])([A-Za-z_][\w.\-]*)=")
_OPEN, _CLOSE = "([{", ")]}"
_NEEDS_QUOTES = re.compile(r'[\s"=]')
# Attributes every LogRecord has; anything else was passed through ``extra=`` and is context too.
_RECORD_FIELDS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


def _top_level_keys(message: str) -> list[re.Match[str]]:
    """``key=`` matches outside brackets and quotes (so ``err=Error('x', code=2)`` stays one value)."""
    matches = []
    depth, quote, last = 0, "", 0
    for match in _KEY.finditer(message):
        for char in message[last : match.start()]:
            if quote:
                quote = "" if char == quote else quote
            elif char in "'\"":
                quote = char
            elif char in _OPEN:
                depth += 1
            elif char in _CLOSE:
                depth = max(depth - 1, 0)
        last = match.start()
        if depth == 0 and not quote:
            matches.append(match)
    return matches


def split_message(message: str) -> tuple[str, list[tuple[str, str]]]:
    """``"pod added pod=a/b uid=1"`` → ``("pod added", [("pod", "a/b"), ("uid", "1")])``.

    A value runs to the next top-level ``key=``, so values may contain spaces (``error=no such file``).
    """
    matches = _top_level_keys(message)
    if not matches:
        return message, []
    text = message[: matches[0].start()].rstrip()
    pairs = []
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(message)
        pairs.append((match[1], message[match.end() : end].strip()))
    return text, pairs


def _record_pairs(record: logging.LogRecord) -> tuple[str, list[tuple[str, Any]]]:
    text, pairs = split_message(record.getMessage())
    context: list[tuple[str, Any]] = list(pairs)
    context += [(k, v) for k, v in record.__dict__.items() if k not in _RECORD_FIELDS]
    return text, context


def _timestamp(record: logging.LogRecord) -> str:
    stamp = dt.datetime.fromtimestamp(record.created, dt.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond:06d}Z"


def _quote(value: Any) -> str:
    text = str(value)
    if text == "" or _NEEDS_QUOTES.search(text):
        return json.dumps(text, ensure_ascii=False)
    return text


class LogfmtFormatter(logging.Formatter):
    """``time=... level=info logger=kubelet_trio.kubelet msg="pod added" pod=default/web uid=...``."""

    def format(self, record: logging.LogRecord) -> str:
        text, context = _record_pairs(record)
        fields: list[tuple[str, Any]] = [
            ("time", _timestamp(record)),
            ("level", record.levelname.lower()),
            ("logger", record.name),
            ("msg", text),
            *context,
        ]
        line = " ".join(f"{key}={_quote(value)}" for key, value in fields)
        if record.exc_info:
            line += " error=" + _quote(self.formatException(record.exc_info))
        return line


def _json_value(key: str, value: Any) -> Any:
    if key == "pod" and isinstance(value, str) and value.count("/") == 1:
        namespace, name = value.split("/")
        return {"namespace": namespace, "name": name}
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``{"ts", "level", "logger", "msg", <context>..., "error"?}``."""

    def format(self, record: logging.LogRecord) -> str:
        text, context = _record_pairs(record)
        obj: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": text,
        }
        for key, value in context:
            obj.setdefault(key, _json_value(key, value))
        if record.exc_info:
            obj["error"] = self.formatException(record.exc_info)
        return json.dumps(obj, ensure_ascii=False)


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
