"""Image archives imported into containerd from a directory (``--image-import-dir``; k3s's ``agent/images``).

A node with no registry in reach gets its images as files: every ``*.tar``, ``*.tar.gz`` and ``*.tar.zst``
(an OCI or Docker archive, as ``ctr images export`` or ``docker save`` write them) in the directory is
imported into the runtime's ``k8s.io`` namespace, where the CRI plugin sees it. :class:`ImageImporter`
imports what is there before it reports started (the node starts it before any sandbox, so a pause image
among the archives is present for the first pod), then again whenever a file is added or changed:
promptly through inotify (a write closed, a file moved in), and by a rescan every :data:`SCAN_PERIOD`
where inotify misses something or is unavailable. A file is imported once per (size, mtime); a file
that failed is tried again when it changes. Write archives under another name (``.img.tar.part``) and
rename them into place: a periodic scan may otherwise meet a half-copied file (it fails, and is
imported again once complete).

containerd's CRI has no import call, so the import is containerd's own client, ``ctr --address <socket>
-n k8s.io images import``, on containerd's main socket (which is also its CRI socket). A compressed
archive is decompressed on the way into ctr's standard input: gzip with Python's :mod:`gzip`, zstd with
the ``zstd`` program (Debian's ``zstd`` package). A corrupt archive is an error naming the file, logged,
that does not stop the others.

Each archive has :data:`ARCHIVE_TIMEOUT` (ten minutes) to import: ``ctr`` has no deadline of its own, and a
containerd that accepts its connection and never answers (or a decompressor that stalls) would otherwise
keep the node from starting, silently. An archive that takes longer is abandoned (its processes killed),
reported like a corrupt one, and tried again once it changes; the node starts without it. Each import is
logged as it begins, so a long one names the file it waits on.
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import os
import re
import shutil
import signal
import subprocess
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import attrs
import trio
import trio_util

from kubelet_trio.config.inotify import (
    IN_CLOSE_WRITE,
    IN_MOVED_TO,
    Inotify,
    InotifyEvent,
    kick_every,
    kick_on_events,
)
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.logs import kv

__all__ = [
    "ARCHIVE_SUFFIXES",
    "ARCHIVE_TIMEOUT",
    "CRI_NAMESPACE",
    "SCAN_PERIOD",
    "ImageImportError",
    "ImageImporter",
    "archive_kind",
    "list_archives",
    "open_image_importer",
]

logger = logging.getLogger(__name__)

#: The containerd namespace the CRI plugin keeps its images in.
CRI_NAMESPACE = "k8s.io"
#: How often the directory is scanned again regardless of inotify.
SCAN_PERIOD = 30.0
#: File name endings imported, and how each is decompressed.
ARCHIVE_SUFFIXES = {".tar": "tar", ".tar.gz": "gzip", ".tar.zst": "zstd"}
#: Decompressed bytes read per thread hop.
CHUNK = 1 << 20
#: How much of ctr's (or zstd's) error output an error keeps.
ERROR_CHARS = 1000
#: How long a cancelled import's processes get to die.
KILL_GRACE = 5.0
#: How long one archive may take to import: a several-GB image on a slow disk (tens of MB/s) takes a few
#: minutes; one that has not finished in ten is stuck, not slow.
ARCHIVE_TIMEOUT = 600.0
_UNPACKED = re.compile(r"^unpacking (\S+) \(", re.MULTILINE)


class ImageImportError(Exception):
    """One archive did not import; the message names the file."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"importing image archive {path}: {reason}")
        self.path = path
        self.reason = reason


def archive_kind(name: str) -> str | None:
    """``tar``, ``gzip`` or ``zstd`` for an archive's file name; None for any other file (hidden files
    included, as an editor's or a copy's temporary files are)."""
    if name.startswith("."):
        return None
    for suffix, kind in ARCHIVE_SUFFIXES.items():
        if name.endswith(suffix) and len(name) > len(suffix):
            return kind
    return None


@attrs.frozen
class Stamp:
    """What identifies one version of a file: an archive is imported once per stamp."""

    size: int
    mtime_ns: int


def list_archives(directory: Path) -> dict[Path, Stamp]:
    """The archives directly in ``directory`` (not recursing) and their stamps; none when it does not
    exist. Blocking."""
    found: dict[Path, Stamp] = {}
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return found
    for entry in entries:
        if archive_kind(entry.name) is None:
            continue
        try:
            if not entry.is_file():
                continue
            st = entry.stat()
        except OSError:
            continue  # vanished meanwhile
        found[Path(entry.path)] = Stamp(st.st_size, st.st_mtime_ns)
    return found


