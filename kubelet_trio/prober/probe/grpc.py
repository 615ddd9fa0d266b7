"""gRPC probes: ``grpc.health.v1.Health/Check`` (Go: ``pkg/probe/grpc``).

grpclib is asyncio-only, so each check runs on an asyncio loop on a thread of its own
(:mod:`kubelet_trio.aiobridge`): the probe manager's, shared by all its probes and started at the first
gRPC probe, or else one for the single check. The two health messages are encoded by hand
(:mod:`kubelet_trio.prober.probe.health`) through a tiny grpclib codec, so no protobuf runtime is needed.
The Trio deadline is the authoritative timeout (grpclib measures its own on the wall clock).
"""

from __future__ import annotations

import logging
import math
from typing import Any

import trio
from grpclib import GRPCError, Status
from grpclib.client import Channel, UnaryUnaryMethod
from grpclib.encoding.base import CodecBase

from kubelet_trio.aiobridge import AsyncioThread, open_asyncio_thread
from kubelet_trio.prober.probe.health import (
    SERVING,
    HealthCheckRequest,
    HealthCheckResponse,
    serving_status_name,
)
from kubelet_trio.prober.probe.result import Result
from kubelet_trio.prober.probe.tcp import join_host_port

__all__ = ["HEALTH_CHECK_METHOD", "HealthCodec", "grpc_probe", "grpc_timeout_output"]

logger = logging.getLogger(__name__)

HEALTH_CHECK_METHOD = "/grpc.health.v1.Health/Check"


class HealthCodec(CodecBase):
    """grpclib codec for the two hand-written health messages (``application/grpc+proto``)."""

    __content_subtype__ = "proto"

    def encode(self, message: Any, message_type: Any) -> bytes:
        return bytes(message.encode())

    def decode(self, data: bytes, message_type: Any) -> Any:
        return message_type.decode(data)


def grpc_timeout_output(timeout: float) -> str:
    """What the prober reports when its timeout runs out."""
    return f"timeout: health rpc did not complete within {timeout:g}s"


async def _check(host: str, port: int, service: str, grpc_timeout: float | None) -> HealthCheckResponse:
    channel = Channel(host, port, codec=HealthCodec())
    try:
        method: UnaryUnaryMethod[HealthCheckRequest, HealthCheckResponse] = UnaryUnaryMethod(
            channel, HEALTH_CHECK_METHOD, HealthCheckRequest, HealthCheckResponse
        )
        return await method(HealthCheckRequest(service), timeout=grpc_timeout)
    finally:
        channel.close()


def _classify(err: BaseException, address: str) -> tuple[Result, str]:
    if isinstance(err, GRPCError):
        if err.status is Status.UNIMPLEMENTED:
            return Result.FAILURE, (
                "error: this server does not implement the grpc health protocol "
                f"(grpc.health.v1.Health): {err.message or ''}"
            )
        if err.status is Status.DEADLINE_EXCEEDED:
            return Result.FAILURE, "timeout: health rpc did not complete within the probe timeout"
        return Result.FAILURE, f"error: health rpc probe failed: {err.status.name}: {err.message or ''}"
    if isinstance(err, TimeoutError):
        return Result.FAILURE, "timeout: health rpc did not complete within the probe timeout"
    if isinstance(err, OSError):
        return Result.FAILURE, f'error: failed to connect service at "{address}": {err}'
    return Result.FAILURE, f"error: health rpc probe failed: {err!r}"  # grpclib/h2 transport errors


async def _probe_in_loop(bridge: AsyncioThread, host: str, port: int, service: str) -> tuple[Result, str]:
    """Runs the check on the bridge's loop and never raises."""
    remaining = trio.current_effective_deadline() - trio.current_time()
    grpc_timeout = None if math.isinf(remaining) else max(remaining, 0.001)  # tells the server too
    try:
        response = await bridge.call(_check, host, port, service, grpc_timeout)
    except Exception as err:
        return _classify(err, join_host_port(host, port))
    if response.status != SERVING:
        return Result.FAILURE, f'service unhealthy (responded with "{serving_status_name(response.status)}")'
    return Result.SUCCESS, "service healthy"


async def grpc_probe(
    host: str, port: int, service: str, bridge: AsyncioThread | None = None
) -> tuple[Result, str]:
    """One ``Check`` on ``bridge``, or on a thread started for it (a thread per probe is what the manager's
    shared one avoids); the caller's deadline (the probe timeout) bounds it."""
    if bridge is not None:
        return await _probe_in_loop(bridge, host, port, service)
    async with open_asyncio_thread() as own:
        return await _probe_in_loop(own, host, port, service)
