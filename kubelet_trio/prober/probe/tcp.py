"""tcpSocket probes (Go: ``pkg/probe/tcp``): a connection within the timeout is success.

The caller bounds the probe with its timeout (``trio.move_on_after``) and reports
:func:`tcp_timeout_output` when it runs out.
"""

from __future__ import annotations

import os

import trio

from kubelet_trio.netaddr import join_host_port
from kubelet_trio.prober.probe.result import Result

__all__ = ["dial_error_output", "join_host_port", "tcp_probe", "tcp_timeout_output"]


def tcp_timeout_output(host: str, port: int) -> str:
    return f"dial tcp {join_host_port(host, port)}: i/o timeout"


def _socket_error(err: BaseException) -> OSError | None:
    """The first OSError with an errno under ``err``: Trio reports a failed connect as "all attempts
    failed", with each attempt's error as the cause (an exception group when there were several)."""
    seen: set[int] = set()
    stack: list[BaseException] = [err]
    while stack:
        current = stack.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno:
            return current
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        stack.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return None


def dial_error_output(host: str, port: int, err: BaseException) -> str:
    """A failed connection as Go's net package words it: ``dial tcp 10.0.0.1:80: connect: connection
    refused`` (the errno's text, lower-case as in Go's table)."""
    cause = _socket_error(err)
    if cause is None:
        return f"dial tcp {join_host_port(host, port)}: {err}"
    text = os.strerror(cause.errno or 0)  # Trio's own strerror names the address too
    return f"dial tcp {join_host_port(host, port)}: connect: {text[:1].lower()}{text[1:]}"


async def tcp_probe(host: str, port: int) -> tuple[Result, str]:
    try:
        stream = await trio.open_tcp_stream(host, port)
    except OSError as err:
        return Result.FAILURE, dial_error_output(host, port, err)
    await stream.aclose()
    return Result.SUCCESS, ""
