"""tcpSocket probes (Go: ``pkg/probe/tcp``): a connection within the timeout is success.

The caller bounds the probe with its timeout (``trio.move_on_after``) and reports
:func:`tcp_timeout_output` when it runs out.
"""

from __future__ import annotations

import trio

from kubelet_trio.prober.probe.result import Result

__all__ = ["join_host_port", "tcp_probe", "tcp_timeout_output"]


def join_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def tcp_timeout_output(host: str, port: int) -> str:
    return f"dial tcp {join_host_port(host, port)}: i/o timeout"


async def tcp_probe(host: str, port: int) -> tuple[Result, str]:
    try:
        stream = await trio.open_tcp_stream(host, port)
    except OSError as err:
        return Result.FAILURE, f"dial tcp {join_host_port(host, port)}: {err.strerror or err}"
    await stream.aclose()
    return Result.SUCCESS, ""
