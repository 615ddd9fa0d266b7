"""How full the image filesystem is (Go: the stats provider's ``ImageFsStats``).

The CRI's ``ImageFsInfo`` names the filesystem holding the images (its mountpoint) and what the images use
there, but not how big the filesystem is; Go asks cAdvisor for the mountpoint's capacity and free space.
:class:`StatvfsImageFs` does the same with ``statvfs``. :class:`FixedCapacityImageFs` pairs a given
capacity with the runtime's own figure for the bytes used: the simulated runtime (whose mountpoint does
not exist) and tests that want a full disk without filling one.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Protocol

import attrs

from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.fsio import RunSync, run_in_thread

if TYPE_CHECKING:
    from kubelet_trio.cri.gen.runtime import v1 as pb
    from kubelet_trio.cri.runtime import ImageService

__all__ = [
    "FixedCapacityImageFs",
    "FsStats",
    "ImageFsError",
    "ImageFsNotVisible",
    "ImageFsStatsProvider",
    "StatvfsImageFs",
]


class ImageFsError(Exception):
    """The image filesystem's usage is unknown; the message names the call or the mountpoint."""


class ImageFsNotVisible(ImageFsError):
    """The runtime's image filesystem is not a path on this machine (a simulated runtime, or a runtime in
    another mount namespace): there is nothing to measure, so nothing to collect for."""


@attrs.frozen
class FsStats:
    """Capacity and free bytes of one filesystem (available to unprivileged users, as ``df``)."""

    capacity: int
    available: int
    mountpoint: str = ""


class ImageFsStatsProvider(Protocol):
    async def image_fs_stats(self) -> FsStats: ...


async def _image_filesystem(runtime: ImageService) -> pb.FilesystemUsage:
    try:
        info = await runtime.image_fs_info()
    except cri_errors.CriError as err:
        raise ImageFsError(f"ImageFsInfo failed: {err}") from err
    if not info.image_filesystems:
        raise ImageFsError("ImageFsInfo reported no image filesystem")
    return info.image_filesystems[0]


def _statvfs(path: str) -> tuple[int, int]:
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


@attrs.define(eq=False)
class StatvfsImageFs:
    """The runtime's image filesystem measured with ``statvfs`` at the mountpoint ImageFsInfo names."""

    runtime: ImageService
    run_sync: RunSync = run_in_thread

    async def image_fs_stats(self) -> FsStats:
        usage = await _image_filesystem(self.runtime)
        mountpoint = usage.fs_id.mountpoint if usage.fs_id is not None else ""
        if not mountpoint:
            raise ImageFsError("ImageFsInfo reported an image filesystem without a mountpoint")
        try:
            capacity, available = await self.run_sync(_statvfs, mountpoint)
        except FileNotFoundError as err:
            raise ImageFsNotVisible(f"the image filesystem {mountpoint} does not exist here") from err
        except OSError as err:
            raise ImageFsError(f"statvfs of the image filesystem {mountpoint}: {err}") from err
        return FsStats(capacity, available, mountpoint)


@attrs.define(eq=False)
class FixedCapacityImageFs:
    """``capacity`` bytes, of which the runtime's ImageFsInfo ``used_bytes`` are taken (settable)."""

    runtime: ImageService
    capacity: int

    async def image_fs_stats(self) -> FsStats:
        usage = await _image_filesystem(self.runtime)
        used = usage.used_bytes.value if usage.used_bytes is not None else 0
        mountpoint = usage.fs_id.mountpoint if usage.fs_id is not None else ""
        return FsStats(self.capacity, max(self.capacity - used, 0), mountpoint)
