"""What simulated containers do under ``kubectl exec``, ``attach`` and ``port-forward``: the backend of
the simulated runtime's streaming server (:class:`kubelet_trio.cri.streaming.server.StreamingServer`).

- **exec** answers as ExecSync does (the script's ``exec`` clauses, then the built-ins ``true``,
  ``false``, ``echo``; anything else exits 126 with a message on stderr), with two interactive
  built-ins: ``cat`` with stdin copies stdin to stdout until EOF, and ``stty size`` on a TTY prints the
  terminal size the client sent (waiting up to ``RESIZE_WAIT`` for it).
- **attach** writes the container's scripted output lines, echoes stdin to stdout when attached with
  stdin, and lasts until the container stops or the client leaves. A container running an interactive
  shell (``sh`` with ``stdin``) runs each line it is sent instead (:mod:`kubelet_trio.sim.shell`) and
  exits when its input ends if it is ``stdin_once``.
- **port-forward** to a port some container of the sandbox ``listen``\\ s on is a loopback echo; to
  any other port the connection is refused. With ``pod_network`` (sim-cri's ``--pod-cidr``, where
  :mod:`kubelet_trio.sim.podnet` serves those ports for real) it connects to the pod's address and
  port instead and copies bytes both ways, as a runtime does inside the pod's network namespace.

``open_sim_streaming(sim)`` runs the server for a SimRuntime (``sim.streaming``) for as long as the
context lasts; without it the streaming CRI calls fail with "streaming server is not running".
"""

from __future__ import annotations

import contextlib
import errno
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import attrs
import trio

from kubelet_trio.boundary import BoundaryErrors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.streaming.portforward import Forwarder
from kubelet_trio.cri.streaming.remotecommand import ExecError, ExecIO, Runner
from kubelet_trio.cri.streaming.server import StreamingServer
from kubelet_trio.cri.streaming.spdy import SpdyStream
from kubelet_trio.sim import shell
from kubelet_trio.sim.podnet import dial_pod

if TYPE_CHECKING:
    from kubelet_trio.sim.records import ContainerRecord
    from kubelet_trio.sim.runtime import SimRuntime

__all__ = ["RESIZE_WAIT", "SimStreamingBackend", "open_sim_streaming"]

logger = logging.getLogger(__name__)

RESIZE_WAIT = 10.0


async def _copy(source: trio.abc.ReceiveStream, sink: trio.abc.SendStream | None) -> None:
    while data := await source.receive_some(65536):
        if sink is not None:
            await sink.send_all(data)


