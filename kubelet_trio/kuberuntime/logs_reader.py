"""Reading CRI container log files (Go: ``pkg/kubelet/kuberuntime/logs/logs.go``, ``pkg/util/tail``).

A runtime writes each container's output to ``<pod-logs-dir>/<ns>_<name>_<uid>/<container>/<n>.log``, one
record per line::

    2024-05-01T10:00:00.123456789Z stdout F hello world
    2024-05-01T10:00:00.200000000Z stderr P a long line, first par
    2024-05-01T10:00:00.200000001Z stderr F t and the rest

The tag ``F`` marks a full line, ``P`` a fragment: the runtime split a long line, or the process wrote
text without a newline (``printf value-1``). As in Go, a record's text is served as it was written: an
``F`` record ends with a newline, a ``P`` record does not, so fragments join the text that follows them
and ``printf value-1`` is served as ``value-1``. Malformed records are skipped.

Reads cost what they return, not the size of the file: ``tailLines`` counts records backwards from the
end of the file (in blocks of :data:`TAIL_BLOCK`), ``limitBytes`` stops reading once it is spent, and the
rest is read forwards in chunks of :data:`READ_CHUNK`, so memory stays bounded whatever the file's size
(a gzip'd rotated file cannot be read backwards: ``tailLines`` that reach into one decompress it twice,
still in chunks).

Rotated files (``0.log.<YYYYmmdd-HHMMSS>``, the newest uncompressed, older ones gzip'd; a ``.tmp`` file
is a compression that did not finish; see :mod:`kubelet_trio.container_log_manager`) come before the
current file, so ``tailLines`` and full reads continue into them (Go reads the current file only).

The functions here are blocking; callers run them through their ``run_sync``.
"""

from __future__ import annotations

import datetime as dt
import gzip
import io
import logging
import os
from collections.abc import Iterator

import attrs

from kubelet_trio.logs import kv

__all__ = [
    "COMPRESS_SUFFIX",
    "READ_CHUNK",
    "TAIL_BLOCK",
    "TMP_SUFFIX",
    "LogOptions",
    "LogReader",
    "LogRecord",
    "all_logs",
    "filter_unused_logs",
    "parse_record",
    "parse_timestamp",
    "read_text",
    "rotated_logs",
    "tail_text",
]

logger = logging.getLogger(__name__)

STREAMS = (b"stdout", b"stderr")
READ_CHUNK = 64 * 1024  # forward reads: the most input one read() call consumes
TAIL_BLOCK = 8 * 1024  # backward scans for tailLines
_FULL, _PARTIAL = b"F", b"P"
COMPRESS_SUFFIX = ".gz"
TMP_SUFFIX = ".tmp"


def rotated_logs(log_path: str) -> list[str]:
    """Every file rotated out of ``log_path`` (``<log_path>.*``, in use or not), sorted by name."""
    directory, base = os.path.split(log_path)
    try:
        names = os.listdir(directory or ".")
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(os.path.join(directory, n) for n in names if n.startswith(base + "."))


def filter_unused_logs(logs: list[str]) -> tuple[list[str], list[str]]:
    """``(in use, unused)``: temporary files, and uncompressed files that also exist compressed, are left
    over from an interrupted rotation."""
    present = set(logs)
    in_use: list[str] = []
    unused: list[str] = []
    for log in logs:
        stale = log.endswith(TMP_SUFFIX) or (
            not log.endswith(COMPRESS_SUFFIX) and log + COMPRESS_SUFFIX in present
        )
        (unused if stale else in_use).append(log)
    return in_use, unused


def all_logs(log_path: str) -> list[str]:
    """The in-use rotated files of ``log_path``, oldest first, then ``log_path`` itself (Go:
    ``GetAllLogs``; the timestamp in their names makes name order age order)."""
    in_use, _ = filter_unused_logs(rotated_logs(log_path))
    return [*in_use, log_path]


@attrs.frozen
class LogOptions:
    """The subset of ``PodLogOptions`` applied to the file (``follow``/``previous`` choose which file
    and how long to read it)."""

    tail_lines: int | None = None
    limit_bytes: int | None = None
    timestamps: bool = False
    since_ns: int | None = None  # records stamped earlier are dropped
    stream: str | None = None  # "stdout" / "stderr" / None for both


