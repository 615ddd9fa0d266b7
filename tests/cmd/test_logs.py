"""Log formatting: logfmt text and JSON lines, with context passed as data (``extra=kv(...)``)."""

from __future__ import annotations

import io
import json
import logging
import sys
from typing import Any

from kubelet_trio.logs import FIELDS_ATTR, JsonFormatter, LogfmtFormatter, configure_logging, kref, kv


def record(message: str, *args: object, level: int = logging.INFO, **fields: Any) -> logging.LogRecord:
    rec = logging.LogRecord("kubelet_trio.kubelet", level, __file__, 1, message, args, None)
    rec.__dict__[FIELDS_ATTR] = fields
    return rec


def test_logfmt_line() -> None:
    line = LogfmtFormatter().format(record("pod added", pod=kref("default", "web"), uid="u1"))
    fields = line.split(" ", 3)
    assert fields[0].startswith("time=") and fields[0].endswith("Z")
    assert fields[1:] == [
        "level=info",
        "logger=kubelet_trio.kubelet",
        'msg="pod added" pod=default/web uid=u1',
    ]


def test_logfmt_quotes_values_that_are_not_plain_tokens() -> None:
    line = LogfmtFormatter().format(record("m", err="no such file", empty="", path="/a/b", n=3))
    assert line.endswith('msg=m err="no such file" empty="" path=/a/b n=3')


def test_json_line_has_pod_namespace_and_name() -> None:
    line = JsonFormatter().format(
        record("pod phase", pod=kref("kube-system", "dns"), uid="u2", phase="Running")
    )
    obj = json.loads(line)
    assert obj["level"] == "info" and obj["msg"] == "pod phase" and obj["logger"] == "kubelet_trio.kubelet"
    assert obj["pod"] == {"namespace": "kube-system", "name": "dns"}
    assert (obj["uid"], obj["phase"]) == ("u2", "Running")


def test_json_values_keep_their_types() -> None:
    obj = json.loads(
        JsonFormatter().format(record("m", attempt=2, delay=0.5, ok=True, gone=None, ids=("a", "b")))
    )
    assert (obj["attempt"], obj["delay"], obj["ok"], obj["gone"], obj["ids"]) == (
        2,
        0.5,
        True,
        None,
        ["a", "b"],
    )


def test_message_text_is_never_parsed() -> None:
    rec = record("pod added pod=%s/%s", "default", "web")
    assert json.loads(JsonFormatter().format(rec))["msg"] == "pod added pod=default/web"
    assert "pod" not in json.loads(JsonFormatter().format(rec))
    assert LogfmtFormatter().format(rec).endswith('msg="pod added pod=default/web"')


def test_plain_extra_attributes_are_fields_too() -> None:
    logger = logging.getLogger("kubelet_trio.test_logs")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger.addHandler(handler)
    try:
        logger.warning("tightened", extra={"path": "/var/lib/kubelet", **kv(mode="0750")})
    finally:
        logger.removeHandler(handler)
    obj = json.loads(stream.getvalue())
    assert (obj["msg"], obj["path"], obj["mode"]) == ("tightened", "/var/lib/kubelet", "0750")


def test_exceptions_are_kept_on_one_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        rec = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    text = LogfmtFormatter().format(rec)
    assert "\n" not in text and "ValueError: boom" in text
    assert json.loads(JsonFormatter().format(rec))["error"].endswith("ValueError: boom")


def test_verbosity_sets_our_level_only() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.getLogger("kubelet_trio").level)
    try:
        configure_logging(4, "json", stream=stream)
        logging.getLogger("kubelet_trio.x").debug("debug line", extra=kv(a=1))
        logging.getLogger("other").info("not shown")
        configure_logging(0, "text", stream=stream)
        logging.getLogger("kubelet_trio.x").debug("hidden")
        logging.getLogger("kubelet_trio.x").info("shown", extra=kv(b=2))
        lines = stream.getvalue().splitlines()
        assert json.loads(lines[0])["a"] == 1
        assert len(lines) == 2 and lines[1].endswith("msg=shown b=2")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        logging.getLogger("kubelet_trio").setLevel(saved[2])
