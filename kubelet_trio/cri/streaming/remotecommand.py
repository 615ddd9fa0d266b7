"""Exec and attach over SPDY/3.1 with the ``v4.channel.k8s.io`` protocol (Go:
``pkg/kubelet/cri/streaming/remotecommand``).

The client opens one SPDY stream per role, named by its ``streamtype`` header: ``error`` always,
``stdin``/``stdout``/``stderr`` as the exec or attach request asked, ``resize`` with a TTY. Once all
expected streams exist (within ``STREAM_CREATION_TIMEOUT``) the command runs; stdin EOF is the client's
FIN; resize messages are a sequence of JSON objects ``{"Width": w, "Height": h}``. At the end stdout and
stderr are closed and the ``error`` stream carries a ``metav1.Status``: ``Success``, or ``Failure`` with
reason ``NonZeroExitCode`` and the exit code as an ``ExitCode`` cause (what makes ``kubectl exec`` exit
with the command's code), or an internal error's message.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio
import trio_util

from kubelet_trio.cri.streaming.spdy import SpdyConnection, SpdyStream
from kubelet_trio.logs import kv

__all__ = [
    "PROTOCOL_V4",
    "STREAM_CREATION_TIMEOUT",
    "ExecError",
    "ExecIO",
    "TerminalSize",
    "serve_remote_command",
    "status_for",
]

logger = logging.getLogger(__name__)

PROTOCOL_V4 = "v4.channel.k8s.io"
STREAM_CREATION_TIMEOUT = 30.0  # Go: DefaultStreamCreationTimeout
#: Undecoded resize text kept while waiting for the rest of a message; beyond it the stream is garbage.
MAX_RESIZE_MESSAGE = 4096


class ExecError(Exception):
    """The command could not be run (reported as an internal error on the error stream)."""


@attrs.frozen
class TerminalSize:
    width: int
    height: int


@attrs.define(eq=False)
class ExecIO:
    """What a runtime's exec or attach gets: the client's streams (None when not asked for) and, with a
    TTY, the terminal size as the client last reported it."""

    stdin: trio.abc.ReceiveStream | None
    stdout: trio.abc.SendStream | None
    stderr: trio.abc.SendStream | None
    tty: bool
    size: trio_util.AsyncValue[TerminalSize | None] = attrs.Factory(lambda: trio_util.AsyncValue(None))


Runner = Callable[[ExecIO], Awaitable[int]]


def status_for(exit_code: int | None, error: str | None = None) -> dict[str, Any]:
    """The ``metav1.Status`` written on the error stream."""
    if error is not None:
        return {
            "metadata": {},
            "status": "Failure",
            "message": f"Internal error occurred: error executing command in container: {error}",
            "reason": "InternalError",
            "details": {"causes": [{"message": f"error executing command in container: {error}"}]},
            "code": 500,
        }
    if exit_code == 0:
        return {"metadata": {}, "status": "Success"}
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: exit status {exit_code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(exit_code)}]},
    }


def _expected(stdin: bool, stdout: bool, stderr: bool, tty: bool) -> set[str]:
    wanted = {"error"}
    wanted |= {"stdin"} if stdin else set()
    wanted |= {"stdout"} if stdout else set()
    wanted |= {"stderr"} if stderr and not tty else set()
    wanted |= {"resize"} if tty else set()
    return wanted


def _terminal_size(message: Any) -> TerminalSize | None:
    """A resize message's size (Go decodes it into two ``uint16``), or None if it is not one."""
    if not isinstance(message, dict):
        return None
    width, height = message.get("Width", 0), message.get("Height", 0)
    for value in (width, height):
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 0xFFFF:
            return None
    return TerminalSize(width, height)


async def _read_resizes(stream: SpdyStream, size: trio_util.AsyncValue[TerminalSize | None]) -> None:
    """Follow the client's terminal size. A message that is not a size ends that (as in Go), but the
    stream is still read to its end, so the session's other streams keep flowing."""
    decoder = json.JSONDecoder()
    buffer = ""
    broken = False
    while data := await stream.receive_some():
        if broken:
            continue
        buffer += data.decode("utf-8", errors="replace")
        while buffer.strip():
            try:
                message, end = decoder.raw_decode(buffer.lstrip())
            except (ValueError, RecursionError):
                broken = len(buffer) > MAX_RESIZE_MESSAGE  # else an incomplete object: wait for more
                break
            buffer = buffer.lstrip()[end:]
            new = _terminal_size(message)
            if new is None:
                broken = True
                break
            size.value = new
        if broken:
            buffer = ""
            logger.info("undecodable resize message, ignoring further resizes")


async def serve_remote_command(
    connection: SpdyConnection, *, stdin: bool, stdout: bool, stderr: bool, tty: bool, run: Runner
) -> None:
    """Collect the client's streams, run the command, report its status. Returns when it is reported
    or the client went away (the caller then closes the connection, which cancels nothing it owns)."""
    wanted = _expected(stdin, stdout, stderr, tty)
    streams: dict[str, SpdyStream] = {}
    with trio.move_on_after(STREAM_CREATION_TIMEOUT):
        while not wanted <= streams.keys():
            try:
                stream = await connection.accept()
            except trio.EndOfChannel:
                return
            await connection.reply(stream)
            streams[stream.header("streamtype")] = stream
    error = streams.get("error")
    if not wanted <= streams.keys():
        logger.info(
            "client did not create its streams in time", extra=kv(missing=sorted(wanted - streams.keys()))
        )
        if error is not None:
            await error.send_all(b"timed out waiting for client to create streams")
        return
    io = ExecIO(streams.get("stdin"), streams.get("stdout"), streams.get("stderr") if not tty else None, tty)
    async with trio.open_nursery() as nursery:
        if "resize" in streams:
            nursery.start_soon(_read_resizes, streams["resize"], io.size)
        try:
            status = status_for(await run(io))
        except ExecError as err:
            status = status_for(None, str(err))
        nursery.cancel_scope.cancel()
    for name in ("stdout", "stderr"):
        if name in streams:
            await streams[name].send_eof()
    assert error is not None
    await error.send_all(json.dumps(status).encode())
    await error.send_eof()
