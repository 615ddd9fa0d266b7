"""Atomic projection of a set of files into a volume directory (Go: ``pkg/volume/util/atomic_writer.go``).

Readers in a container must never see a half-updated volume (a downward API ``labels`` file next to a
stale ``annotations`` file). So the files are written into a fresh hidden directory
``..<timestamp>.<random>``, the ``..data`` symlink is switched to it with one ``rename``, and the
user-visible names are symlinks through ``..data``::

    <dir>/labels        -> ..data/labels
    <dir>/..data        -> ..2024_05_01_10_00_00.123456789
    <dir>/..2024_05_01_10_00_00.123456789/labels

Nothing is written when the payload equals what ``..data`` shows. Blocking; callers use ``run_sync``.

Modes as Go's: the timestamped directory and any sub-directory of a path are 0755 whatever the umask,
and each file has exactly its projection's mode (``defaultMode``/``items[].mode``). A file is created
0600 and only then given its mode, so a 0400 secret is never readable by others, not even while written.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping

import attrs

from kubelet_trio.fsio import make_dirs
from kubelet_trio.logs import kv

__all__ = ["DATA_DIR_NAME", "AtomicWriter", "FileProjection", "PayloadError", "validate_payload"]

logger = logging.getLogger(__name__)

DATA_DIR_NAME = "..data"
NEW_DATA_DIR_NAME = "..data_tmp"
MAX_PATH_LENGTH = 4096
MAX_FILE_NAME_LENGTH = 255
DIR_MODE = 0o755
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class PayloadError(ValueError):
    """A payload path is absolute, climbs out of the volume, or starts with ``..``."""


@attrs.frozen
class FileProjection:
    data: bytes
    mode: int = 0o644
    fs_user: int | None = None  # the file's owner (Go FsUser: service account tokens), else root


def _validate_path(path: str) -> None:
    if not path:
        raise PayloadError("invalid path: must not be empty")
    if len(path) > MAX_PATH_LENGTH:
        raise PayloadError(f"invalid path: must be less than or equal to {MAX_PATH_LENGTH} characters")
    if os.path.isabs(path):
        raise PayloadError(f"invalid path: must be relative path: {path}")
    for segment in path.split("/"):
        if len(segment) > MAX_FILE_NAME_LENGTH:
            raise PayloadError(f"invalid path: segments must be less than {MAX_FILE_NAME_LENGTH} characters")
        if segment == "..":
            raise PayloadError(f"invalid path: must not contain '..': {path}")
    if path.startswith(".."):
        raise PayloadError(f"invalid path: must not start with '..': {path}")


def validate_payload(payload: Mapping[str, FileProjection]) -> dict[str, FileProjection]:
    """Clean every path (``filepath.Clean``) after checking it."""
    cleaned: dict[str, FileProjection] = {}
    for path, projection in payload.items():
        _validate_path(path)
        cleaned[os.path.normpath(path)] = projection
    return cleaned


def _top_level(path: str) -> str:
    return path.split("/", 1)[0]


def _write_file(full: str, projection: FileProjection) -> None:
    for directory in make_dirs(os.path.dirname(full), DIR_MODE):
        os.chmod(directory, DIR_MODE)
    fd = os.open(full, _CREATE_FLAGS, 0o600)
    try:
        with open(fd, "wb", closefd=False) as f:
            f.write(projection.data)
        if projection.fs_user is not None:
            os.fchown(fd, projection.fs_user, -1)
        os.fchmod(fd, projection.mode)
    finally:
        os.close(fd)


@attrs.define(eq=False)
class AtomicWriter:
    target_dir: str
    log_context: Mapping[str, object] = attrs.Factory(dict)

    def write(
        self, payload: Mapping[str, FileProjection], set_perms: Callable[[str], None] | None = None
    ) -> bool:
        """Project ``payload``; return True when something changed. ``set_perms(ts_dir)`` runs on the new
        directory before it is published (fsGroup ownership)."""
        cleaned = validate_payload(payload)
        data_dir = os.path.join(self.target_dir, DATA_DIR_NAME)
        try:
            old_ts_name = os.readlink(data_dir)
        except OSError:
            old_ts_name = ""
        old_ts_dir = os.path.join(self.target_dir, old_ts_name) if old_ts_name else ""
        to_remove = self._paths_to_remove(cleaned, old_ts_dir)
        if not self._should_write(cleaned, old_ts_dir) and not to_remove:
            return False

        ts_dir = tempfile.mkdtemp(
            prefix=dt.datetime.now(dt.UTC).strftime("..%Y_%m_%d_%H_%M_%S."), dir=self.target_dir
        )
        os.chmod(ts_dir, DIR_MODE)
        try:
            for path, projection in cleaned.items():
                _write_file(os.path.join(ts_dir, path), projection)
            if set_perms is not None:
                set_perms(ts_dir)
            self._create_user_visible(cleaned)
            tmp_link = os.path.join(self.target_dir, NEW_DATA_DIR_NAME)
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp_link)
            os.symlink(os.path.basename(ts_dir), tmp_link)
            os.rename(tmp_link, data_dir)
        except BaseException:
            shutil.rmtree(ts_dir, ignore_errors=True)
            raise
        for path in to_remove:
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(self.target_dir, path))
        if old_ts_dir:
            shutil.rmtree(old_ts_dir, ignore_errors=True)
        logger.debug("volume files updated", extra=kv(**self.log_context, dir=self.target_dir))
        return True

    def _should_write(self, payload: Mapping[str, FileProjection], old_ts_dir: str) -> bool:
        if not old_ts_dir:
            return True
        for path, projection in payload.items():
            full = os.path.join(old_ts_dir, path)
            try:
                with open(full, "rb") as f:
                    if f.read() != projection.data:
                        return True
                info = os.stat(full)
                if (info.st_mode & 0o7777) != projection.mode:
                    return True
                if projection.fs_user is not None and info.st_uid != projection.fs_user:
                    return True
            except OSError:
                return True
            if not os.path.lexists(os.path.join(self.target_dir, _top_level(path))):
                return True
        return False

    def _paths_to_remove(self, payload: Mapping[str, FileProjection], old_ts_dir: str) -> set[str]:
        """User-visible top-level names of the old payload that the new one no longer has."""
        if not old_ts_dir or not os.path.isdir(old_ts_dir):
            return set()
        old = set(os.listdir(old_ts_dir))
        new = {_top_level(p) for p in payload}
        return old - new

    def _create_user_visible(self, payload: Mapping[str, FileProjection]) -> None:
        for top in {_top_level(p) for p in payload}:
            visible = os.path.join(self.target_dir, top)
            if not os.path.lexists(visible):
                os.symlink(os.path.join(DATA_DIR_NAME, top), visible)
