"""Log lines in klog's layouts (golden lines), context passed as data (``extra=kv(...)``), and verbosity
gated as klog's ``-v``."""

from __future__ import annotations

import inspect
import io
import json
import logging
import sys
import time
from typing import Any

import pytest

from kubelet_trio.logs import (
    FIELDS_ATTR,
    KlogJsonFormatter,
    KlogTextFormatter,
    configure_logging,
    go_quote,
    kref,
    kv,
    verbosity_of,
    vlevel,
)

CREATED = 1700722564.081062  # 2023-11-23 06:56:04.081062 UTC
PATH = "/work/main/kubelet_trio/pod/manager.py"


def record(
    message: str, *args: object, level: int = logging.INFO, exc_info: Any = None, **fields: Any
) -> logging.LogRecord:
    rec = logging.LogRecord("kubelet_trio.pod.manager", level, PATH, 123, message, args, exc_info)
    rec.created, rec.process = CREATED, 1234
    rec.__dict__[FIELDS_ATTR] = fields
    return rec


def text(rec: logging.LogRecord) -> str:
    formatter = KlogTextFormatter()
    formatter.converter = time.gmtime  # the golden lines are in UTC; klog (and the default) is local time
    return formatter.format(rec)


def test_klog_text_golden_line() -> None:
    rec = record("pod added", pod=kref("default", "web"), uid="u1", attempt=2, delay=0.5, ok=True)
    assert text(rec) == (
        'I1123 06:56:04.081062    1234 manager.py:123] "pod added" pod="default/web" uid="u1" attempt=2'
        " delay=0.5 ok=true"
    )


def test_klog_text_severities_and_errors() -> None:
    assert text(record("slow", level=logging.WARNING)).startswith("W1123 06:56:04.081062    1234 ")
    line = text(record("sync failed", level=logging.ERROR, pod=kref("ns", "p"), error=OSError("no space")))
    assert line == 'E1123 06:56:04.081062    1234 manager.py:123] "sync failed" err="no space" pod="ns/p"'
    assert text(record("debug", level=logging.DEBUG)).startswith("I1123 ")


def test_klog_text_values_as_go_prints_them() -> None:
    rec = record("m", empty="", none=None, big=1e21, whole=3.0, ids=("a", "b"), labels={"k": "v"}, neg=-4)
    assert text(rec).split("] ", 1)[1] == (
        '"m" empty="" none=<nil> big=1e+21 whole=3 ids="[a b]" labels="map[k:v]" neg=-4'
    )


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ("plain", '"plain"'),
        ("", '""'),
        ("~ !#$%&'()*+,-./09:;<=>?@AZ[]^_`az{|}", '"~ !#$%&\'()*+,-./09:;<=>?@AZ[]^_`az{|}"'),
        ("ascii then \x7f", r'"ascii then \x7f"'),
        ('say "hi"\\', r'"say \"hi\"\\"'),
        ("tab\tnl\ncr\rbell\a\x00\x7f", r'"tab\tnl\ncr\rbell\a\x00\x7f"'),
        ("é ü 日本", '"é ü 日本"'),
        ("\x85\u2028\u2029\u200b\ufeff", r'"\u0085\u2028\u2029\u200b\ufeff"'),
        ("\U000e0001", r'"\U000e0001"'),
    ],
)
def test_go_quote_is_strconv_quote(value: str, quoted: str) -> None:
    assert go_quote(value) == quoted


def test_klog_json_golden_line() -> None:
    rec = record("pod added", pod=kref("default", "web"), uid="u1", attempt=2, delay=0.5, ok=True, gone=None)
    assert KlogJsonFormatter().format(rec) == (
        '{"ts":1700722564081.062,"caller":"pod/manager.py:123","msg":"pod added","v":0,'
        '"pod":{"name":"web","namespace":"default"},"uid":"u1","attempt":2,"delay":0.5,"ok":true,"gone":null}'
    )


def test_klog_json_errors_have_err_and_no_v() -> None:
    rec = record("sync failed", level=logging.ERROR, uid="u1", error=OSError("no space"))
    assert KlogJsonFormatter().format(rec) == (
        '{"ts":1700722564081.062,"caller":"pod/manager.py:123","msg":"sync failed","uid":"u1",'
        '"err":"no space"}'
    )
    debug = json.loads(KlogJsonFormatter().format(record("probe", level=vlevel(4))))
    assert debug["v"] == 4


def test_exceptions_give_err_and_a_stacktrace_on_one_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        rec = record("failed", level=logging.ERROR, exc_info=sys.exc_info())
    line = text(rec)
    assert "\n" not in line
    assert line.startswith(
        'E1123 06:56:04.081062    1234 manager.py:123] "failed" err="boom" stacktrace="Trace'
    )
    assert line.endswith('ValueError: boom"')
    obj = json.loads(KlogJsonFormatter().format(rec))
    assert obj["err"] == "boom" and obj["stacktrace"].endswith("ValueError: boom")


def test_message_text_is_never_parsed() -> None:
    rec = record("pod added pod=%s/%s", "default", "web")
    assert json.loads(KlogJsonFormatter().format(rec))["msg"] == "pod added pod=default/web"
    assert "pod" not in json.loads(KlogJsonFormatter().format(rec))
    assert text(rec).endswith('] "pod added pod=default/web"')


def test_plain_extra_attributes_are_fields_too() -> None:
    logger = logging.getLogger("kubelet_trio.test_logs")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(KlogJsonFormatter())
    logger.addHandler(handler)
    try:
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        logger.warning("tightened", extra={"path": "/var/lib/kubelet", **kv(mode="0750")})
    finally:
        logger.removeHandler(handler)
    obj = json.loads(stream.getvalue())
    assert (obj["msg"], obj["path"], obj["mode"], obj["caller"]) == (
        "tightened",
        "/var/lib/kubelet",
        "0750",
        f"cmd/test_logs.py:{line}",  # zap's short caller: the directory and the file
    )


def test_one_mapping_between_v_levels_and_python_levels() -> None:
    assert [vlevel(v) for v in range(11)] == [20, 19, 18, 17, 10, 9, 8, 7, 6, 5, 4]
    assert [verbosity_of(vlevel(v)) for v in range(11)] == list(range(11))
    assert verbosity_of(logging.WARNING) == verbosity_of(logging.ERROR) == 0
    assert {verbosity_of(level) for level in range(10, 17)} == {4}  # DEBUG and the levels just above
    with pytest.raises(ValueError):
        vlevel(11)


def test_verbosity_gates_as_klog() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.getLogger("kubelet_trio").level)
    log = logging.getLogger("kubelet_trio.x")
    try:
        configure_logging(2, "json", stream=stream)
        for v in range(6):
            log.log(vlevel(v), f"v{v}")
        log.debug("debug")
        logging.getLogger("other").info("not ours: warnings only")
        assert [json.loads(line)["msg"] for line in stream.getvalue().splitlines()] == ["v0", "v1", "v2"]
        stream.truncate(0)
        stream.seek(0)
        configure_logging(4, "text", stream=stream)
        for v in range(6):
            log.log(vlevel(v), f"v{v}")
        log.debug("debug", extra=kv(b=2))
        assert [line.split("] ", 1)[1] for line in stream.getvalue().splitlines()] == [
            '"v0"',
            '"v1"',
            '"v2"',
            '"v3"',
            '"v4"',
            '"debug" b=2',
        ]
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        logging.getLogger("kubelet_trio").setLevel(saved[2])
