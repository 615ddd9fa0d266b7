"""Log formatting: logfmt text and JSON lines, with the ``key=value`` context split out of messages."""

from __future__ import annotations

import io
import json
import logging
import sys

import pytest

from kubelet_trio.logs import JsonFormatter, LogfmtFormatter, configure_logging, split_message

SPLITS = [
    ("pod added pod=default/web uid=u1", ("pod added", [("pod", "default/web"), ("uid", "u1")])),
    ("health error=runtime is down: no socket", ("health", [("error", "runtime is down: no socket")])),
    ("relist failed err=Err('List', code=14)", ("relist failed", [("err", "Err('List', code=14)")])),
    ("plain message", ("plain message", [])),
    ('quoted value="a=b c" next=1', ("quoted", [("value", '"a=b c"'), ("next", "1")])),
]


@pytest.mark.parametrize(("message", "expected"), SPLITS)
def test_split_message(message: str, expected: tuple[str, list[tuple[str, str]]]) -> None:
    assert split_message(message) == expected


def record(message: str, *args: object, level: int = logging.INFO) -> logging.LogRecord:
    return logging.LogRecord("kubelet_trio.kubelet", level, __file__, 1, message, args, None)


def test_logfmt_line() -> None:
    line = LogfmtFormatter().format(record("pod added pod=%s/%s uid=%s", "default", "web", "u1"))
    fields = line.split(" ", 3)
    assert fields[0].startswith("time=") and fields[0].endswith("Z")
    assert fields[1:] == [
        "level=info",
        "logger=kubelet_trio.kubelet",
        'msg="pod added" pod=default/web uid=u1',
    ]


def test_json_line_has_pod_namespace_and_name() -> None:
    line = JsonFormatter().format(
        record("pod phase pod=%s/%s uid=%s phase=%s", "kube-system", "dns", "u2", "Running")
    )
    obj = json.loads(line)
    assert obj["level"] == "info" and obj["msg"] == "pod phase" and obj["logger"] == "kubelet_trio.kubelet"
    assert obj["pod"] == {"namespace": "kube-system", "name": "dns"}
    assert (obj["uid"], obj["phase"]) == ("u2", "Running")


def test_exceptions_are_kept_on_one_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        rec = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed pod=%s", ("a/b",), sys.exc_info())
    text = LogfmtFormatter().format(rec)
    assert "\n" not in text and "ValueError: boom" in text
    assert json.loads(JsonFormatter().format(rec))["error"].endswith("ValueError: boom")


def test_verbosity_sets_our_level_only() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.getLogger("kubelet_trio").level)
    try:
        configure_logging(4, "json", stream=stream)
        logging.getLogger("kubelet_trio.x").debug("debug line a=1")
        logging.getLogger("other").info("not shown")
        configure_logging(0, "text", stream=stream)
        logging.getLogger("kubelet_trio.x").debug("hidden")
        logging.getLogger("kubelet_trio.x").info("shown b=2")
        lines = stream.getvalue().splitlines()
        assert json.loads(lines[0])["a"] == "1"
        assert len(lines) == 2 and lines[1].endswith("msg=shown b=2")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        logging.getLogger("kubelet_trio").setLevel(saved[2])