def _tail(data: bytes | bytearray) -> str:
    text = bytes(data).decode(errors="replace").strip()
    return text[-ERROR_CHARS:] if text else "no output"


async def _drain(stream: trio.abc.ReceiveStream | None, into: bytearray) -> None:
    if stream is None:
        return
    async with stream:
        while chunk := await stream.receive_some():
            into += chunk


async def _reap(*processes: trio.Process) -> None:
    """Kill what still runs and wait for it (in ``finally``: shielded, bounded)."""
    with trio.move_on_after(KILL_GRACE, shield=True):
        for process in processes:
            if process.returncode is None:
                process.kill()
            await process.wait()


@attrs.define(eq=False)
class ImageImporter:
    """Imports the archives of ``directory`` into the containerd at ``socket``; run with
    ``await nursery.start(importer.run)`` (started once the archives present have been imported)."""

    directory: Path
    socket: Path
    namespace: str = CRI_NAMESPACE
    scan_period: float = SCAN_PERIOD
    archive_timeout: float = ARCHIVE_TIMEOUT
    use_inotify: bool = True
    ctr: str = "ctr"
    zstd: str = "zstd"
    run_sync: RunSync = run_in_thread
    #: Completed scans; tests and callers wait on it.
    scans: trio_util.AsyncValue[int] = attrs.Factory(lambda: trio_util.AsyncValue(0))
    #: The last outcome per file: the image names it gave, or the error.
    outcomes: dict[Path, list[str] | ImageImportError] = attrs.Factory(dict)
    _tried: dict[Path, Stamp] = attrs.Factory(dict)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        if shutil.which(self.ctr) is None:
            raise RuntimeError(
                f"--image-import-dir imports with containerd's {self.ctr!r}, which is not installed"
                " (Debian's containerd package ships it)"
            )
        inotify = Inotify.open() if self.use_inotify else None
        try:
            await self.scan(inotify)
            failed = sorted(str(p) for p, outcome in self.outcomes.items() if isinstance(outcome, Exception))
            if failed:
                logger.warning(
                    "starting without the image archives that failed to import", extra=kv(files=failed)
                )
            task_status.started()
            kick_send, kick_recv = trio.open_memory_channel[None](1)  # one pending scan covers all kicks
            async with trio.open_nursery() as nursery:
                nursery.start_soon(kick_every, self.scan_period, kick_send.clone())
                if inotify is not None:
                    nursery.start_soon(kick_on_events, inotify, _is_archive_event, kick_send.clone())
                kick_send.close()
                async for _ in kick_recv:
                    await self.scan(inotify)
        finally:
            if inotify is not None:
                inotify.close()

    async def scan(self, inotify: Inotify | None = None) -> None:
        """Import every archive not imported (or tried) in its present version, in name order."""
        if inotify is not None:
            inotify.add_watch(str(self.directory), IN_CLOSE_WRITE | IN_MOVED_TO)
        archives = await self.run_sync(list_archives, self.directory)
        for path in sorted(archives):
            stamp = archives[path]
            if self._tried.get(path) == stamp:
                continue
            self._tried[path] = stamp
            logger.info("importing image archive", extra=kv(file=str(path), size=stamp.size))
            try:
                images = await self._import_within_deadline(path)
            except ImageImportError as err:
                logger.error("image archive import failed", extra=kv(file=str(path), error=err.reason))
                self.outcomes[path] = err
            else:
                logger.info("imported image archive", extra=kv(file=str(path), images=images))
                self.outcomes[path] = images
        for gone in set(self._tried) - set(archives):  # a file put back later is imported again
            del self._tried[gone]
        self.scans.value += 1

    async def _import_within_deadline(self, path: Path) -> list[str]:
        with trio.move_on_after(self.archive_timeout):
            return await self.import_archive(path)
        raise ImageImportError(
            path, f"not imported within {self.archive_timeout:g}s: abandoned, its processes killed"
        )

    async def import_archive(self, path: Path) -> list[str]:
        """Import one archive; returns the names of the images it held. Raises :class:`ImageImportError`."""
        kind = archive_kind(path.name)
        argv = [self.ctr, "--address", str(self.socket), "--namespace", self.namespace, "images", "import"]
        if kind == "tar":
            return await self._ctr([*argv, str(path)], path, stdin=subprocess.DEVNULL)
        if kind == "gzip":
            return await self._ctr([*argv, "-"], path, stdin=subprocess.PIPE, feed=self._feed_gzip)
        if kind == "zstd":
            return await self._import_zstd([*argv, "-"], path)
        raise ImageImportError(path, "not an image archive (.tar, .tar.gz or .tar.zst)")

    async def _ctr(
        self,
        argv: list[str],
        path: Path,
        *,
        stdin: int,
        feed: Callable[[Path, trio.abc.SendStream], Awaitable[None]] | None = None,
    ) -> list[str]:
        try:
            process = await trio.lowlevel.open_process(
                argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
        except OSError as err:
            raise ImageImportError(path, f"cannot run {argv[0]}: {err}") from None
        out, err_out = bytearray(), bytearray()
        feed_error: list[ImageImportError] = []
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_drain, process.stdout, out)
                nursery.start_soon(_drain, process.stderr, err_out)
                if feed is not None:
                    assert process.stdin is not None
                    nursery.start_soon(self._fed, feed, path, process.stdin, feed_error)
                await process.wait()
        finally:
            await _reap(process)
        if feed_error:
            raise feed_error[0]
        if process.returncode != 0:
            raise ImageImportError(path, f"ctr exited with {process.returncode}: {_tail(err_out)}")
        return _UNPACKED.findall(out.decode(errors="replace"))

    @staticmethod
    async def _fed(
        feed: Callable[[Path, trio.abc.SendStream], Awaitable[None]],
        path: Path,
        stdin: trio.abc.SendStream,
        errors: list[ImageImportError],
    ) -> None:
        try:
            async with stdin:
                await feed(path, stdin)
        except ImageImportError as err:
            errors.append(err)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # ctr stopped reading: its own error says why

    async def _feed_gzip(self, path: Path, stdin: trio.abc.SendStream) -> None:
        try:
            reader = await self.run_sync(gzip.open, path, "rb")
        except OSError as err:
            raise ImageImportError(path, f"cannot open: {err}") from None
        try:
            while True:
                try:
                    chunk = await self.run_sync(reader.read, CHUNK)
                except (OSError, EOFError, zlib.error) as err:
                    raise ImageImportError(path, f"not a valid gzip file: {err}") from None
                if not chunk:
                    return
                await stdin.send_all(chunk)
        finally:
            reader.close()

    async def _import_zstd(self, argv: list[str], path: Path) -> list[str]:
        """``zstd -dc <file> | ctr ... import -``, the pipe between the two processes."""
        if shutil.which(self.zstd) is None:
            raise ImageImportError(path, f"{self.zstd!r} is not installed (apt-get install zstd)")
        read_end, write_end = os.pipe()
        try:
            zstd = await trio.lowlevel.open_process(
                [self.zstd, "--decompress", "--stdout", "--quiet", str(path)],
                stdin=subprocess.DEVNULL,
                stdout=write_end,
                stderr=subprocess.PIPE,
            )
        except OSError as err:
            os.close(read_end)
            os.close(write_end)
            raise ImageImportError(path, f"cannot run {self.zstd}: {err}") from None
        os.close(write_end)
        zstd_err = bytearray()
        images: list[str] = []
        ctr_error: ImageImportError | None = None
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_drain, zstd.stderr, zstd_err)
                try:
                    images = await self._ctr(argv, path, stdin=read_end)
                except ImageImportError as err:
                    ctr_error = err
                finally:
                    os.close(read_end)  # ctr is gone: a zstd still writing gets SIGPIPE
                await zstd.wait()
        finally:
            await _reap(zstd)
        # zstd's own failure (not an archive, truncated) explains ctr's; SIGPIPE is ctr's failure
        if zstd.returncode != 0 and not (ctr_error is not None and zstd.returncode == -signal.SIGPIPE):
            raise ImageImportError(path, f"zstd exited with {zstd.returncode}: {_tail(zstd_err)}")
        if ctr_error is not None:
            raise ctr_error
        return images


def _is_archive_event(event: InotifyEvent) -> bool:
    return archive_kind(event.name) is not None


@contextlib.asynccontextmanager
async def open_image_importer(directory: Path, socket: Path) -> AsyncIterator[ImageImporter]:
    """Import the archives of ``directory`` into the containerd at ``socket``, then follow the directory
    for the block; yields once the archives present at the start have been imported."""
    importer = ImageImporter(directory, socket)
    async with trio.open_nursery() as nursery:
        await nursery.start(importer.run)
        yield importer
        nursery.cancel_scope.cancel()
