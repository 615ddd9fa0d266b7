"""Where container logs live, and the file operations on them (Go: ``kuberuntime/helpers.go``,
``calcRestartCountByLogDir``, ``removeContainerLog``).

Layout (``--pod-logs-dir``, default ``/var/log/pods``)::

    <pod_logs_dir>/<namespace>_<name>_<uid>/            the sandbox's log_directory
    <pod_logs_dir>/<namespace>_<name>_<uid>/<container>/<restartCount>.log

The directories are 0755 (:data:`LOG_DIR_MODE`) whatever the umask; the runtime writes the files in them
(containerd 0640, as the simulated runtime does). These are plain blocking functions: callers run them
through their ``run_sync`` (see :mod:`kubelet_trio.fsio`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil

from kubelet_trio import fsio

__all__ = [
    "LOG_DIR_MODE",
    "container_log_path",
    "container_logs_directory",
    "make_dirs",
    "pod_logs_directory",
    "remove_container_log",
    "remove_pod_logs",
    "restart_count_from_log_dir",
]

#: The pod's and each container's log directory (Go: ``MkdirAll(logDir, 0755)``): log agents that do not
#: run as root read them; no one but the owner writes there.
LOG_DIR_MODE = 0o755
_RESTART_COUNT_LOG_FILE = re.compile(r"^(\d+)\.log(\..*)?")


def pod_logs_directory(root: str, namespace: str, name: str, uid: str) -> str:
    return os.path.join(root, f"{namespace}_{name}_{uid}")


def container_logs_directory(root: str, namespace: str, name: str, uid: str, container_name: str) -> str:
    return os.path.join(pod_logs_directory(root, namespace, name, uid), container_name)


def container_log_path(container_name: str, restart_count: int) -> str:
    """The CRI ``log_path``, relative to the sandbox's ``log_directory``."""
    return f"{container_name}/{restart_count}.log"


def restart_count_from_log_dir(path: str) -> int:
    """1 + the largest ``<n>.log`` (or rotated ``<n>.log.*``) in a container's log directory, else 0.

    Used when no previous instance is known (GC'd, or a runtime that lost its state on reboot), so the
    new instance neither overwrites nor appends to an old log.
    """
    try:
        entries = list(os.scandir(path))
    except (FileNotFoundError, NotADirectoryError):
        return 0
    count = 0
    for entry in entries:
        match = _RESTART_COUNT_LOG_FILE.match(entry.name)
        if match is None or entry.is_dir():
            continue
        count = max(count, int(match[1]) + 1)
    return count


def remove_container_log(log_path: str) -> None:
    """Remove a container's log file and its rotated siblings (``<n>.log.*``); missing is fine."""
    if not log_path:
        return
    directory, base = os.path.split(log_path)
    try:
        names = os.listdir(directory or ".")
    except FileNotFoundError:
        return
    for name in names:
        if name == base or name.startswith(base + "."):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(directory, name))


def remove_pod_logs(path: str) -> None:
    """Remove a pod's whole log directory; missing is fine."""
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(path)


def make_dirs(path: str) -> None:
    """Create a log directory and its missing parents, each exactly :data:`LOG_DIR_MODE`: a service
    manager's umask 0 would otherwise leave them 0777, writable by every pod's user on the host, and a
    umask of 077 would hide them from the log agents. Existing directories are left as they are."""
    for directory in fsio.make_dirs(path, LOG_DIR_MODE):
        os.chmod(directory, LOG_DIR_MODE)
