"""The simulated runtime's container log writer: CRI log records, written the way containerd writes them.

containerd keeps a container's log file open: after the kubelet renames it (a rotation), output still
lands in the renamed file until ``ReopenContainerLog`` opens a new one at the log path. The writer keeps
that behaviour without holding a descriptor per container: it remembers the identity (device, inode) of
the file it opened and, when the log path names another file (or none), appends to the file with that
identity in the same directory; output for a file that was deleted is lost, as it would be for an open
descriptor on an unlinked file.

Blocking functions: the runtime calls them through its ``run_sync``.
"""

from __future__ import annotations

import os

import attrs

from kubelet_trio.api.timefmt import rfc3339_nano
from kubelet_trio.fsio import make_dirs

__all__ = ["LOG_FILE_MODE", "SimLogWriter", "cri_records"]

#: A container's log file, as containerd creates it (``os.OpenFile(path, ..., 0640)``): the kubelet
#: (root) and the log agents in its group read it, no one else.
LOG_FILE_MODE = 0o640
#: Its directory when the kubelet has not made it already (it does, 0755, before creating a container).
LOG_DIR_MODE = 0o755


def cri_records(text: str, stream: str, wall_ns: int) -> bytes:
    """``text`` as CRI records: one ``F`` record per line, a ``P`` record for a last line without a
    newline (containerd writes one when the stream ends mid-line, as after ``printf DONE``)."""
    stamp = rfc3339_nano(wall_ns)
    lines = text.split("\n")
    records = [f"{stamp} {stream} F {line}\n" for line in lines[:-1]]
    if lines[-1]:
        records.append(f"{stamp} {stream} P {lines[-1]}\n")
    return "".join(records).encode()


@attrs.define(eq=False)
class SimLogWriter:
    """One container's log output, appended to the file it opened (see the module docstring)."""

    path: str
    _identity: tuple[int, int] | None = None

    def open(self, data: bytes = b"") -> None:
        """Create (or open) the file at ``path``, write there from now on, starting with ``data``
        (containerd creates a container's loggers at start and again for ReopenContainerLog)."""
        for directory in make_dirs(os.path.dirname(self.path), LOG_DIR_MODE):
            os.chmod(directory, LOG_DIR_MODE)
        try:  # a new file is containerd's 0640 whatever the umask; an existing one keeps its mode
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, LOG_FILE_MODE)
            os.fchmod(fd, LOG_FILE_MODE)
        except FileExistsError:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        with open(fd, "ab") as f:
            st = os.fstat(f.fileno())
            f.write(data)
        self._identity = (st.st_dev, st.st_ino)

    def write(self, data: bytes) -> None:
        target = self._target()
        if target is None or not data:
            return
        with open(target, "ab") as f:
            f.write(data)

    def _target(self) -> str | None:
        if self._identity is None:
            return None
        try:
            st = os.stat(self.path)
            if (st.st_dev, st.st_ino) == self._identity:
                return self.path
        except FileNotFoundError:
            pass
        try:  # renamed: the runtime still holds it open
            with os.scandir(os.path.dirname(self.path)) as entries:
                for entry in entries:
                    if entry.inode() == self._identity[1] and entry.stat().st_dev == self._identity[0]:
                        return entry.path
        except FileNotFoundError:
            pass
        return None