@attrs.frozen
class LogRecord:
    """One CRI log record: its timestamp as written, stream, whether it is a fragment (``P``), and its
    text without the newline."""

    timestamp: bytes
    stream: bytes
    partial: bool
    content: bytes


def parse_record(raw: bytes) -> LogRecord | None:
    """A record from one line of the file (without its newline); ``None`` when it is not one."""
    fields = raw.split(b" ", 3)
    if len(fields) < 3 or fields[1] not in STREAMS:
        return None
    tag = fields[2].split(b":", 1)[0]  # tags may carry more after ':' (forward compatible, as Go)
    if tag not in (_FULL, _PARTIAL):
        return None
    return LogRecord(fields[0], fields[1], tag == _PARTIAL, fields[3] if len(fields) == 4 else b"")


def _split_timestamp(stamp: str) -> tuple[str, str, str]:
    """``(seconds part, fraction digits, zone)`` of an RFC3339 timestamp; ValueError if malformed."""
    head, rest = stamp[:19], stamp[19:]
    digits = ""
    if rest.startswith("."):
        end = 1
        while end < len(rest) and rest[end].isdigit():
            end += 1
        digits, rest = rest[1:end], rest[end:]
    if len(head) != 19 or head[10] not in "Tt" or not (rest in ("Z", "z") or rest[:1] in ("+", "-")):
        raise ValueError(f"not an RFC3339 timestamp: {stamp!r}")
    return head, digits, rest


