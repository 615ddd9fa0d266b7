"""No manifest can stop a source: hostile files and bodies are logged with their path or URL and skipped,
the other pods go on; a failure nobody expected is contained at the ``manifest`` boundary (logged once,
counted) and the last good set stands. Under MockClock."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from kubelet_trio.api.manifest import MAX_MANIFEST_BYTES
from kubelet_trio.boundary import BoundaryErrors
from kubelet_trio.config import FileSource, HttpSource, PodConfig, PodOperation, PodUpdate
from kubelet_trio.config import file as file_module
from kubelet_trio.config import http as http_module
from kubelet_trio.logs import format_fields, record_fields
from tests.config.conftest import fixed_now, inline_run_sync, no_update, summary
from tests.config.test_config_file_source import manifest
from tests.config.test_config_http_source import URL, Server, pod
from tests.http_peers import from_handler

ADD, UPDATE, REMOVE = PodOperation.ADD, PodOperation.UPDATE, PodOperation.REMOVE
PERIOD = 20.0
NODE = "node-1"


async def recv(updates: trio.MemoryReceiveChannel[PodUpdate]) -> PodUpdate:
    with trio.fail_after(10 * PERIOD):
        return await updates.receive()


def error_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR]


async def start_file_source(nursery: trio.Nursery, path: Path, errors: BoundaryErrors) -> PodConfig:
    config = PodConfig(sources=("file",), now=fixed_now)
    source = FileSource(
        str(path),
        NODE,
        config.source_channel("file"),
        use_inotify=False,
        run_sync=inline_run_sync,
        boundary_errors=errors,
    )
    await nursery.start(config.run)
    await nursery.start(source.run)
    return config


async def test_a_manifest_that_breaks_the_parser_is_contained_once_and_keeps_the_rest(
    tmp_path: Path,
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parse = file_module.parse_manifest

    def corner(content: bytes, **kwargs: Any) -> Any:
        if b"corner" in content:
            raise KeyError("a corner only this manifest reaches")
        return parse(content, **kwargs)

    monkeypatch.setattr(file_module, "parse_manifest", corner)
    (tmp_path / "a.yaml").write_text(manifest("a"))
    (tmp_path / "b.yaml").write_text(manifest("b") + "# corner\n")
    errors = BoundaryErrors()
    config = await start_file_source(nursery, tmp_path, errors)
    assert summary(await recv(config.updates)) == (ADD, ("a-node-1",))
    assert await no_update(config.updates, 3 * PERIOD)  # rescanned: not parsed nor logged again
    assert errors.counts == {"manifest": 1}
    [record] = error_records(caplog)
    assert record.getMessage() == "Peer failed; closing it"
    assert record_fields(record) == {"boundary": "manifest", "path": str(tmp_path / "b.yaml")}

    (tmp_path / "b.yaml").write_text(manifest("b"))  # fixed: read again
    assert summary(await recv(config.updates)) == (ADD, ("b-node-1",))
    assert errors.counts == {"manifest": 1}


async def test_a_scan_that_fails_as_a_whole_is_contained_and_the_last_set_stands(
    tmp_path: Path,
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "a.yaml").write_text(manifest("a"))
    errors = BoundaryErrors()
    config = await start_file_source(nursery, tmp_path, errors)
    assert summary(await recv(config.updates)) == (ADD, ("a-node-1",))

    list_files = file_module._list_files
    broken = [True]

    def corner(path: str) -> Any:
        if broken.pop() if broken else False:
            raise KeyError("a corner of one scan")
        return list_files(path)

    monkeypatch.setattr(file_module, "_list_files", corner)
    (tmp_path / "b.yaml").write_text(manifest("b"))
    t0 = trio.current_time()
    assert summary(await recv(config.updates)) == (ADD, ("b-node-1",))  # the scan after the broken one
    assert trio.current_time() - t0 == pytest.approx(2 * PERIOD)
    assert errors.counts == {"manifest": 1}
    [record] = error_records(caplog)
    assert record_fields(record) == {"boundary": "manifest", "path": str(tmp_path)}


HOSTILE: dict[str, bytes | None] = {
    "bad YAML": b"apiVersion: v1\nkind: Pod\nmetadata: {name: [\n",
    "bad JSON": b'{"apiVersion": "v1", "kind": ',
    "wrong type deep down": manifest("deep").replace("image: busybox:1.36", "image: {a: 1}").encode(),
    "not UTF-8": b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: \xff\xfe\n",
    "HTML": b"<html><body>502 Bad Gateway</body></html>",
    "nested deeply": b"a: " + b"[" * 50_000,
    "too large": None,  # a sparse file past the limit
}


@pytest.mark.parametrize("content", HOSTILE.values(), ids=HOSTILE.keys())
async def test_a_hostile_manifest_never_stops_the_file_source(
    content: bytes | None,
    tmp_path: Path,
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    (tmp_path / "a.yaml").write_text(manifest("a"))
    evil = tmp_path / "evil.yaml"
    if content is None:
        evil.touch()
        os.truncate(evil, MAX_MANIFEST_BYTES + 1)  # sparse: no disk space
    else:
        evil.write_bytes(content)
    (tmp_path / "dir.yaml").mkdir()  # a directory where a file is expected: not a manifest
    config = await start_file_source(nursery, tmp_path, BoundaryErrors())
    assert summary(await recv(config.updates)) == (ADD, ("a-node-1",))
    assert await no_update(config.updates, 2 * PERIOD)
    logged = "\n".join(format_fields(r) for r in error_records(caplog))
    assert str(evil) in logged
    (tmp_path / "c.yaml").write_text(manifest("c"))  # the source goes on
    assert summary(await recv(config.updates)) == (ADD, ("c-node-1",))


async def start_http_source(nursery: trio.Nursery, server: Server, errors: BoundaryErrors) -> PodConfig:
    config = PodConfig(sources=("http",), now=fixed_now)
    source = HttpSource(
        URL,
        NODE,
        config.source_channel("http"),
        connect=from_handler(server.handle).connect,
        boundary_errors=errors,
    )
    await nursery.start(config.run)
    await nursery.start(source.run)
    return config


async def test_a_body_that_breaks_the_parser_is_contained_once_and_keeps_the_last_set(
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parse = http_module.parse_manifest

    def corner(content: bytes, **kwargs: Any) -> Any:
        if b"corner" in content:
            raise KeyError("a corner only this body reaches")
        return parse(content, **kwargs)

    monkeypatch.setattr(http_module, "parse_manifest", corner)
    server = Server()
    server.serve(pod("web"))
    errors = BoundaryErrors()
    config = await start_http_source(nursery, server, errors)
    assert summary(await recv(config.updates)) == (ADD, ("web-node-1",))

    server.serve(b"# corner\n" + json.dumps(pod("other")).encode())
    assert await no_update(config.updates, 3 * PERIOD)  # polled 3 times, parsed and logged once
    assert errors.counts == {"manifest": 1}
    [record] = error_records(caplog)
    assert record.getMessage() == "Peer failed; closing it"
    assert record_fields(record) == {"boundary": "manifest", "url": URL}

    server.serve(pod("next"))
    assert [summary(await recv(config.updates)) for _ in range(2)] == [
        (REMOVE, ("web-node-1",)),
        (ADD, ("next-node-1",)),
    ]


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (200, b"<html><body>Hello</body></html>"),
        (500, b"<html>Internal Server Error</html>"),
        (200, b"\xff\xfe\x00garbage"),
        (200, b"[" * 50_000),
    ],
)
async def test_a_hostile_answer_never_stops_the_http_source(
    status: int, body: bytes, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    server = Server()
    server.serve(pod("web"))
    config = await start_http_source(nursery, server, BoundaryErrors())
    assert summary(await recv(config.updates)) == (ADD, ("web-node-1",))
    server.serve(body, status=status)
    assert await no_update(config.updates, 2 * PERIOD)
    server.hang = True  # an answer that never comes: the 10 s timeout, then the next poll
    assert await no_update(config.updates, 2 * PERIOD)
    server.hang = False
    server.serve(pod("next"))
    assert [summary(await recv(config.updates)) for _ in range(2)] == [
        (REMOVE, ("web-node-1",)),
        (ADD, ("next-node-1",)),
    ]
