"""Container log rotation (Go: ``pkg/kubelet/logs/container_log_manager.go``; :mod:`kubelet_trio.logs` is
the kubelet's own log output).

Every ``containerLogMonitorInterval`` (10 s) the manager looks at each running container's log file; one
that reached ``containerLogMaxSize`` (10 MiB) is rotated:

1. leftovers of an interrupted rotation go (``.tmp`` files, uncompressed files that exist compressed);
2. the oldest rotated files go, so that at most ``containerLogMaxFiles - 2`` remain (the file being
   rotated and the new one make ``containerLogMaxFiles``);
3. the remaining uncompressed rotated file is gzip'd (``0.log.<stamp>.gz``);
4. the log is renamed ``0.log.<YYYYmmdd-HHMMSS>`` (local time, as Go) and stays uncompressed, because
   the runtime may still be writing to it and log shippers may still be reading it;
5. the runtime is asked to ``ReopenContainerLog``: it opens a new ``0.log``. If it refuses, the rename is
   undone and the next round tries again.

A running container whose log file is missing gets ``ReopenContainerLog`` too (a rotation that lost the
file). The running containers come from the PLEG's last listing when the kubelet runs the manager (Go's
TODO: use the pod cache), so a round lists nothing; a container's log path is asked for once
(ContainerStatus) and kept while it runs; the sizes take one thread hop a round. Errors are logged per
container and never stop the loop. :mod:`kubelet_trio.kuberuntime.logs_reader` reads the rotated files
back, so ``/containerLogs`` (``tailLines``, ``previous``) continues into them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import shutil
from collections.abc import Callable, Iterable

import attrs
import trio
import trio_util

from kubelet_trio import defaults
from kubelet_trio.clock import WallClock
from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.kuberuntime.logs_reader import COMPRESS_SUFFIX, TMP_SUFFIX, filter_unused_logs, rotated_logs
from kubelet_trio.logs import kv

__all__ = [
    "DEFAULT_MAX_FILES",
    "DEFAULT_MAX_SIZE",
    "DEFAULT_MONITOR_INTERVAL",
    "ContainerLogManager",
    "LogRotatePolicy",
    "rotated_name",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_SIZE = defaults.CONTAINER_LOG_MAX_SIZE_BYTES  # containerLogMaxSize 10Mi
DEFAULT_MAX_FILES = defaults.CONTAINER_LOG_MAX_FILES  # containerLogMaxFiles
DEFAULT_MONITOR_INTERVAL = defaults.CONTAINER_LOG_MONITOR_INTERVAL  # containerLogMonitorInterval
TIMESTAMP_FORMAT = "%Y%m%d-%H%M%S"  # Go: "20060102-150405"
COMPRESS_LEVEL = 6  # Go's gzip.DefaultCompression
UNDO_TIMEOUT = 10.0  # for renaming a rotated log back when the runtime did not reopen it
_RUNNING = pb.ContainerFilter(state=pb.ContainerStateValue(state=pb.ContainerState.CONTAINER_RUNNING))


@attrs.frozen
class LogRotatePolicy:
    """``max_size`` in bytes (negative: no rotation); ``max_files`` (at least 2) counts the live file."""

    max_size: int = DEFAULT_MAX_SIZE
    max_files: int = DEFAULT_MAX_FILES

    def __attrs_post_init__(self) -> None:
        if self.max_files < 2:
            raise ValueError(f"containerLogMaxFiles must be at least 2, got {self.max_files}")


def rotated_name(log_path: str, wall_ns: int) -> str:
    """``<log_path>.<YYYYmmdd-HHMMSS>`` in local time, as Go names it."""
    stamp = dt.datetime.fromtimestamp(wall_ns // 10**9).strftime(TIMESTAMP_FORMAT)
    return f"{log_path}.{stamp}"


def _size(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return None


def _sizes(paths: list[str]) -> list[int | OSError | None]:
    """The size of each file (None: missing), or why it could not be read."""
    sizes: list[int | OSError | None] = []
    for path in paths:
        try:
            sizes.append(_size(path))
        except OSError as err:
            sizes.append(err)
    return sizes


def _compress(log: str) -> None:
    """``log`` → ``log.gz`` through ``log.gz.tmp`` (a crash leaves a ``.tmp`` that the next round removes)."""
    import gzip  # loaded by the first rotation

    tmp = log + COMPRESS_SUFFIX + TMP_SUFFIX
    try:
        with open(log, "rb") as src:
            mode = os.fstat(src.fileno()).st_mode & 0o777
            with open(tmp, "wb") as raw:
                os.fchmod(raw.fileno(), mode)
                with gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=COMPRESS_LEVEL) as out:
                    shutil.copyfileobj(src, out, 256 * 1024)
        os.rename(tmp, log + COMPRESS_SUFFIX)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
    os.remove(log)


def prepare_rotation(log_path: str, max_files: int) -> None:
    """Steps 1-3: clean up, keep the newest ``max_files - 2`` rotated files, compress them. Blocking."""
    in_use, unused = filter_unused_logs(rotated_logs(log_path))
    for log in unused:
        with contextlib.suppress(FileNotFoundError):
            os.remove(log)
    keep = max(max_files - 2, 0)
    excess = len(in_use) - keep
    for log in in_use[: max(excess, 0)]:  # oldest first, so a reader of newer files is not disturbed
        with contextlib.suppress(FileNotFoundError):
            os.remove(log)
    for log in in_use[max(excess, 0) :]:
        if not log.endswith(COMPRESS_SUFFIX):
            _compress(log)


def _rename_latest(log_path: str, rotated: str) -> bool:
    """Step 4; False when a file of that name exists already (two rotations within one second)."""
    if os.path.lexists(rotated) or os.path.lexists(rotated + COMPRESS_SUFFIX):
        return False
    os.rename(log_path, rotated)
    return True


@attrs.define(eq=False, kw_only=True)
class ContainerLogManager:
    """Rotates the logs of running containers; start with ``await nursery.start(manager.run)``."""

    runtime: Runtime
    policy: LogRotatePolicy = LogRotatePolicy()
    monitor_interval: float = DEFAULT_MONITOR_INTERVAL
    clock: WallClock = attrs.Factory(WallClock)
    run_sync: RunSync = run_in_thread
    # The ids of the running containers; None: ListContainers each round. The kubelet passes the PLEG's
    # last listing (what Go's "use the kubelet pod cache" TODO asks for), so rotation lists nothing more.
    running_containers: Callable[[], Iterable[str]] | None = None
    _log_paths: dict[str, str] = attrs.Factory(dict)  # running container id -> its log path

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Check the logs every ``monitor_interval`` until cancelled (a negative max size: never)."""
        task_status.started()
        if self.policy.max_size < 0:
            return
        async with contextlib.aclosing(trio_util.periodic(self.monitor_interval)) as ticks:
            async for _ in ticks:
                await self.rotate_logs()

    async def rotate_logs(self) -> None:
        """One round: every running container's log, one after the other (Go's one worker)."""
        if self.running_containers is not None:
            running = list(dict.fromkeys(self.running_containers()))
        else:
            try:
                running = [c.id for c in await self.runtime.list_containers(_RUNNING)]
            except cri_errors.CriError as err:
                logger.warning("log rotation: cannot list containers", extra=kv(error=err))
                return
        self._log_paths = {cid: self._log_paths[cid] for cid in running if cid in self._log_paths}
        for container_id in running:
            if container_id not in self._log_paths:
                try:
                    response = await self.runtime.container_status(container_id)
                except cri_errors.CriError as err:
                    logger.warning(
                        "log rotation: no container status", extra=kv(container=container_id, error=err)
                    )
                    continue
                self._log_paths[container_id] = (
                    response.status.log_path if response.status is not None else ""
                )
        logs = [(cid, path) for cid, path in self._log_paths.items() if path]
        sizes = await self.run_sync(_sizes, [path for _, path in logs])  # one thread hop a round
        for (container_id, path), size in zip(logs, sizes, strict=True):
            try:
                await self._check(container_id, path, size)
            except (cri_errors.CriError, OSError) as err:
                logger.warning(
                    "failed to rotate container log", extra=kv(container=container_id, path=path, error=err)
                )

    async def _check(self, container_id: str, path: str, size: int | OSError | None) -> None:
        if isinstance(size, OSError):
            raise size
        if size is None:  # lost by an earlier rotation: have the runtime create it again
            await self.runtime.reopen_container_log(container_id)
            reopened: int | None = await self.run_sync(_size, path)
            if reopened is None:
                raise FileNotFoundError(f"{path} still missing after ReopenContainerLog")
            size = reopened
        if size >= self.policy.max_size:
            await self.rotate(container_id, path)

    async def rotate(self, container_id: str, path: str) -> None:
        """Rotate one container's log now (steps 1-5)."""
        await self.run_sync(prepare_rotation, path, self.policy.max_files)
        rotated = rotated_name(path, self.clock.wall_ns())
        if not await self.run_sync(_rename_latest, path, rotated):
            logger.debug("log rotation postponed: name taken", extra=kv(container=container_id, path=rotated))
            return
        try:
            await self.runtime.reopen_container_log(container_id)
        except cri_errors.CriError:
            with trio.move_on_after(UNDO_TIMEOUT, shield=True):  # undone, or the next round reopens
                await self.run_sync(os.rename, rotated, path)
            raise
        logger.info("rotated container log", extra=kv(container=container_id, path=rotated))
