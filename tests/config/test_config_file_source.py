"""The file source through PodConfig, under a MockClock: exact op sequences for file changes."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest
import trio

from kubelet_trio.config import (
    CONFIG_HASH_ANNOTATION,
    CONFIG_SOURCE_ANNOTATION,
    FileSource,
    PodConfig,
    PodOperation,
    PodUpdate,
    scan_manifest_path,
)
from kubelet_trio.config.inotify import Inotify
from kubelet_trio.logs import format_fields
from tests.config.conftest import fixed_now, inline_run_sync, no_update, summary

ADD, REMOVE = PodOperation.ADD, PodOperation.REMOVE
PERIOD = 20.0
NODE = "node-1"


def manifest(name: str, image: str = "busybox:1.36") -> str:
    return f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
    - name: main
      image: {image}
"""


async def recv(updates: trio.MemoryReceiveChannel[PodUpdate]) -> PodUpdate:
    """Receive with a (virtual) deadline, so a missing update fails instead of hanging."""
    with trio.fail_after(10 * PERIOD):
        return await updates.receive()


def write(path: Path, text: str) -> None:
    path.write_text(text)


def rename(src: Path, dst: Path) -> None:
    os.rename(src, dst)


def remove(path: Path) -> None:
    path.unlink()


async def start(nursery: trio.Nursery, path: Path, *, inotify: bool = False) -> PodConfig:
    config = PodConfig(sources=("file",), now=fixed_now)
    source = FileSource(
        str(path),
        NODE,
        config.source_channel("file"),
        use_inotify=inotify,
        run_sync=inline_run_sync,
    )
    await nursery.start(config.run)
    await nursery.start(source.run)
    return config


