"""``kubelet-trio sim-nodes --processes N``: the nodes split over N worker processes, one command.

One Python process runs on one core; the simulated nodes are independent of each other, so the command
splits them into N contiguous slices and runs each slice as a worker: the same ``sim-nodes`` command with
``--processes 1`` and the slice's ``--node-offset``/``--nodes``. Every name, address, pod CIDR and port
derives from a node's global index, so a worker's nodes are the same whichever process runs them.

The supervisor owns the workers as children of its nursery. Their stdout says when their nodes run (the
first line); their stderr lines are copied whole onto the supervisor's stderr, so the command has one log
whose lines are never cut into one another (each keeps the worker's pid, as klog's text layout shows it).
A worker that exits is restarted after a doubling delay and registers the same node names again, as a
restarted kubelet does. Stopping is cancellation: each worker gets SIGTERM, then SIGKILL after a grace
period; the command exits once all have. Workers run in a session of their own (a terminal's Ctrl-C
reaches only the supervisor, which forwards it as SIGTERM) and stop by themselves when their stdin - a pipe
from the supervisor - closes, so none outlives a supervisor that was killed.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import trio
import trio_util

from kubelet_trio.logs import kv

__all__ = [
    "MAX_LINE",
    "STOP_GRACE",
    "RestartBackoff",
    "Worker",
    "WorkerSlice",
    "relay_lines",
    "run_workers",
    "split_nodes",
    "write_stderr_line",
]

logger = logging.getLogger(__name__)

#: SIGTERM, then SIGKILL after this long (a worker stops its nodes first, as a stopped kubelet does).
STOP_GRACE = 30.0
#: A worker line longer than this is passed on in pieces (each still a whole line of the combined log).
MAX_LINE = 1 << 20
_READ_SIZE = 65536


@attrs.frozen
class WorkerSlice:
    """Worker ``worker``'s nodes: global indexes ``offset`` .. ``offset + count - 1``."""

    worker: int
    offset: int
    count: int

    def describe(self, name_prefix: str) -> str:
        last = self.offset + self.count - 1
        return f"{name_prefix}{self.offset}" + (f"..{name_prefix}{last}" if self.count > 1 else "")


def split_nodes(offset: int, count: int, processes: int) -> list[WorkerSlice]:
    """``count`` nodes from ``offset`` in at most ``processes`` contiguous slices whose sizes differ by at
    most one (no worker without nodes)."""
    workers = max(1, min(processes, count))
    size, extra = divmod(count, workers)
    slices = []
    start = offset
    for worker in range(workers):
        length = size + (1 if worker < extra else 0)
        slices.append(WorkerSlice(worker, start, length))
        start += length
    return slices


@attrs.frozen
class RestartBackoff:
    """Delay before restart ``n`` (0-based) of a worker: ``initial * 2**n`` capped at ``maximum``; a worker
    that ran for ``reset_after`` seconds starts the count again."""

    initial: float = 1.0
    maximum: float = 60.0
    reset_after: float = 120.0

    def delay(self, restarts: int) -> float:
        return min(self.initial * 2.0**restarts, self.maximum)


def write_stderr_line(line: bytes) -> None:
    """One whole line onto this process's stderr (after whatever its own logging has written)."""
    sys.stderr.flush()
    sys.stderr.buffer.write(line)
    sys.stderr.buffer.flush()


async def relay_lines(stream: trio.abc.ReceiveStream, write: Callable[[bytes], None]) -> None:
    """Pass ``stream``'s lines to ``write`` one whole line at a time until end of file (a last line
    without its newline gets one, as does each ``MAX_LINE`` piece of an overlong line)."""
    pending = bytearray()
    while chunk := await stream.receive_some(_READ_SIZE):
        pending += chunk
        end = pending.rfind(b"\n") + 1
        if end:
            write(bytes(pending[:end]))
            del pending[:end]
        while len(pending) >= MAX_LINE:
            write(bytes(pending[:MAX_LINE]) + b"\n")
            del pending[:MAX_LINE]
    if pending:
        write(bytes(pending) + b"\n")


