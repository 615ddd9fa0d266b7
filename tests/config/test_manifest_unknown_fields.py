"""The file and URL sources run a pod with unknown fields (as Go's kubelet does, which decodes manifests
non-strictly) and log one warning per unknown field, naming the file or URL, the line and the field path."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import trio

from kubelet_trio.config import PodOperation, scan_manifest_path
from kubelet_trio.logs import record_fields
from tests.config.conftest import summary
from tests.config.test_config_http_source import URL, Server, recv, start

MANIFEST = b"""\
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  restartPolcy: Never
  containers:
  - name: c
    image: busybox:1.36
    comand: [sh]
"""


def _warnings(caplog: pytest.LogCaptureFixture) -> list[tuple[str, dict[str, object]]]:
    return [(r.getMessage(), record_fields(r)) for r in caplog.records if r.levelno == logging.WARNING]


def test_file_source_warns_and_runs_the_pod(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "web.yaml").write_bytes(MANIFEST)
    name = str(tmp_path / "web.yaml")
    with caplog.at_level(logging.WARNING, logger="kubelet_trio.config.file"):
        scan = scan_manifest_path(str(tmp_path), "node-1")
    assert [p.name for p in scan.pods] == ["web-node-1"] and scan.errors == ()
    message = "unknown field in pod manifest, ignored"
    assert _warnings(caplog) == [
        (message, {"source": "file", "path": name, "line": 6, "field": "spec.restartPolcy"}),
        (message, {"source": "file", "path": name, "line": 10, "field": "spec.containers[0].comand"}),
    ]
    # An unchanged file is not parsed again, so it is not warned about again.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kubelet_trio.config.file"):
        again = scan_manifest_path(str(tmp_path), "node-1", scan.files)
    assert again.pods == scan.pods and _warnings(caplog) == []


async def test_url_source_warns_and_runs_the_pod(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    server = Server()
    server.serve(MANIFEST)
    with caplog.at_level(logging.WARNING, logger="kubelet_trio.config.http"):
        config = await start(nursery, server)
        assert summary(await recv(config.updates)) == (PodOperation.ADD, ("web-node-1",))
    assert [fields for _, fields in _warnings(caplog)] == [
        {"source": "http", "url": URL, "line": 6, "field": "spec.restartPolcy"},
        {"source": "http", "url": URL, "line": 10, "field": "spec.containers[0].comand"},
    ]