def parse_timestamp(stamp: str) -> int:
    """An RFC3339 timestamp with any fraction (Go's ``RFC3339NanoLenient``) → nanoseconds since the epoch."""
    head, digits, zone = _split_timestamp(stamp)
    moment = dt.datetime.fromisoformat(head + ("+00:00" if zone in ("Z", "z") else zone))
    seconds = (moment - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(seconds=1)
    return seconds * 10**9 + int((digits + "000000000")[:9])


def _fixed_timestamp(stamp: bytes) -> bytes:
    """Go's ``RFC3339NanoFixed``: always nine fraction digits, the zone as written."""
    head, digits, zone = _split_timestamp(stamp.decode("ascii"))
    return f"{head}.{(digits + '000000000')[:9]}{zone}".encode("ascii")


@attrs.define(eq=False)
class _Source:
    """One open log file of the read: a rotated one (plain or gzip'd) or the current one (``live``: it
    may still grow)."""

    path: str
    file: io.BufferedIOBase
    live: bool
    identity: tuple[int, int] = (0, 0)  # (st_dev, st_ino) of a plain file
    skip: int = 0  # selected records to drop first (a gzip'd file cannot be seeked into)

    def close(self) -> None:
        self.file.close()


def _identity(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


@attrs.define(eq=False)
class LogReader:
    """A cursor over one container instance's log: its rotated files, then the current one.

    Open with :meth:`open` (which places the cursor for ``tailLines``), call :meth:`read` until
    :attr:`at_end`, then :meth:`finish` once the file will not grow (or, when following, wait and read
    again; :meth:`follow_rotation` moves on to the file a rotation created). :attr:`bytes_read` counts
    the input read, scans included; :attr:`done` is set once ``limitBytes`` is spent or, when not
    following, ``tailLines`` records were served (records written meanwhile are not). Close when done.
    """

    path: str
    options: LogOptions
    _sources: list[_Source] = attrs.Factory(list)
    _carry: bytes = b""  # the start of a record whose newline has not been read yet
    _left: int | None = None  # what is left of limitBytes
    _records_left: int | None = None  # what is left of tailLines when not following
    _stream: bytes | None = None
    at_end: bool = False
    bytes_read: int = 0

    def __attrs_post_init__(self) -> None:
        self._left = self.options.limit_bytes
        self._stream = self.options.stream.encode() if self.options.stream else None

    # -- opening -------------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str, options: LogOptions, *, follow: bool = False, rotated: bool = True) -> LogReader:
        """A reader of ``path`` (and, with ``rotated``, the files rotated out of it), placed at the
        start of the last ``tailLines`` records. A missing current file reads as empty."""
        reader = cls(path, options)
        reader._records_left = None if follow else options.tail_lines
        names = all_logs(path) if rotated else [path]
        opened: list[_Source] = []
        try:
            for name in names:
                source = reader._open_source(name, live=name == path)
                if source is not None:
                    opened.append(source)
            reader._sources = reader._place(opened)
        except BaseException:
            for source in opened:
                source.close()
            raise
        return reader

    def _open_source(self, name: str, *, live: bool) -> _Source | None:
        try:
            if name.endswith(COMPRESS_SUFFIX):
                return _Source(name, gzip.GzipFile(name, "rb"), live=False)
            try:
                file = open(name, "rb")  # noqa: SIM115 - owned by the _Source
            except FileNotFoundError:
                if live:
                    return None
                # compressed since it was listed: read the compressed copy
                return _Source(name, gzip.GzipFile(name + COMPRESS_SUFFIX, "rb"), live=False)
            return _Source(name, file, live=live, identity=_identity(file.fileno()))
        except FileNotFoundError:
            return None  # removed since it was listed (the oldest files go first)

    def _place(self, sources: list[_Source]) -> list[_Source]:
        """Keep the newest sources holding the last ``tailLines`` records, positioned at the first."""
        wanted = self.options.tail_lines
        if wanted is None:
            return sources
        kept: list[_Source] = []
        for source in reversed(sources):
            if wanted <= 0 and not source.live:
                source.close()
                continue
            found = self._position(source, wanted)
            wanted -= found
            kept.append(source)
        kept.reverse()
        return kept

    def _position(self, source: _Source, wanted: int) -> int:
        """Place ``source`` at the first of its last ``wanted`` selected records; how many it holds."""
        if isinstance(source.file, gzip.GzipFile):
            total = sum(1 for _ in self._records_forward(source.file))
            source.skip = max(total - wanted, 0)
            source.file.seek(0)
            return min(total, wanted)
        size = os.fstat(source.file.fileno()).st_size
        if wanted <= 0:
            source.file.seek(size)
            return 0
        found, start = 0, size
        for offset, raw in self._records_backward(source.file, self._terminated_end(source.file, size)):
            if self._selected(raw):
                found, start = found + 1, offset
                if found == wanted:
                    break
        source.file.seek(start if found == wanted else 0)
        return found

    def _selected(self, raw: bytes) -> bool:
        """A record that counts for ``tailLines``: well-formed, of the selected stream."""
        record = parse_record(raw)
        return record is not None and (self._stream is None or record.stream == self._stream)

    def _records_forward(self, file: io.BufferedIOBase) -> Iterator[bytes]:
        """The selected newline-terminated records of a (gzip'd) file, for counting."""
        carry = b""
        while chunk := file.read(READ_CHUNK):
            self.bytes_read += len(chunk)
            *records, carry = (carry + chunk).split(b"\n")
            for raw in records:
                if self._selected(raw):
                    yield raw

    def _terminated_end(self, file: io.BufferedIOBase, size: int) -> int:
        """The offset just past the file's last newline (a record being written is not counted, as Go)."""
        pos = size
        while pos > 0:
            start = max(0, pos - TAIL_BLOCK)
            file.seek(start)
            block = file.read(pos - start)
            self.bytes_read += len(block)
            newline = block.rfind(b"\n")
            if newline >= 0:
                return start + newline + 1
            pos = start
        return 0

    def _records_backward(self, file: io.BufferedIOBase, end: int) -> Iterator[tuple[int, bytes]]:
        """``(offset, record)`` of the records before ``end`` (just past a newline), last first."""
        pos, tail = end, b""
        while pos > 0:
            start = max(0, pos - TAIL_BLOCK)
            file.seek(start)
            block = file.read(pos - start)
            self.bytes_read += len(block)
            parts = (block + tail).split(b"\n")  # ends with b"": the block ends just past a newline
            cursor = start + len(block) + len(tail)
            for raw in reversed(parts[1:-1]):
                cursor -= len(raw) + 1
                yield cursor, raw
            if start == 0:
                yield 0, parts[0]
                return
            tail = parts[0] + b"\n"  # a record that began before this block
            pos = start

    # -- reading -------------------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        """Nothing more will be returned: ``limitBytes`` is spent, or the ``tailLines`` were served."""
        return (self._left is not None and self._left <= 0) or self._records_left == 0

    def read(self) -> bytes:
        """The output for the next chunk of input (possibly empty); sets :attr:`at_end` when the current
        file has nothing more for now."""
        while self._sources and not self.done:
            source = self._sources[0]
            data = source.file.read(READ_CHUNK)
            self.bytes_read += len(data)
            if data:
                self.at_end = False
                *records, self._carry = (self._carry + data).split(b"\n")
                return self._render(records, source, terminated=True)
            if source.live:
                break
            out = self._flush(source)  # a rotated file is complete, even without a final newline
            source.close()
            self._sources.pop(0)
            if out:
                return out
        self.at_end = True
        return b""

    def finish(self) -> bytes:
        """The record still being written, as it is: the file will not grow any more (Go serves an
        incomplete last line too)."""
        return self._flush(self._sources[0]) if self._sources else b""

    def follow_rotation(self) -> bool:
        """At the end of the current file, switch to a new file at ``path`` (the runtime reopened its log
        after a rotation); True if it did. The old file is read to its end first."""
        live = self._sources[-1] if self._sources and self._sources[-1].live else None
        try:
            st = os.stat(self.path)
            if live is not None and live.identity == (st.st_dev, st.st_ino):
                return False
            file = open(self.path, "rb")  # noqa: SIM115 - owned by the new _Source
        except FileNotFoundError:
            return False  # rotated, not reopened yet
        identity = _identity(file.fileno())
        if live is not None:
            live.live = False
        self._sources.append(_Source(self.path, file, live=True, identity=identity))
        self.at_end = False
        return True

    def close(self) -> None:
        for source in self._sources:
            source.close()
        self._sources.clear()

    def _flush(self, source: _Source) -> bytes:
        carry, self._carry = self._carry, b""
        return self._render([carry], source, terminated=False) if carry else b""

    def _render(self, records: list[bytes], source: _Source, *, terminated: bool) -> bytes:
        options = self.options
        out: list[bytes] = []
        for raw in records:
            record = parse_record(raw)
            if record is None:
                if raw:
                    logger.debug(
                        "skipping malformed CRI log record", extra=kv(path=source.path, record=raw[:80])
                    )
                continue
            if self._stream is not None and record.stream != self._stream:
                continue
            if source.skip:
                source.skip -= 1
                continue
            if self._records_left is not None:
                if self._records_left <= 0:
                    break
                self._records_left -= 1
            try:
                if (
                    options.since_ns is not None
                    and parse_timestamp(record.timestamp.decode()) < options.since_ns
                ):
                    continue
                prefix = _fixed_timestamp(record.timestamp) + b" " if options.timestamps else b""
            except (ValueError, UnicodeDecodeError):
                logger.debug("skipping CRI log record with a bad timestamp", extra=kv(path=source.path))
                continue
            newline = b"\n" if terminated and not record.partial else b""
            out.append(prefix + record.content + newline)
        data = b"".join(out)
        if self._left is not None:
            data = data[: max(self._left, 0)]
            self._left -= len(data)
        return data


def read_text(path: str, options: LogOptions, *, max_bytes: int | None = None) -> bytes:
    """The whole (finished) output for ``options``; with ``max_bytes``, only its last ``max_bytes``
    (Go's circular buffer for termination messages), holding no more than that."""
    reader = LogReader.open(path, options)
    kept = b""
    try:
        while True:
            chunk = reader.read()
            if reader.at_end or reader.done:
                chunk += reader.finish() if not reader.done else b""
            kept += chunk
            if max_bytes is not None and len(kept) > max_bytes:
                kept = kept[-max_bytes:]
            if reader.at_end or reader.done:
                return kept
    finally:
        reader.close()


def tail_text(path: str, count: int) -> list[str]:
    """The last ``count`` records a container printed (both streams) as lines, for reports."""
    text = read_text(path, LogOptions(tail_lines=count)).decode("utf-8", "replace")
    return text.splitlines()
