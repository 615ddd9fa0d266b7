"""An image archive whose import never ends is abandoned at its deadline: the node starts without it (the
importer reports started), the file is reported as failed, and the archives after it are imported.

Under MockClock the import itself is a stand-in (a coroutine per archive), so the deadline is exact; a
real stand-in ``ctr`` that hangs shows the abandoned import's process is killed."""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

import attrs
import pytest
import trio
from trio.testing import MockClock

from kubelet_trio.fsio import run_inline
from kubelet_trio.images.importer import ARCHIVE_TIMEOUT, ImageImporter, ImageImportError
from kubelet_trio.logs import FIELDS_ATTR


@attrs.define(eq=False)
class StuckImporter(ImageImporter):
    """Imports every archive at once, except ``stuck.tar``, which never finishes."""

    started_at: dict[str, float] = attrs.Factory(dict)

    async def import_archive(self, path: Path) -> list[str]:
        self.started_at[path.name] = trio.current_time()
        if path.name == "stuck.tar":
            await trio.sleep_forever()
        return [f"docker.io/library/{path.stem}:1"]


async def test_a_stuck_import_is_abandoned_at_its_deadline_and_the_node_starts(
    autojump_clock: MockClock, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    images = tmp_path / "images"
    images.mkdir()
    for name in ("a.tar", "stuck.tar", "z.tar"):
        (images / name).write_bytes(b"tar")
    importer = StuckImporter(
        images, tmp_path / "containerd.sock", ctr=sys.executable, use_inotify=False, run_sync=run_inline
    )
    caplog.set_level(logging.INFO, logger="kubelet_trio.images.importer")
    async with trio.open_nursery() as nursery:
        with trio.fail_after(ARCHIVE_TIMEOUT + 60):  # today's importer would never report started
            await nursery.start(importer.run)
        assert trio.current_time() == ARCHIVE_TIMEOUT  # started: the node goes on
        nursery.cancel_scope.cancel()
    stuck = images / "stuck.tar"
    assert importer.started_at == {"a.tar": 0.0, "stuck.tar": 0.0, "z.tar": ARCHIVE_TIMEOUT}
    assert importer.outcomes[images / "a.tar"] == ["docker.io/library/a:1"]
    assert importer.outcomes[images / "z.tar"] == ["docker.io/library/z:1"]
    error = importer.outcomes[stuck]
    assert isinstance(error, ImageImportError)
    assert error.reason == "not imported within 600s: abandoned, its processes killed"
    lines = [(r.getMessage(), getattr(r, FIELDS_ATTR, {})) for r in caplog.records]
    assert ("importing image archive", {"file": str(stuck), "size": 3}) in lines  # what it waits on
    assert ("image archive import failed", {"file": str(stuck), "error": error.reason}) in lines
    assert ("starting without the image archives that failed to import", {"files": [str(stuck)]}) in lines


FAKE_CTR = """#!{python}
import os, sys, time
open({pidfile!r}, "w").write(str(os.getpid()))
time.sleep(600)
"""


async def test_a_hanging_ctr_is_killed_at_the_deadline(tmp_path: Path) -> None:
    ctr = tmp_path / "ctr"
    pidfile = tmp_path / "ctr.pid"
    ctr.write_text(FAKE_CTR.format(python=sys.executable, pidfile=str(pidfile)))
    ctr.chmod(0o755)
    images = tmp_path / "images"
    images.mkdir()
    (images / "app.tar").write_bytes(b"tar")
    importer = ImageImporter(images, tmp_path / "sock", ctr=str(ctr), use_inotify=False, archive_timeout=2.0)
    began = time.monotonic()
    with trio.fail_after(30):
        await importer.scan()
    assert 2.0 <= time.monotonic() - began < 20
    error = importer.outcomes[images / "app.tar"]
    assert isinstance(error, ImageImportError) and "not imported within 2s" in error.reason
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(int(pidfile.read_text()), 0)
