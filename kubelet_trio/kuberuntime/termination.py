"""Termination messages (Go: ``kuberuntime_container.go`` ``makeMounts`` / ``getTerminationMessage`` /
``readLastStringFromContainerLogs``).

Each container instance gets an empty, world-writable file under ``<root>/pods/<uid>/containers/<name>/``
bind-mounted at its ``terminationMessagePath``. When the instance has exited, the kubelet reads at most
4 KiB of that file into ``terminated.message``; with ``terminationMessagePolicy: FallbackToLogsOnError``
a failed container that left the file empty gets the last 80 records of its log, cut to their last 2 KiB,
instead (``printf DONE; false`` gives ``DONE``: a fragment keeps its missing newline).

Blocking functions: callers run them through their ``run_sync``.
"""

from __future__ import annotations

import os
import secrets

from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.kuberuntime.logs_reader import LogOptions, read_text

__all__ = [
    "FALLBACK_TO_LOGS_ON_ERROR",
    "MAX_MESSAGE_LENGTH",
    "MAX_MESSAGE_LOG_BYTES",
    "MAX_MESSAGE_LOG_LINES",
    "create_termination_message_file",
    "read_last_log_text",
    "termination_message",
]

MAX_MESSAGE_LENGTH = 4 * 1024
MAX_MESSAGE_LOG_BYTES = 2 * 1024
MAX_MESSAGE_LOG_LINES = 80
FALLBACK_TO_LOGS_ON_ERROR = "FallbackToLogsOnError"
CONTAINER_CANNOT_RUN = "ContainerCannotRun"


def create_termination_message_file(pod_container_dir: str) -> str:
    """An empty file (mode 0666) with a random name in the container's directory; return its path."""
    os.makedirs(pod_container_dir, mode=0o750, exist_ok=True)
    path = os.path.join(pod_container_dir, secrets.token_hex(4))
    with open(path, "w"):
        pass
    os.chmod(path, 0o666)
    return path


def _read_at_most(path: str, limit: int) -> str:
    """The last ``limit`` bytes of the file (Go's ``tail.ReadAtMost``: a long message keeps its end)."""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - limit))
        return f.read(limit).decode("utf-8", "replace")


def read_last_log_text(
    log_path: str, lines: int = MAX_MESSAGE_LOG_LINES, limit_bytes: int = MAX_MESSAGE_LOG_BYTES
) -> str:
    """The last ``lines`` log records as the container printed them (both streams; a fragment without a
    newline stays without one), then the last ``limit_bytes`` of that, like Go's circular buffer."""
    if not log_path:
        return ""
    try:
        data = read_text(log_path, LogOptions(tail_lines=lines), max_bytes=limit_bytes)
    except OSError as err:
        return f"Error on reading termination message from logs: {err}"
    return data.decode("utf-8", "ignore")  # the cut may have split a character


def termination_message(status: pb.ContainerStatus, path: str, policy: str) -> str:
    """``terminated.message`` of an exited container: the runtime's message, then ``": "`` and the
    termination message file (or the log tail, per policy)."""
    fallback = (
        policy == FALLBACK_TO_LOGS_ON_ERROR
        and status.exit_code != 0
        and status.reason != CONTAINER_CANNOT_RUN
    )
    message, check_logs = _message_from_file(status, path, fallback)
    if check_logs:
        message = read_last_log_text(status.log_path)
    if not message:
        return status.message
    return f"{status.message}: {message}" if status.message else message


def _message_from_file(status: pb.ContainerStatus, path: str, fallback: bool) -> tuple[str, bool]:
    if not path:
        return "", fallback
    for mount in status.mounts:
        if mount.container_path != path:
            continue
        try:
            data = _read_at_most(mount.host_path, MAX_MESSAGE_LENGTH)
        except FileNotFoundError:
            return "", fallback
        except OSError as err:
            return f"Error on reading termination log {mount.host_path}: {err}", False
        return data, fallback and not data
    return "", fallback