async def _relay_after_first_line(
    stream: trio.abc.ReceiveStream, first_line: trio.Event, write: Callable[[bytes], None]
) -> None:
    """Set ``first_line`` when the worker's first stdout line (its nodes run) is complete; relay the rest."""
    pending = bytearray()
    while chunk := await stream.receive_some(_READ_SIZE):
        pending += chunk
        end = pending.find(b"\n") + 1
        if end:
            first_line.set()
            rest = bytes(pending[end:])
            if rest:
                write(rest if rest.endswith(b"\n") else rest + b"\n")
            await relay_lines(stream, write)
            return


@attrs.define(eq=False)
class Worker:
    """One worker process and its restarts. Run with ``await nursery.start(worker.run)``: started once the
    worker's nodes first run; cancelling ``run`` stops the worker."""

    slice: WorkerSlice
    argv: Sequence[str]
    description: str = ""
    backoff: RestartBackoff = attrs.Factory(RestartBackoff)
    stop_grace: float = STOP_GRACE
    write: Callable[[bytes], None] = write_stderr_line
    #: The running worker's pid (None between runs) and whether its nodes run: values tests wait on.
    pid: trio_util.AsyncValue[int | None] = attrs.Factory(lambda: trio_util.AsyncValue(None))
    running: trio_util.AsyncBool = attrs.Factory(trio_util.AsyncBool)
    restarts: int = 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        code, became_ready = await self._run_once(task_status)
        if not became_ready:
            raise RuntimeError(
                f"worker {self.slice.worker} ({self.description}) exited with {_exit_text(code)}"
                " before its nodes were running"
            )
        failures = 0
        while True:
            delay = self.backoff.delay(failures)
            logger.warning(
                "worker exited; restarting",
                extra=kv(worker=self.slice.worker, exit=_exit_text(code), delay=delay),
            )
            await trio.sleep(delay)
            self.restarts += 1
            began = trio.current_time()
            code, _ = await self._run_once(None)
            failures = 0 if trio.current_time() - began >= self.backoff.reset_after else failures + 1

    async def _run_once(self, task_status: trio.TaskStatus[None] | None) -> tuple[int, bool]:
        """Start the worker, report when its nodes run, return its exit code (and whether they ran);
        when cancelled, stop it. Its output is relayed to the end, shutdown included."""
        pipe = subprocess.PIPE
        process = await trio.lowlevel.open_process(
            list(self.argv), stdin=pipe, stdout=pipe, stderr=pipe, start_new_session=True
        )
        assert process.stdout is not None and process.stderr is not None
        first_line = trio.Event()
        async with trio.open_nursery() as relays:
            # Shielded: they end at the worker's end of file, which the stop below brings about.
            relays.start_soon(_shielded, relay_lines, process.stderr, self.write)
            relays.start_soon(_shielded, _relay_after_first_line, process.stdout, first_line, self.write)
            self.pid.value = process.pid
            try:
                await trio_util.wait_any(first_line.wait, process.wait)
                ready = first_line.is_set() and process.returncode is None
                if ready:
                    self.running.value = True
                    logger.info(
                        "worker running",
                        extra=kv(worker=self.slice.worker, pid=process.pid, nodes=self.description),
                    )
                    if task_status is not None:
                        task_status.started()
                return await process.wait(), ready
            finally:
                self.running.value = False
                self.pid.value = None
                if process.returncode is None:
                    with trio.move_on_after(self.stop_grace + 10, shield=True):
                        await _stop(process, self.stop_grace)
                if process.stdin is not None:
                    with trio.move_on_after(1, shield=True):
                        await process.stdin.aclose()


async def run_workers(
    workers: Sequence[Worker], *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Start every worker at once; started when all their nodes run; stops them all when cancelled (or
    when one of them cannot start)."""
    async with trio.open_nursery() as nursery:
        async with trio.open_nursery() as starting:
            for worker in workers:
                starting.start_soon(nursery.start, worker.run)
        task_status.started()


async def _shielded(fn: Callable[..., Awaitable[None]], *args: Any) -> None:
    with trio.CancelScope(shield=True):
        await fn(*args)


async def _stop(process: trio.Process, grace: float) -> None:
    process.terminate()
    with trio.move_on_after(grace):
        await process.wait()
        return
    logger.warning("worker did not stop in time; killing it", extra=kv(pid=process.pid))
    process.kill()
    await process.wait()


def _exit_text(code: int) -> str:
    """``exit code 3``, or ``SIGKILL`` for a worker a signal ended (a negative return code)."""
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"
