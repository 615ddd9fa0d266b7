"""Reading CRI log files: records as written (fragments without a newline), reads that cost what they
return, and rotated files read before the current one."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from kubelet_trio.kuberuntime.logs_reader import (
    READ_CHUNK,
    TAIL_BLOCK,
    LogOptions,
    LogReader,
    LogRecord,
    all_logs,
    parse_record,
    parse_timestamp,
    read_text,
    tail_text,
)

STAMP = "2024-05-01T10:00:00.5Z"


def rec(text: str, *, stream: str = "stdout", tag: str = "F", stamp: str = STAMP) -> str:
    return f"{stamp} {stream} {tag} {text}\n"


def lines(start: int, stop: int, width: int = 0) -> str:
    return "".join(rec(f"line {i}".ljust(width, ".")) for i in range(start, stop))


def read_all(reader: LogReader, *, finish: bool = True) -> bytes:
    out = b""
    while True:
        out += reader.read()
        if reader.at_end or reader.done:
            break
    if finish and not reader.done:
        out += reader.finish()
    return out


def test_parse_record() -> None:
    assert parse_record(b"2024-05-01T10:00:00Z stdout F hello world") == LogRecord(
        b"2024-05-01T10:00:00Z", b"stdout", False, b"hello world"
    )
    assert parse_record(b"2024-05-01T10:00:00Z stderr P part") == LogRecord(
        b"2024-05-01T10:00:00Z", b"stderr", True, b"part"
    )
    tagged = parse_record(b"2024-05-01T10:00:00Z stdout F:extra x")  # more tags after ':' (as Go)
    assert tagged is not None and not tagged.partial and tagged.content == b"x"
    assert parse_record(b"2024-05-01T10:00:00Z stdout F") == LogRecord(
        b"2024-05-01T10:00:00Z", b"stdout", False, b""
    )
    for garbage in (
        b"",
        b"not a record",
        b"2024-05-01T10:00:00Z stdin F x",
        b"2024-05-01T10:00:00Z stdout X y",
    ):
        assert parse_record(garbage) is None


def test_timestamps() -> None:
    assert parse_timestamp("1970-01-01T00:00:01Z") == 10**9
    assert parse_timestamp("1970-01-01T00:00:01.5Z") == 1_500_000_000
    assert parse_timestamp("1970-01-01T00:00:01.123456789123Z") == 1_123_456_789
    assert parse_timestamp("1970-01-01T01:00:01+01:00") == 10**9
    for bad in ("yesterday", "1970-01-01 00:00:01", "1970-01-01T00:00:01"):
        with pytest.raises(ValueError):
            parse_timestamp(bad)


def test_fragments_keep_their_missing_newline(tmp_path: Path) -> None:
    """Go serves a record as written: ``printf value-1`` is ``value-1``; a fragment joins what follows."""
    log = tmp_path / "0.log"
    log.write_text(rec("value-1", tag="P"))
    assert read_text(str(log), LogOptions()) == b"value-1"
    log.write_text(rec("a") + rec("long line, ", tag="P") + rec("continued") + rec("DONE", tag="P"))
    assert read_text(str(log), LogOptions()) == b"a\nlong line, continued\nDONE"
    assert read_text(str(log), LogOptions(tail_lines=2)) == b"continued\nDONE"
    stamped = read_text(str(log), LogOptions(tail_lines=1, timestamps=True))
    assert stamped == b"2024-05-01T10:00:00.500000000Z DONE"  # Go's RFC3339NanoFixed


def test_streams_since_and_garbage(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    log.write_text(
        rec("old", stamp="2024-05-01T10:00:00Z")
        + "garbage\n"
        + rec("err", stream="stderr", stamp="2024-05-01T10:00:01Z")
        + rec("new", stamp="2024-05-01T10:00:02.25Z")
    )
    path = str(log)
    assert read_text(path, LogOptions()) == b"old\nerr\nnew\n"
    assert read_text(path, LogOptions(stream="stderr")) == b"err\n"
    assert read_text(path, LogOptions(stream="stdout", tail_lines=1)) == b"new\n"
    assert read_text(path, LogOptions(tail_lines=2)) == b"err\nnew\n"  # garbage is not a record
    since = parse_timestamp("2024-05-01T10:00:01Z")
    assert read_text(path, LogOptions(since_ns=since)) == b"err\nnew\n"
    assert read_text(path, LogOptions(since_ns=since + 1)) == b"new\n"
    assert read_text(path, LogOptions(limit_bytes=6)) == b"old\ner"


def test_an_unterminated_last_record_is_served_but_not_counted(tmp_path: Path) -> None:
    """A record being written: Go does not count it for tailLines, and serves it once the file is done."""
    log = tmp_path / "0.log"
    log.write_text(rec("a") + rec("b") + rec("c").rstrip("\n"))
    assert read_text(str(log), LogOptions(tail_lines=1)) == b"b\n"  # tailLines records, then stop
    assert read_text(str(log), LogOptions()) == b"a\nb\nc"
    reader = LogReader.open(str(log), LogOptions())
    assert read_all(reader, finish=False) == b"a\nb\n"  # following: wait for the rest of "c"
    with log.open("a") as f:
        f.write("\n" + rec("d"))
    assert read_all(reader) == b"c\nd\n"
    reader.close()


def test_tail_reads_from_the_end_only(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    log.write_text(lines(0, 100_000, width=90))  # ~12 MB
    reader = LogReader.open(str(log), LogOptions(tail_lines=10))
    out = read_all(reader)
    reader.close()
    assert out == "".join(f"line {i}".ljust(90, ".") + "\n" for i in range(99_990, 100_000)).encode()
    # the last block is read to find the end, then blocks back until 10 records are found, then forwards
    assert reader.bytes_read <= 3 * TAIL_BLOCK + 2 * len(out)


def test_limit_bytes_stops_reading(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    log.write_text(lines(0, 100_000, width=90))
    reader = LogReader.open(str(log), LogOptions(limit_bytes=1000))
    out = read_all(reader)
    reader.close()
    assert len(out) == 1000 and out.startswith(b"line 0....")
    assert reader.done and reader.bytes_read == READ_CHUNK


def test_full_reads_come_in_bounded_chunks(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    log.write_text(lines(0, 20_000, width=90))
    reader = LogReader.open(str(log), LogOptions())
    chunks: list[bytes] = []
    while not reader.at_end:
        chunks.append(reader.read())
    reader.close()
    assert len(chunks) > 20 and max(len(c) for c in chunks) <= READ_CHUNK
    assert b"".join(chunks) == "".join(f"line {i}".ljust(90, ".") + "\n" for i in range(20_000)).encode()


def rotated_set(tmp_path: Path) -> Path:
    """0.log holds lines 10-12 and a fragment; 0.log.<t2> lines 5-9; 0.log.<t1>.gz lines 0-4."""
    log = tmp_path / "0.log"
    with gzip.open(f"{log}.20240501-100000.gz", "wb") as f:
        f.write(lines(0, 5).encode())
    Path(f"{log}.20240501-100010").write_text(lines(5, 10))
    log.write_text(lines(10, 13) + rec("tail", tag="P"))
    return log


def test_rotated_files_are_read_first(tmp_path: Path) -> None:
    log = rotated_set(tmp_path)
    everything = "".join(f"line {i}\n" for i in range(13)) + "tail"
    assert read_text(str(log), LogOptions()).decode() == everything
    for count in range(16):
        expected = "".join(f"{r}\n" for r in everything.split("\n")[-count:]).rstrip("\n") if count else ""
        assert read_text(str(log), LogOptions(tail_lines=count)).decode() == expected, count
    assert tail_text(str(log), 3) == ["line 11", "line 12", "tail"]


def test_leftovers_of_an_interrupted_rotation_are_not_read(tmp_path: Path) -> None:
    log = rotated_set(tmp_path)
    Path(f"{log}.20240501-100000").write_text(lines(0, 5))  # compressed already: a leftover
    Path(f"{log}.20240501-100010.gz.tmp").write_text("half a gzip")
    assert all_logs(str(log)) == [f"{log}.20240501-100000.gz", f"{log}.20240501-100010", str(log)]
    assert read_text(str(log), LogOptions()).decode().startswith("line 0\nline 1\n")


def test_missing_current_file_reads_the_rotated_ones(tmp_path: Path) -> None:
    log = rotated_set(tmp_path)
    log.unlink()
    assert read_text(str(log), LogOptions(tail_lines=2)) == b"line 8\nline 9\n"
    assert read_text(str(tmp_path / "none.log"), LogOptions()) == b""


def test_following_continues_into_the_new_file_after_a_rotation(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    log.write_text(lines(0, 2))
    reader = LogReader.open(str(log), LogOptions(tail_lines=1), follow=True)
    assert read_all(reader, finish=False) == b"line 1\n"
    assert not reader.follow_rotation()  # same file
    os.rename(log, f"{log}.20240501-100000")
    assert not reader.follow_rotation()  # not reopened yet
    with open(f"{log}.20240501-100000", "a") as f:
        f.write(rec("written before the reopen"))
    log.write_text(rec("first in the new file"))
    assert reader.follow_rotation()
    assert read_all(reader, finish=False) == b"written before the reopen\nfirst in the new file\n"
    reader.close()


def test_tail_serves_that_many_records_unless_following(tmp_path: Path) -> None:
    """Go stops after tailLines records when not following, even if the file grew meanwhile."""
    log = tmp_path / "0.log"
    log.write_text(lines(0, 5))
    reader = LogReader.open(str(log), LogOptions(tail_lines=2))
    following = LogReader.open(str(log), LogOptions(tail_lines=2), follow=True)
    with log.open("a") as f:
        f.write(rec("written after the open"))
    assert read_all(reader) == b"line 3\nline 4\n" and reader.done
    assert read_all(following, finish=False) == b"line 3\nline 4\nwritten after the open\n"
    assert not following.done
    reader.close()
    following.close()
