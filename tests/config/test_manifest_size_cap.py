"""The 10 MiB manifest cap (upstream ``maxConfigLength``) for manifest files and URL bodies: a manifest
over it is refused with an error naming the file or URL and the limit, without reading it all, and
without disturbing the other manifests."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from kubelet_trio.api import MAX_MANIFEST_BYTES, ManifestError, read_manifest_file
from kubelet_trio.api.manifest import read_manifest_bytes
from kubelet_trio.config import FileSource, HttpSource, PodConfig, PodOperation, scan_manifest_path
from kubelet_trio.logs import format_fields
from kubelet_trio.runonce import fetch_manifest_url
from tests.config.conftest import fixed_now, inline_run_sync, no_update, summary
from tests.config.test_config_file_source import manifest, recv
from tests.config.test_config_http_source import pod
from tests.http_peers import from_handler

ADD = PodOperation.ADD
NODE = "node-1"
URL = "http://config.example/pods"
PERIOD = 20.0
LIMIT = "larger than the 10 MiB limit (10485760 bytes)"
CHUNK = 64 * 1024


def grow(path: Path, size: int) -> None:
    """Make ``path`` ``size`` bytes long without writing them (a sparse file)."""
    os.truncate(path, size)


def test_file_over_the_limit_is_refused_by_its_size(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(manifest("a"))
    (tmp_path / "big.yaml").write_text(manifest("big"))
    grow(tmp_path / "big.yaml", 2**40)  # 1 TiB: reading it would never end
    scan = scan_manifest_path(str(tmp_path), NODE)
    assert [p.name for p in scan.pods] == ["a-node-1"]
    (error,) = scan.errors
    assert str(error) == f"{tmp_path / 'big.yaml'}:1: manifest is {LIMIT}; refused"

    again = scan_manifest_path(str(tmp_path), NODE, scan.files)
    assert again.errors == () and [p.name for p in again.pods] == ["a-node-1"]  # reported once


def test_the_limit_is_inclusive_and_sizeless_files_are_cut_off(tmp_path: Path) -> None:
    exact = tmp_path / "exact"
    exact.write_bytes(b"")
    grow(exact, MAX_MANIFEST_BYTES)
    assert len(read_manifest_bytes(str(exact))) == MAX_MANIFEST_BYTES
    grow(exact, MAX_MANIFEST_BYTES + 1)
    with pytest.raises(ManifestError, match=re.escape(LIMIT)):
        read_manifest_bytes(str(exact))
    # No size to go by: read one byte past the limit, then stop.
    (error,) = read_manifest_file("/dev/zero").errors
    assert str(error) == f"/dev/zero:1: manifest is {LIMIT}; refused"


async def test_file_source_keeps_the_other_manifests(
    tmp_path: Path,
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    (tmp_path / "a.yaml").write_text(manifest("a"))
    (tmp_path / "b.yaml").write_text(manifest("b"))
    config = PodConfig(sources=("file",), now=fixed_now)
    source = FileSource(
        str(tmp_path), NODE, config.source_channel("file"), use_inotify=False, run_sync=inline_run_sync
    )
    await nursery.start(config.run)
    await nursery.start(source.run)
    assert summary(await recv(config.updates)) == (ADD, ("a-node-1", "b-node-1"))

    with caplog.at_level(logging.ERROR, logger="kubelet_trio.config.file"):
        grow(tmp_path / "b.yaml", 64 * 2**20)  # a good file becomes too large: it keeps its last good pod
        assert await no_update(config.updates, 3 * PERIOD)
        (tmp_path / "c.yaml").write_text(manifest("c"))
        assert summary(await recv(config.updates)) == (ADD, ("c-node-1",))
    lines = [f"{r.getMessage()} {format_fields(r)}" for r in caplog.records]
    refused = [line for line in lines if "b.yaml" in line]
    assert refused == [
        f'invalid pod manifest source=file error="{tmp_path / "b.yaml"}:1: manifest is {LIMIT}; refused"'
    ]


class EndlessBody(httpx.AsyncByteStream):
    """A response body that never ends; counts what was taken from it."""

    def __init__(self) -> None:
        self.sent = 0

    def __aiter__(self) -> EndlessBody:
        return self

    async def __anext__(self) -> bytes:
        await trio.lowlevel.checkpoint()
        self.sent += CHUNK
        return b" " * CHUNK


async def test_http_body_over_the_limit_keeps_the_last_good_set(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    serving: dict[str, Any] = {"doc": pod("web")}
    bodies: dict[str, list[EndlessBody]] = {"endless": [], "declared": []}

    def handle(request: httpx.Request) -> httpx.Response:
        kind = serving.get("kind")
        if kind is None:
            return httpx.Response(200, json=serving["doc"])
        body = EndlessBody()
        bodies[kind].append(body)
        headers = {"Content-Length": str(MAX_MANIFEST_BYTES + 1)} if kind == "declared" else {}
        return httpx.Response(200, headers=headers, stream=body)

    config = PodConfig(sources=("http",), now=fixed_now)
    source = HttpSource(URL, NODE, config.source_channel("http"), connect=from_handler(handle).connect)
    await nursery.start(config.run)
    await nursery.start(source.run)
    assert summary(await recv(config.updates)) == (ADD, ("web-node-1",))

    with caplog.at_level(logging.WARNING, logger="kubelet_trio.config.http"):
        serving["kind"] = "endless"
        assert await no_update(config.updates, 2.5 * PERIOD)  # the polls at 20 s and 40 s
        serving["kind"] = "declared"
        assert await no_update(config.updates, 2 * PERIOD)  # at 60 s and 80 s
    assert len(bodies["endless"]) == len(bodies["declared"]) == 2  # polled every period
    for body in bodies["endless"]:
        assert MAX_MANIFEST_BYTES < body.sent <= MAX_MANIFEST_BYTES + 2 * CHUNK  # dropped once over
    assert [body.sent for body in bodies["declared"]] == [0, 0]  # refused by Content-Length, unread
    lines = {f"{r.getMessage()} {format_fields(r)}" for r in caplog.records}
    reason = f"manifest is {LIMIT}; refused"
    assert lines == {f'failed to read pods from URL, keeping the last good set url={URL} reason="{reason}"'}

    serving.pop("kind")
    serving["doc"] = {"kind": "PodList", "apiVersion": "v1", "items": [pod("web"), pod("db")]}
    assert summary(await recv(config.updates)) == (ADD, ("db-node-1",))  # the URL recovers


async def test_run_once_url_over_the_limit_is_an_error(autojump_clock: trio.testing.MockClock) -> None:
    body = EndlessBody()
    peers = from_handler(lambda request: httpx.Response(200, stream=body))  # type: ignore[arg-type]
    pods, errors = await fetch_manifest_url(URL, NODE, connect=peers.connect)
    assert pods == ()
    assert [str(e) for e in errors] == [f"{URL}:1: manifest is {LIMIT}; refused"]
    assert MAX_MANIFEST_BYTES < body.sent <= MAX_MANIFEST_BYTES + 2 * CHUNK
