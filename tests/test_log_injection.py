"""A hostile value (a probe's output, a runtime error) cannot forge a field or a line in klog's text or
JSON layout.

Each line is parsed back with an independent klog text reader (header, quoted message, ``key=value`` with
Go-quoted strings, decoded here from Go's escape rules) and ``json.loads``; the fields must be exactly the
ones the call site passed, with the hostile value intact.
"""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest

from kubelet_trio.logs import KlogJsonFormatter, KlogTextFormatter, kref, kv

HOSTILE = [
    "x level=debug user=admin\n",
    'x" level=debug user="admin',
    "ok\nlevel=error msg=forged",
    'ok\nE1123 06:56:04.081062    1234 forged.go:1] "forged"',
    'a\\" user=admin',
    "line\rbreak\u2028and\x85more user=admin",
    "=== user=admin ===",
    "",
    " ",
    "{}",
    'pod=evil/pod uid=0 msg="forged"',
    "\x00\x1b[2J\x7f\ud800",
]

_HEADER = re.compile(r"([IWE])\d{4} \d{2}:\d{2}:\d{2}\.\d{6} {1,7}\d+ [\w.]+:\d+\] ")
_GO_STRING = r'"(?:[^"\\]|\\.)*"'
_PAIR = re.compile(rf"([A-Za-z_][\w.\-]*)=({_GO_STRING}|[^\s\"=]+)(?: |$)")
_SIMPLE = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", '"': '"'}


def go_unquote(quoted: str) -> str:
    """Go's ``strconv.Unquote`` for the escapes ``strconv.Quote`` writes."""
    body, out, pos = quoted[1:-1], [], 0
    while pos < len(body):
        char = body[pos]
        if char != "\\":
            out.append(char)
            pos += 1
            continue
        kind = body[pos + 1]
        if kind in _SIMPLE:
            out.append(_SIMPLE[kind])
            pos += 2
        else:
            width = {"x": 2, "u": 4, "U": 8}[kind]
            out.append(chr(int(body[pos + 2 : pos + 2 + width], 16)))
            pos += 2 + width
    return "".join(out)


def parse_klog(line: str) -> tuple[str, str, list[tuple[str, str]]]:
    """``(severity, message, [(key, value)])`` of one klog text line."""
    header = _HEADER.match(line)
    assert header, f"no klog header: {line!r}"
    message = re.compile(_GO_STRING).match(line, header.end())
    assert message, f"no quoted message: {line!r}"
    pairs, pos = [], message.end()
    while pos < len(line):
        assert line[pos] == " ", f"expected a space at {pos}: {line[pos:]!r}"
        match = _PAIR.match(line, pos + 1)
        assert match, f"unparseable at {pos}: {line[pos:]!r}"
        key, raw = match.groups()
        pairs.append((key, go_unquote(raw) if raw.startswith('"') else raw))
        pos = match.end() - (1 if match.group(0).endswith(" ") else 0)
    return header[1], go_unquote(message[0]), pairs


@pytest.fixture
def lines() -> Iterator[tuple[logging.Logger, io.StringIO, io.StringIO]]:
    logger = logging.getLogger("kubelet_trio.test_log_injection")
    text, js = io.StringIO(), io.StringIO()
    handlers = []
    for stream, formatter in ((text, KlogTextFormatter()), (js, KlogJsonFormatter())):
        handler = logging.StreamHandler(stream)
        handler.setFormatter(formatter)
        logger.addHandler(handler)
        handlers.append(handler)
    saved, logger.propagate = logger.propagate, False
    logger.setLevel(logging.INFO)
    try:
        yield logger, text, js
    finally:
        for handler in handlers:
            logger.removeHandler(handler)
        logger.propagate = saved


def _lone_surrogate_safe(value: str) -> str:
    """What a value reads back as: a lone surrogate is not a valid character (Go writes U+FFFD)."""
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in value)


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_value_cannot_forge_a_field(
    value: str, lines: tuple[logging.Logger, io.StringIO, io.StringIO]
) -> None:
    logger, text, js = lines
    logger.info("probe failed", extra=kv(pod=kref("default", "web"), uid="u1", output=value, err=value))

    [text_line] = text.getvalue().splitlines()
    severity, message, pairs = parse_klog(text_line)
    assert (severity, message) == ("I", "probe failed")
    assert [key for key, _ in pairs] == ["err", "pod", "uid", "output"]
    fields = dict(pairs)
    assert (fields["pod"], fields["uid"]) == ("default/web", "u1")
    assert fields["output"] == fields["err"] == _lone_surrogate_safe(value)

    [json_line] = js.getvalue().splitlines()
    obj = json.loads(json_line)
    assert list(obj) == ["ts", "caller", "msg", "v", "pod", "uid", "output", "err"]
    assert obj["v"] == 0 and obj["msg"] == "probe failed"
    assert obj["pod"] == {"name": "web", "namespace": "default"}
    assert obj["output"] == obj["err"] == value


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_pod_name_stays_one_field(
    value: str, lines: tuple[logging.Logger, io.StringIO, io.StringIO]
) -> None:
    logger, text, js = lines
    logger.warning("pod rejected", extra=kv(pod=kref("ns " + value, value)))
    severity, message, pairs = parse_klog(text.getvalue().rstrip("\n"))
    assert (severity, message, [key for key, _ in pairs]) == ("W", "pod rejected", ["pod"])
    assert dict(pairs)["pod"] == _lone_surrogate_safe(f"ns {value}/{value}")
    obj = json.loads(js.getvalue())
    assert obj["pod"] == {"name": value, "namespace": "ns " + value}


def test_a_field_cannot_take_a_reserved_name(lines: tuple[logging.Logger, io.StringIO, io.StringIO]) -> None:
    logger, text, js = lines
    logger.info("m", extra=kv(v=9, msg="forged", ts=0, caller="x.go:1", **{"bad key": "x"}))
    _, message, pairs = parse_klog(text.getvalue().rstrip("\n"))
    assert message == "m"
    assert dict(pairs) == {
        "field.v": "9",
        "field.msg": "forged",
        "field.ts": "0",
        "field.caller": "x.go:1",
    } | {"_bad_key": "x"}
    obj = json.loads(js.getvalue())
    assert (obj["v"], obj["msg"], obj["field.v"], obj["field.msg"], obj["_bad_key"]) == (
        0,
        "m",
        9,
        "forged",
        "x",
    )


def test_exception_text_cannot_forge_a_field(lines: tuple[logging.Logger, io.StringIO, io.StringIO]) -> None:
    logger, text, js = lines
    try:
        raise RuntimeError("boom\nlevel=debug user=admin")
    except RuntimeError:
        logger.exception("sync failed", extra=kv(uid="u1"))
    [line] = text.getvalue().splitlines()
    severity, message, pairs = parse_klog(line)
    assert (severity, message, [key for key, _ in pairs]) == (
        "E",
        "sync failed",
        ["err", "uid", "stacktrace"],
    )
    assert dict(pairs)["err"] == "boom\nlevel=debug user=admin"
    assert dict(pairs)["stacktrace"].endswith("RuntimeError: boom\nlevel=debug user=admin")
    obj = json.loads(js.getvalue())
    assert "v" not in obj and obj["err"] == "boom\nlevel=debug user=admin"
