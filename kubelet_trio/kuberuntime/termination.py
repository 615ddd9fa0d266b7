"""Termination messages (Go: ``kuberuntime_container.go`` ``makeMounts`` / ``getTerminationMessage`` /
``readLastStringFromContainerLogs``).

Each container instance gets an empty, world-writable file under ``<root>/pods/<uid>/containers/<name>/``
bind-mounted at its ``terminationMessagePath``. When the instance has exited, the kubelet reads at most
4 KiB of that file into ``terminated.message``; with ``terminationMessagePolicy: FallbackToLogsOnError``
a failed container that left the file empty gets the last 80 lines (at most 2 KiB) of its log instead.

Blocking functions: callers run them through their ``run_sync``.
"""

from __future__ import annotations

import os
import secrets

from kubelet_trio.cri.gen.runtime import v1 as pb

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
    with open(path, "rb") as f:
        return f.read(limit).decode("utf-8", "replace")


def read_last_log_text(
    log_path: str, lines: int = MAX_MESSAGE_LOG_LINES, limit_bytes: int = MAX_MESSAGE_LOG_BYTES
) -> str:
    """The last ``lines`` log lines (CRI log format, partial records joined), cut to ``limit_bytes``."""
    if not log_path:
        return ""
    try:
        with open(log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 1024 * 1024))  # the tail is enough for 80 lines in practice
            raw = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    records = raw.splitlines()
    if size > 1024 * 1024 and records:
        records = records[1:]  # the first one is probably cut
    out: list[str] = []
    pending: dict[str, str] = {}
    for record in records:
        parts = record.split(" ", 3)
        if len(parts) < 3:
            continue
        stream, tag = parts[1], parts[2]
        text = parts[3] if len(parts) == 4 else ""
        if tag == "P":
            pending[stream] = pending.get(stream, "") + text
            continue
        out.append(pending.pop(stream, "") + text + "\n")
    text = "".join(out[-lines:]) if lines > 0 else ""
    data = text.encode()
    if len(data) > limit_bytes:
        data = data[:limit_bytes]
    return data.decode("utf-8", "ignore")


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
