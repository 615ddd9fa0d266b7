"""hostPath volumes (Go: ``pkg/volume/hostpath/host_path.go``): the node's path itself, after the type
check the volume asks for. Nothing is mounted and nothing is removed at teardown.
"""

from __future__ import annotations

import os
import stat

from kubelet_trio.api import HostPathVolumeSource
from kubelet_trio.api.validation import HOST_PATH_TYPES  # the one list of valid types
from kubelet_trio.fsio import make_dirs

__all__ = ["HOST_PATH_TYPES", "check_host_path"]


def _kind(path: str) -> str | None:
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(mode):
        return "Directory"
    if stat.S_ISREG(mode):
        return "File"
    if stat.S_ISSOCK(mode):
        return "Socket"
    if stat.S_ISCHR(mode):
        return "CharDevice"
    if stat.S_ISBLK(mode):
        return "BlockDevice"
    return "Unknown"


_NOT_A = {
    "Directory": "is not a directory",
    "File": "is not a file",
    "Socket": "is not a socket file",
    "CharDevice": "is not a character device",
    "BlockDevice": "is not a block device",
}


def check_host_path(source: HostPathVolumeSource) -> str:
    """Check (and for ``*OrCreate`` create) the path; return it. Raises ValueError with Go's message.

    ``DirectoryOrCreate`` makes the directory and its parents (0755); ``FileOrCreate`` makes an empty
    file (0644) but not its parent directory. Blocking.
    """
    path = source.path or ""
    if ".." in path.split("/"):
        raise ValueError(f"invalid HostPath `{path}`: must not contain '..'")
    kind = source.type or ""
    if kind not in HOST_PATH_TYPES:
        raise ValueError(f"{kind} is an invalid volume type")
    if not kind:
        return path
    actual = _kind(path)
    if kind == "DirectoryOrCreate":
        if actual is None:
            make_dirs(path, 0o755)  # parents too, as Go's MkdirAll
            return path
        kind = "Directory"
    elif kind == "FileOrCreate":
        if actual is None:
            try:
                fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
            except FileNotFoundError as err:
                raise ValueError(f"hostPath type check failed: {path}: {err.strerror}") from err
            os.close(fd)
            return path
        kind = "File"
    if actual != kind:
        raise ValueError(f"hostPath type check failed: {path} {_NOT_A[kind]}")
    return path
