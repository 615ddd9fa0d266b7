"""A hostile value (a probe's output, a runtime error) cannot forge a field in text or JSON log output.

Each line is parsed back with an independent logfmt reader and ``json.loads``; the fields must be exactly
the ones the call site passed, with the hostile value intact.
"""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest

from kubelet_trio.logs import JsonFormatter, LogfmtFormatter, kref, kv

HOSTILE = [
    "x level=debug user=admin\n",
    'x" level=debug user="admin',
    "ok\nlevel=error msg=forged",
    'a\\" user=admin',
    "line\rbreak\u2028and\x85more user=admin",
    "=== user=admin ===",
    "",
    " ",
    "{}",
    'pod=evil/pod uid=0 msg="forged"',
]

# A logfmt reader written from the format's definition: key=bare-token or key="JSON string".
_PAIR = re.compile(r'([A-Za-z_][\w.\-]*)=("(?:[^"\\]|\\.)*"|[^\s"=]*)(?: |$)')


def parse_logfmt(line: str) -> list[tuple[str, str]]:
    pairs, pos = [], 0
    while pos < len(line):
        match = _PAIR.match(line, pos)
        assert match, f"unparseable at {pos}: {line[pos:]!r}"
        key, raw = match.groups()
        pairs.append((key, json.loads(raw) if raw.startswith('"') else raw))
        pos = match.end()
    return pairs


@pytest.fixture
def lines() -> Iterator[tuple[logging.Logger, io.StringIO, io.StringIO]]:
    logger = logging.getLogger("kubelet_trio.test_log_injection")
    text, js = io.StringIO(), io.StringIO()
    handlers = []
    for stream, formatter in ((text, LogfmtFormatter()), (js, JsonFormatter())):
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


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_value_cannot_forge_a_field(
    value: str, lines: tuple[logging.Logger, io.StringIO, io.StringIO]
) -> None:
    logger, text, js = lines
    logger.info("probe failed", extra=kv(pod=kref("default", "web"), uid="u1", output=value, err=value))

    [text_line] = text.getvalue().splitlines()
    pairs = parse_logfmt(text_line)
    assert [key for key, _ in pairs] == ["time", "level", "logger", "msg", "pod", "uid", "output", "err"]
    fields = dict(pairs)
    assert (fields["level"], fields["msg"], fields["pod"], fields["uid"]) == (
        "info",
        "probe failed",
        "default/web",
        "u1",
    )
    assert fields["output"] == fields["err"] == value

    [json_line] = js.getvalue().splitlines()
    obj = json.loads(json_line)
    assert list(obj) == ["ts", "level", "logger", "msg", "pod", "uid", "output", "err"]
    assert obj["level"] == "info" and obj["msg"] == "probe failed"
    assert obj["pod"] == {"namespace": "default", "name": "web"}
    assert obj["output"] == obj["err"] == value


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_pod_name_stays_one_field(
    value: str, lines: tuple[logging.Logger, io.StringIO, io.StringIO]
) -> None:
    logger, text, js = lines
    logger.warning("pod rejected", extra=kv(pod=kref("ns " + value, value)))
    pairs = parse_logfmt(text.getvalue().rstrip("\n"))
    assert [key for key, _ in pairs] == ["time", "level", "logger", "msg", "pod"]
    assert dict(pairs)["pod"] == f"ns {value}/{value}"
    assert json.loads(js.getvalue())["pod"] == {"namespace": "ns " + value, "name": value}


def test_a_field_cannot_take_a_reserved_name(lines: tuple[logging.Logger, io.StringIO, io.StringIO]) -> None:
    logger, text, js = lines
    logger.info("m", extra=kv(level="debug", msg="forged", **{"bad key": "x"}))
    fields = dict(parse_logfmt(text.getvalue().rstrip("\n")))
    assert (fields["level"], fields["msg"]) == ("info", "m")
    assert (fields["field.level"], fields["field.msg"], fields["_bad_key"]) == ("debug", "forged", "x")
    obj = json.loads(js.getvalue())
    assert (obj["level"], obj["msg"], obj["field.level"]) == ("info", "m", "debug")


def test_exception_text_cannot_forge_a_field(lines: tuple[logging.Logger, io.StringIO, io.StringIO]) -> None:
    logger, text, js = lines
    try:
        raise RuntimeError("boom\nlevel=debug user=admin")
    except RuntimeError:
        logger.exception("sync failed", extra=kv(uid="u1"))
    pairs = parse_logfmt(text.getvalue().rstrip("\n"))
    assert [key for key, _ in pairs] == ["time", "level", "logger", "msg", "uid", "error"]
    assert dict(pairs)["error"].endswith("RuntimeError: boom\nlevel=debug user=admin")
    assert json.loads(js.getvalue())["error"].endswith("RuntimeError: boom\nlevel=debug user=admin")
