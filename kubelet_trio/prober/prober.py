"""Running one probe of one container (Go: ``pkg/kubelet/prober/prober.go``).

Picks the handler from the probe spec, retries up to 3 times while the handler *errors* (not when it
fails), and turns the outcome into a :class:`ProbeResult` plus an event: ``Unhealthy`` for a failure
("Liveness probe failed: ..."), ``ProbeWarning`` for a success with a warning, ``Unhealthy`` "...
errored..." for an error, which is raised as :class:`ProbeError` so that the worker drops it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import attrs
import trio

from kubelet_trio.aiobridge import LazyAsyncioThread
from kubelet_trio.api import Container, Pod, Probe
from kubelet_trio.container.expansion import expand_command_only_static
from kubelet_trio.cri.runtime import RuntimeService
from kubelet_trio.logs import kobj, kv
from kubelet_trio.prober.probe import ProbeError, Result
from kubelet_trio.prober.probe.exec import exec_probe
from kubelet_trio.prober.probe.http import HttpProbe, request_for_action, resolve_container_port
from kubelet_trio.prober.probe.tcp import tcp_probe, tcp_timeout_output
from kubelet_trio.prober.results import ProbeKind, ProbeResult
from kubelet_trio.prober.slots import ExecSlots

__all__ = ["MAX_PROBE_RETRIES", "Prober", "probe_kind_name"]

logger = logging.getLogger(__name__)

MAX_PROBE_RETRIES = 3
PodEvent = Callable[[Pod, str, str, str], None]
_KIND_NAMES = {ProbeKind.LIVENESS: "Liveness", ProbeKind.READINESS: "Readiness", ProbeKind.STARTUP: "Startup"}


def probe_kind_name(kind: ProbeKind) -> str:
    return _KIND_NAMES[kind]


def probe_spec(container: Container, kind: ProbeKind) -> Probe | None:
    if kind is ProbeKind.LIVENESS:
        return container.liveness_probe
    if kind is ProbeKind.READINESS:
        return container.readiness_probe
    return container.startup_probe


@attrs.define(eq=False, kw_only=True)
class Prober:
    """Runs probes against containers of ``runtime``.

    ``host_override``: connect httpGet/tcpSocket/grpc probes that name no host here instead of the pod
    IP (tests whose simulated pods have IPs that do not exist). ``exec_slots``: how many exec probes may
    be in the runtime at once (None: no bound); ``urgent`` probes (a container waits on their result to
    be ready or started) take a free slot first.
    """

    runtime: RuntimeService
    events: PodEvent | None = None
    asyncio_thread: LazyAsyncioThread | None = None  # the manager's while it runs; else one per gRPC probe
    host_override: str | None = None
    exec_slots: ExecSlots | None = None

    def _event(self, pod: Pod, type_: str, reason: str, message: str) -> None:
        if self.events is not None:
            self.events(pod, type_, reason, message)

    async def probe(
        self,
        kind: ProbeKind,
        pod: Pod,
        container: Container,
        container_id: str,
        pod_ip: str,
        urgent: bool = False,
    ) -> ProbeResult:
        """Run the container's ``kind`` probe; raise :class:`ProbeError` when it could not be run."""
        spec = probe_spec(container, kind)
        if spec is None:
            return ProbeResult.SUCCESS
        name = probe_kind_name(kind)
        ctx = {"pod": kobj(pod), "uid": pod.uid, "container": container.name, "probe": kind.value}
        error: ProbeError | None = None
        result, output = Result.UNKNOWN, ""
        for _ in range(MAX_PROBE_RETRIES):
            try:
                result, output = await self._run(spec, container, container_id, pod_ip, urgent)
            except ProbeError as err:
                error = err
                continue
            error = None
            break
        if error is not None:
            logger.info("probe errored", extra=kv(**ctx, err=error))
            self._event(
                pod, "Warning", "Unhealthy", f"{name} probe errored and resulted in unknown state: {error}"
            )
            raise error
        if result is Result.SUCCESS:
            logger.debug("probe succeeded", extra=kv(**ctx))
            return ProbeResult.SUCCESS
        if result is Result.WARNING:
            self._event(pod, "Warning", "ProbeWarning", f"{name} probe warning: {output}")
            logger.debug("probe succeeded with a warning", extra=kv(**ctx, output=output))
            return ProbeResult.SUCCESS
        if result is Result.FAILURE:
            logger.info("probe failed", extra=kv(**ctx, output=output))
            self._event(pod, "Warning", "Unhealthy", f"{name} probe failed: {output}")
            return ProbeResult.FAILURE
        logger.info("probe unknown without error", extra=kv(**ctx))
        return ProbeResult.FAILURE

    def _host(self, host: str | None, pod_ip: str) -> str:
        if host:
            return host
        return self.host_override or pod_ip

    async def _run(
        self, spec: Probe, container: Container, container_id: str, pod_ip: str, urgent: bool
    ) -> tuple[Result, str]:
        """Run the handler under the probe's timeout (exec: the CRI enforces it)."""
        timeout = spec.timeout_seconds or 1
        if spec.exec is not None:
            command = expand_command_only_static(spec.exec.command or (), container.env)
            if self.exec_slots is None:
                return await exec_probe(self.runtime, container_id, command, timeout)
            async with self.exec_slots.slot(urgent):
                return await exec_probe(self.runtime, container_id, command, timeout)
        if spec.http_get is not None:
            request = request_for_action(spec.http_get, container, self._host(spec.http_get.host, pod_ip))
            http = HttpProbe(request)
            with trio.move_on_after(timeout):
                return await http.run()
            return http.timed_out()
        if spec.tcp_socket is not None:
            port = resolve_container_port(spec.tcp_socket.port, container)
            host = self._host(spec.tcp_socket.host, pod_ip)
            with trio.move_on_after(timeout):
                return await tcp_probe(host, port)
            return Result.FAILURE, tcp_timeout_output(host, port)
        if spec.grpc is not None:
            from kubelet_trio.prober.probe.grpc import grpc_probe, grpc_timeout_output  # grpclib, asyncio

            port = resolve_container_port(spec.grpc.port, container)
            bridge = self.asyncio_thread.get() if self.asyncio_thread is not None else None
            with trio.move_on_after(timeout):
                return await grpc_probe(self._host(None, pod_ip), port, spec.grpc.service or "", bridge)
            return Result.FAILURE, grpc_timeout_output(timeout)
        raise ProbeError("missing probe handler")
