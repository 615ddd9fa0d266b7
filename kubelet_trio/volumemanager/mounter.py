"""tmpfs mounts for memory-backed volumes (Go: ``k8s.io/mount-utils``).

Memory-backed emptyDirs and the secret, downwardAPI and projected volumes live on a tmpfs, as in Go, so
their contents never reach a disk. ``mount(2)``/``umount2(2)`` are called directly (ctypes, no
subprocess): a syscall of microseconds that callers run through their ``run_sync``. Mounting needs root
(``CAP_SYS_ADMIN``); tests can pass a different :class:`Mounter`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
from typing import Protocol

import attrs

from kubelet_trio.logs import kv

__all__ = [
    "MountFailed",
    "Mounter",
    "SystemMounter",
    "is_mount_point",
    "mount_points_under",
    "unmount_all_under",
]

logger = logging.getLogger(__name__)

MNT_DETACH = 2


class MountFailed(OSError):
    """``mount``/``umount`` failed; ``errno`` is the syscall's."""


class Mounter(Protocol):
    """Blocking but quick operations (run them through ``run_sync``)."""

    def mount_tmpfs(self, path: str, size_bytes: int | None) -> None: ...

    def unmount(self, path: str) -> None: ...

    def is_mount_point(self, path: str) -> bool:
        """Reads /proc/self/mountinfo."""
        ...


def _unescape(field: str) -> str:
    """Mount points in /proc/self/mountinfo escape space, tab, newline and backslash as octal."""
    return field.encode().decode("unicode_escape") if "\\" in field else field


def _mount_points() -> list[str]:
    """The mount point field of each line (space-separated; spaces within a path are escaped)."""
    points: list[str] = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            for line in f:
                fields = line.split(" ", 5)
                if len(fields) > 5:
                    points.append(_unescape(fields[4]))
    except OSError:
        return []
    return points


def is_mount_point(path: str) -> bool:
    return os.path.realpath(path) in _mount_points()


def mount_points_under(root: str) -> list[str]:
    """Mount points strictly below ``root``, deepest first (the order to unmount them)."""
    prefix = os.path.realpath(root).rstrip("/") + "/"
    return sorted((p for p in _mount_points() if p.startswith(prefix)), key=len, reverse=True)


_libc: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        text = ctypes.c_char_p
        libc.mount.argtypes = [text, text, text, ctypes.c_ulong, ctypes.c_void_p]
        libc.mount.restype = ctypes.c_int
        libc.umount2.argtypes = [text, ctypes.c_int]
        libc.umount2.restype = ctypes.c_int
        _libc = libc
    return _libc


def _check(rc: int, what: str) -> None:
    if rc != 0:
        code = ctypes.get_errno()
        raise MountFailed(code, f"{what}: {os.strerror(code)}")


@attrs.frozen
class SystemMounter:
    def mount_tmpfs(self, path: str, size_bytes: int | None) -> None:
        options = f"size={size_bytes}" if size_bytes else ""
        what = f"mount -t tmpfs -o {options or 'defaults'} tmpfs {path}"
        rc = _lib().mount(b"tmpfs", os.fsencode(path), b"tmpfs", 0, options.encode() or None)
        _check(rc, what)
        logger.info("mounted tmpfs", extra=kv(path=path, size=size_bytes))

    def unmount(self, path: str) -> None:
        _check(_lib().umount2(os.fsencode(path), 0), f"umount {path}")
        logger.info("unmounted", extra=kv(path=path))

    def is_mount_point(self, path: str) -> bool:
        return is_mount_point(path)


def unmount_all_under(root: str) -> list[str]:
    """Detach every mount below ``root`` (a harness removing a node's temporary root directory while
    pods still had tmpfs volumes). Returns what it unmounted; errors other than "not mounted" raise."""
    done: list[str] = []
    for path in mount_points_under(root):
        rc = _lib().umount2(os.fsencode(path), MNT_DETACH)
        if rc != 0 and ctypes.get_errno() in (errno.EINVAL, errno.ENOENT):
            continue
        _check(rc, f"umount -l {path}")
        done.append(path)
    return done
