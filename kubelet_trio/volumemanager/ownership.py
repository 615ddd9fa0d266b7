"""fsGroup ownership of a volume (Go: ``pkg/volume/volume_linux.go`` ``SetVolumeOwnership``).

Every file gets group ``fsGroup`` and group read/write (read-only volumes: group read), directories
also group execute and setgid, so that files created later inherit the group.
"""

from __future__ import annotations

import os
import stat

__all__ = ["set_dir_ownership", "set_volume_ownership"]

RW_MASK = 0o660
RO_MASK = 0o440
EXEC_MASK = 0o110


def _apply(path: str, fs_group: int, read_only: bool) -> None:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return  # the atomic writer's symlinks: their targets are handled on their own
    os.chown(path, -1, fs_group)
    mask = RO_MASK if read_only else RW_MASK
    if stat.S_ISDIR(info.st_mode):
        mask |= stat.S_ISGID | EXEC_MASK
    os.chmod(path, stat.S_IMODE(info.st_mode) | mask)


def set_dir_ownership(path: str, fs_group: int | None, read_only: bool = False) -> None:
    """Only ``path`` itself: the root of a volume whose files the atomic writer handed to
    :func:`set_volume_ownership` before publishing them. Blocking."""
    if fs_group is not None:
        _apply(path, fs_group, read_only)


def set_volume_ownership(root: str, fs_group: int | None, read_only: bool = False) -> None:
    """Blocking; walks ``root`` without following symlinks."""
    if fs_group is None:
        return
    _apply(root, fs_group, read_only)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            _apply(os.path.join(dirpath, name), fs_group, read_only)
