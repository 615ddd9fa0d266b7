"""Port-forward over SPDY/3.1 with the ``portforward.k8s.io`` protocol (Go:
``pkg/kubelet/cri/streaming/portforward/httpstream.go``).

For every connection the client forwards it opens two streams with the same ``requestid`` and ``port``
headers: ``streamtype: error`` and ``streamtype: data`` (older clients send no request id: the error
stream's id names the pair, the data stream's id is 2 less). When both are there, the runtime's forwarder
gets the data stream; a failure is written as text on the error stream. Pairs are served concurrently
until the client closes the connection.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio

from kubelet_trio.cri.streaming.spdy import SpdyConnection, SpdyStream

__all__ = ["PROTOCOL_V1", "Forwarder", "serve_port_forward"]

logger = logging.getLogger(__name__)

PROTOCOL_V1 = "portforward.k8s.io"

#: ``forward(port, data)`` copies between the pod's port and ``data`` until either side ends; raises
#: OSError (connection refused, ...) when the port cannot be reached.
Forwarder = Callable[[int, SpdyStream], Awaitable[None]]


def _request_id(stream: SpdyStream) -> str:
    given = stream.header("requestid")
    if given:
        return given
    return str(stream.id if stream.header("streamtype") == "error" else stream.id + 2)


async def _forward_pair(error: SpdyStream, data: SpdyStream, forward: Forwarder, describe: str) -> None:
    raw = data.header("port")
    try:
        port = int(raw)
        if not 0 < port < 65536:
            raise ValueError(raw)
        await forward(port, data)
    except ValueError:
        await error.send_all(f'invalid port "{raw}"'.encode())
    except OSError as err:
        reason = err.strerror or str(err)
        message = (
            f"error forwarding port {raw} to pod {describe}: failed to connect to localhost:{raw}: {reason}"
        )
        await error.send_all(message.encode())
    finally:
        with trio.move_on_after(1, shield=True):
            await data.aclose()
            await error.aclose()


async def serve_port_forward(connection: SpdyConnection, forward: Forwarder, describe: str) -> None:
    """Serve stream pairs until the client closes the connection."""
    pending: dict[str, dict[str, SpdyStream]] = {}
    async with trio.open_nursery() as nursery:
        while True:
            try:
                stream = await connection.accept()
            except trio.EndOfChannel:
                break
            await connection.reply(stream)
            kind = stream.header("streamtype")
            if kind not in ("error", "data"):
                await connection.reset(stream)
                continue
            pair = pending.setdefault(_request_id(stream), {})
            pair[kind] = stream
            if len(pair) == 2:
                del pending[_request_id(stream)]
                nursery.start_soon(_forward_pair, pair["error"], pair["data"], forward, describe)
        nursery.cancel_scope.cancel()
