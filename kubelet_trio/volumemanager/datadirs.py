"""The kubelet's own directories and their modes (Go: ``setupDataDirs`` in ``kubelet.go``,
``makePodDataDirs`` in ``kubelet_pods.go``).

Everything a pod gets from the node - Secrets, service account tokens, ConfigMaps, termination messages -
lives below ``<root>/pods``. What keeps other local users out is that no directory on the way lets them
through: ``<root>``, ``pods`` and ``plugins``, and per pod ``pods/<uid>`` with its ``volumes``,
``plugins`` and ``containers`` and each ``volumes/<plugin>`` are 0750 (owned by the kubelet's user),
missing parents included (Go's ``MkdirAll``). Below that, modes are what the pod needs, as in Go: volume
roots 0777 (a tmpfs root keeps its 1777), files as ``defaultMode``/``items[].mode`` say. Containers never
walk these parents - each volume is bind-mounted - so non-root pods are not affected.

Directories an older kubelet left with looser modes (0755) are tightened at start, each logged once.
A sticky root directory (``--root-dir /tmp``) or ``/`` is shared with others and never changed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Iterator

from kubelet_trio.fsio import make_dirs
from kubelet_trio.volumemanager.paths import pod_dir, pods_dir

__all__ = [
    "DATA_DIR_MODE",
    "DataDirError",
    "make_plugin_dir",
    "make_pod_data_dirs",
    "plugins_dir",
    "setup_data_dirs",
]

logger = logging.getLogger(__name__)

DATA_DIR_MODE = 0o750
#: Group write and everything for others: what a data directory must not grant.
LOOSE_BITS = 0o027
POD_SUBDIRS = ("volumes", "plugins", "containers")


class DataDirError(RuntimeError):
    """The kubelet cannot create one of its directories (it cannot start)."""


def plugins_dir(root: str) -> str:
    return os.path.join(root, "plugins")


def _create(path: str, what: str) -> None:
    try:
        make_dirs(path, DATA_DIR_MODE)
    except OSError as err:
        raise DataDirError(f"error creating {what} directory {path}: {err.strerror or err}") from err


def _tighten(path: str, *, follow: bool = False) -> bool:
    """Drop :data:`LOOSE_BITS` from an existing directory; True when it changed. Symlinks (unless
    ``follow``), files and shared directories are left alone."""
    try:
        info = os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        return False
    mode = stat.S_IMODE(info.st_mode)
    if not stat.S_ISDIR(info.st_mode) or not mode & LOOSE_BITS:
        return False
    if mode & stat.S_ISVTX or os.path.realpath(path) == "/":
        logger.warning(
            "root directory is shared, not tightening it", extra={"path": path, "mode": f"{mode:04o}"}
        )
        return False
    tightened = mode & ~LOOSE_BITS
    try:
        os.chmod(path, tightened)
    except OSError as err:
        logger.warning(
            "cannot tighten directory mode",
            extra={"path": path, "mode": f"{mode:04o}", "err": err.strerror or str(err)},
        )
        return False
    logger.warning(
        "tightened directory mode",
        extra={"path": path, "old_mode": f"{mode:04o}", "mode": f"{tightened:04o}"},
    )
    return True


def _existing_pod_dirs(root: str) -> Iterator[str]:
    """Pod directories and the directories the kubelet makes in them, as an older kubelet left them."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for pod in os.scandir(pods_dir(root)):
            if not pod.is_dir(follow_symlinks=False):
                continue
            yield pod.path
            for sub in POD_SUBDIRS:
                yield os.path.join(pod.path, sub)
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                for plugin in os.scandir(os.path.join(pod.path, "volumes")):
                    yield plugin.path


def setup_data_dirs(root: str) -> list[str]:
    """Create ``<root>``, ``pods`` and ``plugins`` (0750) and tighten what exists; return the directories
    tightened. Blocking; raises :class:`DataDirError` when a directory cannot be created."""
    root = os.path.normpath(root)
    _create(root, "root")
    _create(pods_dir(root), "pods")
    _create(plugins_dir(root), "plugins")
    tightened = [root] if _tighten(root, follow=True) else []
    for path in (pods_dir(root), plugins_dir(root), *_existing_pod_dirs(root)):
        if _tighten(path):
            tightened.append(path)
    return tightened


def make_pod_data_dirs(root: str, uid: str) -> None:
    """``pods/<uid>`` and its ``volumes``, ``plugins`` and ``containers`` (0750), before the pod's volumes
    are set up. Blocking; raises OSError."""
    for sub in POD_SUBDIRS:
        make_dirs(os.path.join(pod_dir(root, uid), sub), DATA_DIR_MODE)


def make_plugin_dir(volume_path: str) -> None:
    """The ``volumes/<plugin>`` directory above a volume (and any missing parent), 0750. Blocking."""
    make_dirs(os.path.dirname(volume_path), DATA_DIR_MODE)