async def test_file_lifecycle_op_sequence(
    tmp_path: Path,
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    t0 = trio.current_time()
    config = await start(nursery, manifests)
    updates = config.updates

    # An empty directory: an empty ADD tells the kubelet the source is ready.
    first = await recv(updates)
    assert (first.op, first.source, first.pods) == (ADD, "file", ())
    assert config.sources_ready.value

    # Adding files: noticed at the next periodic scan, one ADD with the pods in file-name order.
    write(manifests / "b.yaml", manifest("beta"))
    write(manifests / "a.yaml", manifest("alpha"))
    update = await recv(updates)
    assert summary(update) == (ADD, ("alpha-node-1", "beta-node-1"))
    assert trio.current_time() - t0 == PERIOD
    alpha, beta = update.pods
    assert alpha.annotations[CONFIG_SOURCE_ANNOTATION] == "file"
    assert alpha.annotations[CONFIG_HASH_ANNOTATION] == alpha.uid
    assert alpha.spec is not None and alpha.spec.node_name == NODE

    # Changing a file: new content, new UID - the old pod is removed, the new one added.
    write(manifests / "a.yaml", manifest("alpha", image="busybox:1.37"))
    update_remove, update_add = await recv(updates), await recv(updates)
    assert (summary(update_remove), summary(update_add)) == (
        (REMOVE, ("alpha-node-1",)),
        (ADD, ("alpha-node-1",)),
    )
    assert update_remove.pods[0].uid == alpha.uid and update_add.pods[0].uid != alpha.uid
    alpha = update_add.pods[0]
    assert trio.current_time() - t0 == 2 * PERIOD

    # Renaming a file: the path is part of the UID, so REMOVE + ADD of the same pod name.
    rename(manifests / "b.yaml", manifests / "c.yaml")
    update_remove, update_add = await recv(updates), await recv(updates)
    assert (summary(update_remove), summary(update_add)) == (
        (REMOVE, ("beta-node-1",)),
        (ADD, ("beta-node-1",)),
    )
    assert update_remove.pods[0].uid == beta.uid and update_add.pods[0].uid != beta.uid

    # Breaking a file that was good keeps its last good pod; other pods are untouched; the error is logged
    # with file and line. Dot-files and sub-directories are ignored.
    with caplog.at_level(logging.ERROR, logger="kubelet_trio.config.file"):
        write(manifests / "c.yaml", manifest("beta").replace("image: busybox:1.36", "image: [oops"))
        write(manifests / "broken-from-start.yaml", "kind: Pod\napiVersion: v1\nmetadata: {name: x}\n")
        write(manifests / ".hidden.yaml", manifest("hidden"))
        (manifests / "sub").mkdir()
        write(manifests / "sub" / "nested.yaml", manifest("nested"))
        assert await no_update(updates, 3 * PERIOD)
    messages = [f"{r.getMessage()} {format_fields(r)}" for r in caplog.records]
    assert any(str(manifests / "c.yaml") + ":8: invalid YAML" in m for m in messages), messages
    assert any(
        str(manifests / "broken-from-start.yaml") + ":1: spec.containers: Required value" in m
        for m in messages
    )

    # Fixing it again is a normal change.
    write(manifests / "c.yaml", manifest("beta", image="busybox:1.37"))
    assert [summary(await recv(updates)) for _ in range(2)] == [
        (REMOVE, ("beta-node-1",)),
        (ADD, ("beta-node-1",)),
    ]

    # Deleting files removes their pods; a vanished directory is an empty set.
    remove(manifests / "c.yaml")
    assert summary(await recv(updates)) == (REMOVE, ("beta-node-1",))
    shutil.rmtree(manifests)
    assert summary(await recv(updates)) == (REMOVE, ("alpha-node-1",))
    assert await no_update(updates, 2 * PERIOD)


async def test_missing_path_is_an_empty_set(
    tmp_path: Path,
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="kubelet_trio.config.file"):
        config = await start(nursery, tmp_path / "missing")
        assert summary(await recv(config.updates)) == (ADD, ())
    assert config.sources_ready.value
    assert "does not exist" in caplog.text
    (tmp_path / "missing").mkdir()
    write(tmp_path / "missing" / "p.yaml", manifest("late"))
    assert summary(await recv(config.updates)) == (ADD, ("late-node-1",))


async def test_single_file_path_and_multi_document(
    tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    path = tmp_path / "pods.yaml"
    write(path, manifest("one") + "---\n" + manifest("two"))
    config = await start(nursery, path)
    assert summary(await recv(config.updates)) == (ADD, ("one-node-1", "two-node-1"))
    write(path, manifest("one"))
    assert summary(await recv(config.updates)) == (REMOVE, ("two-node-1",))


def test_scan_reuses_unchanged_files(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", manifest("a"))
    first = scan_manifest_path(str(tmp_path), "n")
    again = scan_manifest_path(str(tmp_path), "n", first.files)
    assert again.pods == first.pods and again.errors == ()
    assert next(iter(again.files.values())) is next(iter(first.files.values()))


@pytest.mark.skipif(Inotify.open() is None, reason="inotify is Linux-only")
async def test_inotify_notices_changes_promptly_and_coalesces(tmp_path: Path, nursery: trio.Nursery) -> None:
    """Real clock and real inotify: the periodic scan is an hour away, so only inotify can deliver."""
    config = PodConfig(sources=("file",), now=fixed_now)
    source = FileSource(str(tmp_path), "n", config.source_channel("file"), check_period=3600)
    await nursery.start(config.run)
    await nursery.start(source.run)
    with trio.fail_after(10):
        assert summary(await recv(config.updates)) == (ADD, ())
        for name in ("a", "b", "c"):
            write(tmp_path / f"{name}.yaml", manifest(name))
        assert summary(await recv(config.updates)) == (ADD, ("a-n", "b-n", "c-n"))
        write(tmp_path / ".swap", "ignored")
        rename(tmp_path / "c.yaml", tmp_path / ".c.yaml.bak")
        assert summary(await recv(config.updates)) == (REMOVE, ("c-n",))
