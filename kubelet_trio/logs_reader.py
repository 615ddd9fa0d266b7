"""Reading CRI container log files (Go: ``pkg/kubelet/kuberuntime/logs/logs.go``).

A runtime writes each container's output to ``<pod-logs-dir>/<ns>_<name>_<uid>/<container>/<n>.log``, one
record per line::

    2024-05-01T10:00:00.123456789Z stdout F hello world
    2024-05-01T10:00:00.200000000Z stderr P a long line, first par
    2024-05-01T10:00:00.200000001Z stderr F t and the rest

The tag ``P`` marks a partial record: the runtime split a long line, and the parts are joined up to the
next ``F`` (full) record of the same stream. Malformed records are skipped, like the Go kubelet does.

The functions here are blocking and small; callers run them through their ``run_sync``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

import attrs

__all__ = [
    "LogLine",
    "LogOptions",
    "LogParser",
    "format_lines",
    "read_log",
    "read_log_from",
    "select_lines",
    "tail_text",
]

logger = logging.getLogger(__name__)

STREAMS = ("stdout", "stderr")
READ_CHUNK = 1 << 20


@attrs.frozen
class LogLine:
    """One logical line: the timestamp of its first record, its stream and its text (no newline)."""

    timestamp: str
    stream: str
    text: str


@attrs.frozen
class LogOptions:
    """The subset of ``PodLogOptions`` the kubelet applies to a file (``follow``/``previous`` choose
    which file and how long to read it)."""

    tail_lines: int | None = None
    limit_bytes: int | None = None
    timestamps: bool = False
    since_time: str | None = None  # RFC3339 (Nano); lines strictly older are dropped
    stream: str | None = None  # "stdout" / "stderr" / None for both


@attrs.define
class LogParser:
    """Incremental parser: feed bytes as they are read; complete lines come out, partials wait."""

    _buffer: bytes = b""
    _partial: dict[str, tuple[str, list[str]]] = attrs.Factory(dict)  # stream -> (timestamp, parts)

    def feed(self, data: bytes) -> list[LogLine]:
        self._buffer += data
        *records, self._buffer = self._buffer.split(b"\n")
        lines: list[LogLine] = []
        for record in records:
            line = self._record(record)
            if line is not None:
                lines.append(line)
        return lines

    def flush(self) -> list[LogLine]:
        """At the end of a file that will not grow: what is left, partial records included."""
        lines = [LogLine(ts, stream, "".join(parts)) for stream, (ts, parts) in self._partial.items()]
        self._partial.clear()
        return lines

    def _record(self, raw: bytes) -> LogLine | None:
        text = raw.decode("utf-8", errors="replace")
        fields = text.split(" ", 3)
        if len(fields) < 3 or fields[1] not in STREAMS or fields[2] not in ("P", "F"):
            if text.strip():
                logger.debug("skipping malformed CRI log record record=%r", text[:80])
            return None
        timestamp, stream, tag = fields[:3]
        content = fields[3] if len(fields) == 4 else ""
        first_ts, parts = self._partial.pop(stream, (timestamp, []))
        parts.append(content)
        if tag == "P":
            self._partial[stream] = (first_ts, parts)
            return None
        return LogLine(first_ts, stream, "".join(parts))


def read_log_from(path: str, offset: int) -> tuple[bytes, int]:
    """The bytes of ``path`` from ``offset`` on, and the new offset (a truncated file restarts at 0)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < offset:
            offset = 0
        f.seek(offset)
        data = f.read()
    return data, offset + len(data)


def read_log(path: str) -> list[LogLine]:
    """Every line of a finished (or current) log file; a missing file has none."""
    try:
        data, _ = read_log_from(path, 0)
    except FileNotFoundError:
        return []
    if data and not data.endswith(b"\n"):
        data += b"\n"  # the file will not grow: its last record is complete
    parser = LogParser()
    return parser.feed(data) + parser.flush()


def _stamp_key(timestamp: str) -> tuple[str, str]:
    """Sort key for RFC3339Nano UTC stamps (``...:05Z`` < ``...:05.5Z``)."""
    head, _, frac = timestamp.rstrip("Z").partition(".")
    return head, frac.ljust(9, "0")


def select_lines(lines: Iterable[LogLine], options: LogOptions) -> list[LogLine]:
    """Apply stream, sinceTime and tailLines (in that order, as the Go kubelet does)."""
    chosen = [line for line in lines if options.stream is None or line.stream == options.stream]
    if options.since_time is not None:
        since = _stamp_key(options.since_time)
        chosen = [line for line in chosen if _stamp_key(line.timestamp) >= since]
    if options.tail_lines is not None:
        chosen = chosen[-options.tail_lines :] if options.tail_lines > 0 else []
    return chosen


def format_lines(lines: Iterable[LogLine], timestamps: bool) -> bytes:
    return b"".join(
        ((f"{line.timestamp} " if timestamps else "") + line.text + "\n").encode() for line in lines
    )


def tail_text(path: str, count: int) -> list[str]:
    """The last ``count`` lines a container printed (both streams), for reports."""
    return [line.text for line in select_lines(read_log(path), LogOptions(tail_lines=count))]
