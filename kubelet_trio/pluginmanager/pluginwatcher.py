"""The registry directory's sockets (Go: ``pluginwatcher``): what the reconciler should have registered.

Go walks the directory once and then follows fsnotify events, directories included. Here a scan of the
directory tree is the truth and inotify only says when to scan again early; a periodic scan covers a missed
event (no inotify, a watch limit). Names starting with ``.`` are ignored, as are files that are not sockets.
"""

from __future__ import annotations

import logging
import os
import stat

from kubelet_trio.logs import kv
from kubelet_trio.pluginmanager.cache import SocketIdentity

__all__ = ["scan_sockets"]

logger = logging.getLogger(__name__)


def scan_sockets(root: str) -> tuple[dict[str, SocketIdentity], list[str]]:
    """The sockets under ``root`` (recursively) with their identity, and the directories scanned (to
    watch). An unreadable entry is logged and skipped; an unreadable ``root`` raises ``OSError``."""
    sockets: dict[str, SocketIdentity] = {}
    directories = [root]
    pending = [root]
    while pending:
        directory = pending.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError as err:
            if directory == root:
                raise
            logger.error("Error accessing path", extra=kv(path=directory, err=str(err)))
            continue
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.name.startswith("."):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError as err:
                logger.error("Error accessing path", extra=kv(path=entry.path, err=str(err)))
                continue
            if stat.S_ISDIR(info.st_mode):
                directories.append(entry.path)
                pending.append(entry.path)
            elif stat.S_ISSOCK(info.st_mode):
                sockets[entry.path] = (info.st_ino, info.st_ctime_ns)
    return sockets, directories
