"""emptyDir volumes (Go: ``pkg/volume/emptydir/empty_dir.go``).

A directory (mode 0777) under the pod's volume directory; with ``medium: Memory`` a tmpfs mounted there,
sized by ``sizeLimit``, else by the pod's memory limit, else by the node's allocatable memory, whose root
keeps the tmpfs default 1777 (Go mounts over the 0777 directory and never changes the mode after). The
volume lives as long as the pod: created before its first container starts, removed after its last stops.
The same directory setup (:func:`setup_dir`) is the root of the configMap, secret, downwardAPI and
projected volumes, which Go builds on an emptyDir.

``sizeLimit`` of a disk-backed emptyDir is not enforced (the Go kubelet's eviction manager does that).
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Sequence

from kubelet_trio.api import Container, EmptyDirVolumeSource, Pod
from kubelet_trio.cm.allocatable import NodeAllocatable
from kubelet_trio.fsio import RunSync, make_dirs
from kubelet_trio.volumemanager.datadirs import make_plugin_dir
from kubelet_trio.volumemanager.mounter import Mounter, MountFailed
from kubelet_trio.volumemanager.ownership import set_volume_ownership

__all__ = [
    "EMPTY_DIR_MODE",
    "memory_volume_size",
    "mount_tmpfs_once",
    "set_up_empty_dir",
    "setup_dir",
]

logger = logging.getLogger(__name__)

EMPTY_DIR_MODE = 0o777


def _pod_memory_limit(pod: Pod) -> int | None:
    """Go's ``PodLimits`` for memory: the sum over app containers, at least each init container's; None
    when some container has no limit."""
    spec = pod.spec
    if spec is None:
        return None

    def limit(containers: Sequence[Container]) -> list[int | None]:
        values: list[int | None] = []
        for c in containers:
            quantity = (c.resources.limits or {}).get("memory") if c.resources else None
            values.append(quantity.int_value() if quantity is not None else None)
        return values

    app = limit(spec.containers or ())
    init = limit(spec.init_containers or ())
    if not app or None in app or None in init:
        return None
    total = sum(v for v in app if v is not None)
    return max([total, *(v for v in init if v is not None)])


def memory_volume_size(
    pod: Pod, source: EmptyDirVolumeSource, allocatable: NodeAllocatable | None
) -> int | None:
    """The tmpfs size of a memory-backed emptyDir (``SizeMemoryBackedVolumes``)."""
    if source.size_limit is not None and source.size_limit.int_value() > 0:
        return source.size_limit.int_value()
    pod_limit = _pod_memory_limit(pod)
    if pod_limit:
        return pod_limit
    if allocatable is not None and allocatable.memory > 0:
        return allocatable.memory
    return None


def setup_dir(path: str) -> None:
    """Go's ``setupDir``: the volume directory with mode 0777 whatever the umask (its ``volumes/<plugin>``
    parent 0750). Only the permission bits are compared, so a mounted tmpfs root keeps its sticky bit and
    an fsGroup's setgid bit stays. Blocking."""
    make_plugin_dir(path)
    make_dirs(path, EMPTY_DIR_MODE)
    mode = stat.S_IMODE(os.lstat(path).st_mode)
    if mode & 0o777 != EMPTY_DIR_MODE:
        os.chmod(path, EMPTY_DIR_MODE)


async def mount_tmpfs_once(
    path: str, size: int | None, *, mounter: Mounter, run_sync: RunSync, why: str
) -> None:
    """Create ``path`` and mount a tmpfs there unless one is mounted already. Raises MountFailed."""
    await run_sync(setup_dir, path)
    if await run_sync(mounter.is_mount_point, path):
        return
    try:
        await run_sync(mounter.mount_tmpfs, path, size)
    except OSError as err:
        hint = " (the kubelet must run as root)" if err.errno == errno.EPERM else ""
        raise MountFailed(f"cannot mount a tmpfs for {why}{hint}: {err}") from err


async def set_up_empty_dir(
    path: str,
    pod: Pod,
    source: EmptyDirVolumeSource,
    *,
    mounter: Mounter,
    run_sync: RunSync,
    allocatable: NodeAllocatable | None,
    fs_group: int | None,
) -> None:
    """Idempotent: an existing directory (or tmpfs) is kept. Raises ValueError / MountFailed."""
    medium = source.medium or ""
    if medium not in ("", "Memory"):
        raise ValueError(f"unsupported emptyDir medium {medium!r}")
    if medium == "Memory":
        size = memory_volume_size(pod, source, allocatable)
        await mount_tmpfs_once(path, size, mounter=mounter, run_sync=run_sync, why="a memory-backed emptyDir")
    else:
        await run_sync(setup_dir, path)
    await run_sync(set_volume_ownership, path, fs_group, False)