async def _pipe(data: SpdyStream, conn: trio.abc.HalfCloseableStream) -> None:
    """Copy both ways until the pod's side ends; the client's EOF half-closes the connection to the pod.
    Either side breaking ends the session quietly, as a dropped TCP connection does."""
    try:
        async with conn, trio.open_nursery() as nursery:

            async def upstream() -> None:
                await _copy(data, conn)
                await conn.send_eof()

            nursery.start_soon(upstream)
            await _copy(conn, data)
            await data.send_eof()
            nursery.cancel_scope.cancel()
    except* (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


@attrs.define(eq=False)
class SimStreamingBackend:
    sim: SimRuntime
    pod_network: bool = False

    def _running(self, container_id: str) -> object:
        container = self.sim.container_record(container_id)
        if container is None:
            raise ExecError(f'container "{container_id}" not found')
        if container.state(self.sim.now_ns()) is not pb.ContainerState.CONTAINER_RUNNING:
            raise ExecError(f'container "{container_id}" is not running')
        return container

    def exec_runner(self, request: pb.ExecRequest) -> Runner:
        argv = tuple(request.cmd)

        async def run(io: ExecIO) -> int:
            self._running(request.container_id)
            if argv == ("cat",) and io.stdin is not None:
                await _copy(io.stdin, io.stdout)
                return 0
            if argv == ("stty", "size") and io.tty:
                with trio.move_on_after(RESIZE_WAIT):
                    await io.size.wait_value(lambda size: size is not None)
                size = io.size.value
                if size is None:
                    if io.stdout is not None:
                        await io.stdout.send_all(b"stty: standard input: no terminal size\n")
                    return 1
                if io.stdout is not None:
                    await io.stdout.send_all(f"{size.height} {size.width}\n".encode())
                return 0
            answer = await self.sim.exec_sync(request.container_id, list(argv), 0)
            if io.stdout is not None:
                await io.stdout.send_all(bytes(answer.stdout))
            target = io.stderr if io.stderr is not None else (io.stdout if io.tty else None)
            if target is not None and answer.stderr:
                await target.send_all(bytes(answer.stderr))
            return answer.exit_code

        return run

    def attach_runner(self, request: pb.AttachRequest) -> Runner:
        async def run(io: ExecIO) -> int:
            container = self.sim.container_record(request.container_id)
            self._running(request.container_id)
            assert container is not None
            if container.behaviour.reads_stdin:
                return await self._shell_session(container, io)
            for line in container.behaviour.output:
                sink = io.stderr if line.stream == "stderr" and not io.tty else io.stdout
                if sink is not None:
                    await sink.send_all(line.text.encode() + b"\n")
            async with trio.open_nursery() as nursery:
                if io.stdin is not None:
                    nursery.start_soon(_copy, io.stdin, io.stdout)
                await container.terminated.wait()
                nursery.cancel_scope.cancel()
            return 0

        return run

    async def _shell_session(self, container: ContainerRecord, io: ExecIO) -> int:
        """An interactive shell's stdin: each line is run, its output streamed back. When the input ends
        the shell exits (0) if the container was created ``stdin_once``, as ``sh`` reading EOF does."""
        if io.stdin is None:
            await container.terminated.wait()
            return 0
        pending = b""
        async with trio.open_nursery() as nursery:

            async def leave_when_terminated() -> None:
                await container.terminated.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(leave_when_terminated)
            while data := await io.stdin.receive_some(65536):
                pending += data
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    await self._run_line(container, line.decode(errors="replace"), io)
            if pending:
                await self._run_line(container, pending.decode(errors="replace"), io)
            if container.config.stdin_once:
                self.sim.end_container(container.id, 0)
            else:
                await container.terminated.wait()
            nursery.cancel_scope.cancel()
        return 0

    async def _run_line(self, container: ContainerRecord, line: str, io: ExecIO) -> None:
        if container.view is None or not line.strip():
            return
        outcome = shell.run(["sh", "-c", line], container.view)
        if outcome is None:
            return
        if io.stdout is not None and outcome.stdout:
            await io.stdout.send_all(outcome.stdout.encode())
        target = io.stderr if io.stderr is not None else (io.stdout if io.tty else None)
        if target is not None and outcome.stderr:
            await target.send_all(outcome.stderr.encode())

    def forwarder(self, request: pb.PortForwardRequest) -> Forwarder:
        async def forward(port: int, data: SpdyStream) -> None:
            if self.pod_network:
                await _pipe(data, await dial_pod(self.sim, request.pod_sandbox_id, port))
                return
            if port not in self.sim.listening_ports(request.pod_sandbox_id):
                raise ConnectionRefusedError(errno.ECONNREFUSED, "connection refused")
            await _copy(data, data)
            await data.send_eof()

        return forward


@contextlib.asynccontextmanager
async def open_sim_streaming(
    sim: SimRuntime,
    *,
    idle_timeout: float = 4 * 3600.0,
    boundary_errors: BoundaryErrors | None = None,
    pod_network: bool = False,
) -> AsyncIterator[str]:
    """Serve ``sim``'s streaming on 127.0.0.1 while the context lasts; yields the base URL. Sessions that
    failed are counted in ``boundary_errors``; ``pod_network``: port-forward dials the pod's address."""
    server = StreamingServer(
        SimStreamingBackend(sim, pod_network), idle_timeout=idle_timeout, boundary_errors=boundary_errors
    )
    async with trio.open_nursery() as nursery:
        url = await nursery.start(server.run)
        sim.streaming = server
        try:
            yield url
        finally:
            sim.streaming = None
            nursery.cancel_scope.cancel()
