"""Mounting tmpfs for memory-backed emptyDir volumes (Go: ``k8s.io/mount-utils``).

The kubelet runs as root; ``mount -t tmpfs`` is run as a subprocess so nothing blocks the event loop.
Tests can pass a different :class:`Mounter`.
"""

from __future__ import annotations

import logging
import os
from typing import Protocol

import attrs
import trio

__all__ = ["MountFailed", "Mounter", "SystemMounter", "is_mount_point"]

logger = logging.getLogger(__name__)


class MountFailed(OSError):
    """``mount``/``umount`` failed; the message carries its output."""


class Mounter(Protocol):
    async def mount_tmpfs(self, path: str, size_bytes: int | None) -> None: ...

    async def unmount(self, path: str) -> None: ...

    def is_mount_point(self, path: str) -> bool:
        """Blocking but cheap (reads /proc/self/mountinfo)."""
        ...


def _unescape(field: str) -> str:
    """Mount points in /proc/self/mountinfo escape space, tab, newline and backslash as octal."""
    return field.encode().decode("unicode_escape") if "\\" in field else field


def is_mount_point(path: str) -> bool:
    target = os.path.realpath(path)
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            return any(_unescape(line.split()[4]) == target for line in f if len(line.split()) > 4)
    except OSError:
        return False


@attrs.frozen
class SystemMounter:
    async def _run(self, argv: list[str]) -> None:
        result = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
        if result.returncode != 0:
            output = (result.stderr or result.stdout or b"").decode(errors="replace").strip()
            raise MountFailed(f"{' '.join(argv)} failed with exit code {result.returncode}: {output}")

    async def mount_tmpfs(self, path: str, size_bytes: int | None) -> None:
        options = ["-o", f"size={size_bytes}"] if size_bytes else []
        try:
            await self._run(["mount", "-t", "tmpfs", *options, "tmpfs", path])
        except FileNotFoundError as err:
            raise MountFailed(f"cannot run mount: {err}") from err
        logger.info("mounted tmpfs path=%s size=%s", path, size_bytes)

    async def unmount(self, path: str) -> None:
        try:
            await self._run(["umount", path])
        except FileNotFoundError as err:
            raise MountFailed(f"cannot run umount: {err}") from err

    def is_mount_point(self, path: str) -> bool:
        return is_mount_point(path)
