"""The static-pod file source (``--pod-manifest-path``; ``pkg/kubelet/config/file.go``).

The path is a directory (every regular file in it whose name does not start with ``.``, sorted, not
recursing into sub-directories) or a single file. Each file holds one or more YAML documents (or one
JSON object), each a Pod - upstream accepts exactly one pod per file. The source sends the complete set
at start, then again whenever it changes: re-scanning every ``check_period`` (20 s) and promptly after
inotify reports a change (bursts are coalesced), or only periodically where inotify is unavailable.

A missing path yields an empty set (so the source still becomes ready). A file over 10 MiB (upstream
``maxConfigLength``) is refused by its size, without reading it, and logged once while it stays too
large. A manifest with errors is logged with file, line and field path and skipped; **unlike upstream,
a file that was good and becomes broken keeps its last good pods** (upstream drops them because the
file no longer yields a pod): a half-written or mistyped edit must not kill a running static pod, and
nothing else is disturbed. A file whose reading fails in a way no manifest error describes (a corner of
the parser only its bytes reach) is treated the same way, contained at the ``manifest`` boundary (logged
once with its path, counted); so is a scan that fails as a whole (the last set then stands), and a path
that cannot be listed keeps the last set too.
"""

from __future__ import annotations

import functools
import logging
import os
import stat
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from kubelet_trio import defaults
from kubelet_trio.api import ManifestError, Pod, parse_manifest
from kubelet_trio.api.manifest import read_manifest_bytes
from kubelet_trio.boundary import BoundaryErrors, contain
from kubelet_trio.config.inotify import Inotify, InotifyEvent, kick_every, kick_on_events
from kubelet_trio.config.static import make_static_pod
from kubelet_trio.config.types import FILE_SOURCE, SourceSet
from kubelet_trio.logs import kv

__all__ = ["FILE_CHECK_FREQUENCY", "FileScan", "FileSource", "FileState", "scan_manifest_path"]

logger = logging.getLogger(__name__)

#: Upstream ``fileCheckFrequency``.
FILE_CHECK_FREQUENCY = defaults.FILE_CHECK_FREQUENCY


@attrs.frozen
class FileState:
    """What one manifest file currently contributes: its bytes, its pods, its problems."""

    content: bytes
    pods: tuple[Pod, ...]
    errors: tuple[ManifestError, ...]


@attrs.frozen
class FileScan:
    """The result of one scan: pods in file order, per-file state, and this scan's new errors; and the
    files whose reading failed unexpectedly (already logged, for the caller to count)."""

    pods: tuple[Pod, ...]
    files: dict[str, FileState]
    errors: tuple[ManifestError, ...]
    contained: tuple[str, ...] = ()


def _list_files(path: str) -> list[str] | None:
    """Manifest files under ``path`` in sorted order, or ``None`` if the path does not exist."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return [path]
    files = []
    for name in sorted(os.listdir(path)):
        if name.startswith("."):
            continue
        full = os.path.join(path, name)
        try:
            mode = os.stat(full).st_mode
        except OSError:
            continue  # vanished meanwhile
        if stat.S_ISDIR(mode):
            logger.debug("not recursing into manifest path", extra=kv(path=full))
        elif stat.S_ISREG(mode):
            files.append(full)
    return files


#: The :class:`FileState` content of a file refused for its size (its bytes are not kept).
_TOO_LARGE = b"\0too-large"


def _read(path: str) -> bytes | OSError | ManifestError:
    try:
        return read_manifest_bytes(path)
    except (OSError, ManifestError) as err:
        return err


def scan_manifest_path(path: str, node_name: str, previous: dict[str, FileState] | None = None) -> FileScan:
    """Read every manifest under ``path`` and build static pods for ``node_name`` (blocking).

    ``previous`` is the last scan's per-file state: unchanged files are not parsed again, and a file
    that now fails keeps the pods it had.
    """
    previous = previous or {}
    try:
        names = _list_files(path)
    except OSError as err:
        logger.error("cannot list pod manifest path, keeping the last set", extra=kv(path=path, error=err))
        return FileScan(tuple(pod for state in previous.values() for pod in state.pods), previous, ())
    if names is None:
        logger.info("pod manifest path does not exist, ignoring", extra=kv(path=path))
        return FileScan((), {}, ())
    files: dict[str, FileState] = {}
    new_errors: list[ManifestError] = []
    contained: list[str] = []
    for name in names:
        content = _read(name)
        before = previous.get(name)
        result_pods: tuple[Pod, ...]
        errors: tuple[ManifestError, ...]
        if isinstance(content, ManifestError):  # too large: reported when it becomes so
            if before is not None and before.content == _TOO_LARGE:
                files[name] = before
                continue
            result_pods, errors, content_key = (), (content,), _TOO_LARGE
        elif isinstance(content, OSError):
            if isinstance(content, FileNotFoundError):
                continue  # deleted between listing and reading
            error = ManifestError(name, 1, (), f"cannot read: {content.strerror or content}")
            result_pods, errors, content_key = (), (error,), b"\0unreadable"
        elif before is not None and before.content == content:
            files[name] = before
            continue
        else:
            prepare = functools.partial(
                make_static_pod, node_name=node_name, source=FILE_SOURCE, origin=f"file:{name}"
            )
            # On a worker thread: logged here, counted by the caller (the counts belong to Trio's thread).
            with contain("manifest", None, path=name) as parsing:
                result = parse_manifest(content, file=name, prepare=prepare)
            if parsing.error is not None:
                contained.append(name)
                error = ManifestError(name, 1, (), f"cannot read: {type(parsing.error).__name__}")
                files[name] = FileState(content, before.pods if before is not None else (), (error,))
                continue
            for warning in result.warnings:  # Go ignores unknown fields silently; the pod still runs
                logger.warning(
                    "unknown field in pod manifest, ignored",
                    extra=kv(source="file", path=name, line=warning.line, field=warning.field),
                )
            result_pods, errors, content_key = result.pods, result.errors, content
        if errors:
            new_errors.extend(errors)
            kept = before.pods if before is not None else result_pods
            if before is not None and before.pods:
                logger.warning(
                    "manifest has errors, keeping its last good pods", extra=kv(path=name, pods=len(kept))
                )
            files[name] = FileState(content_key, kept, errors)
        else:
            files[name] = FileState(content_key, result_pods, ())
    pods = tuple(pod for state in files.values() for pod in state.pods)
    return FileScan(pods, files, tuple(new_errors), tuple(contained))


@attrs.define(eq=False)
class FileSource:
    """Sends :class:`SourceSet` s for the manifests at ``path`` on ``updates`` (which it closes)."""

    path: str
    node_name: str
    updates: trio.MemorySendChannel[SourceSet]
    check_period: float = FILE_CHECK_FREQUENCY
    use_inotify: bool = True
    #: Runs the blocking scan; a worker thread by default. Tests under a MockClock pass an inline runner
    #: so that virtual time cannot jump while a scan is in progress.
    run_sync: Callable[..., Awaitable[Any]] = trio.to_thread.run_sync
    #: Where contained failures are counted (None: only logged).
    boundary_errors: BoundaryErrors | None = None
    _files: dict[str, FileState] = attrs.field(factory=dict, init=False)
    _last_sent: tuple[Pod, ...] | None = attrs.field(default=None, init=False)
    _inotify: Inotify | None = attrs.field(default=None, init=False)
    _watches: dict[int, str | None] = attrs.field(factory=dict, init=False)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Scan, send the first set, report started, then follow changes until cancelled."""
        async with self.updates:
            self._inotify = Inotify.open() if self.use_inotify else None
            if self.use_inotify and self._inotify is None:
                logger.info(
                    "inotify unavailable, polling only", extra=kv(path=self.path, period=self.check_period)
                )
            try:
                await self._rescan()
                task_status.started()
                # One pending kick is enough: a scan reads everything, so further kicks coalesce.
                kick_send, kick_recv = trio.open_memory_channel[None](1)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(kick_every, self.check_period, kick_send.clone())
                    if self._inotify is not None:
                        nursery.start_soon(kick_on_events, self._inotify, self._relevant, kick_send.clone())
                    kick_send.close()
                    async for _ in kick_recv:
                        await self._rescan()
            finally:
                if self._inotify is not None:
                    self._inotify.close()

    async def _rescan(self) -> None:
        with contain("manifest", self.boundary_errors, path=self.path) as scanning:
            scan = await self.run_sync(scan_manifest_path, self.path, self.node_name, self._files)
            for error in scan.errors:
                logger.error("invalid pod manifest", extra=kv(source="file", error=error))
            if self.boundary_errors is not None:
                for _ in scan.contained:
                    self.boundary_errors.record("manifest")
            self._files = scan.files
            self._sync_watches()
        if scanning.error is not None:
            return  # the last set stands; the next tick or change scans again
        if scan.pods != self._last_sent:
            self._last_sent = scan.pods
            await self.updates.send(SourceSet(FILE_SOURCE, scan.pods))

    def _sync_watches(self) -> None:
        """Watch the path (if it is a directory or file) and its parent (to see it appear/vanish)."""
        if self._inotify is None:
            return
        parent = os.path.dirname(os.path.abspath(self.path))
        for target, name in ((parent, os.path.basename(os.path.abspath(self.path))), (self.path, None)):
            wd = self._inotify.add_watch(target)
            if wd is not None:
                self._watches[wd] = name

    def _relevant(self, event: InotifyEvent) -> bool:
        if event.wd not in self._watches:
            return False
        only = self._watches[event.wd]
        if only is not None:
            return event.name == only  # parent directory: only the manifest path itself matters
        return not event.name.startswith(".")
