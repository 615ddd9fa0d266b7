"""Running lifecycle hook handlers: exec, httpGet and sleep (Go: ``pkg/kubelet/lifecycle/handlers.go``).

:class:`HandlerRunner` is the runtime manager's ``hooks`` seam. The runtime manager bounds a preStop hook
by the grace period (and subtracts what it took); a postStart hook runs while the container is already
running and its failure kills the container. Like Go:

- exec runs through CRI ExecSync with no timeout of its own; a non-zero exit is a failure;
- httpGet goes to the pod IP by default, follows same-host redirects only, skips certificate checks, and
  fails only when no response arrives — the status code is not checked, the body not read (the client
  is the probes', :func:`kubelet_trio.prober.probe.http.http_get`);
- sleep waits ``seconds``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

import attrs
import trio

from kubelet_trio.api import Container, LifecycleHandler, Pod
from kubelet_trio.cri.runtime import RuntimeService
from kubelet_trio.logs import kobj, kv
from kubelet_trio.prober.probe import ProbeError
from kubelet_trio.prober.probe.exec import run_in_container
from kubelet_trio.prober.probe.http import http_get, request_for_action

__all__ = ["HandlerRunner", "HookError"]

logger = logging.getLogger(__name__)


class HookError(Exception):
    """A hook handler failed; the message is Go's (it is logged, not put in events)."""


def _format_pod(pod: Pod) -> str:
    return f"{pod.name}_{pod.namespace}({pod.uid})"


def _go_list(items: Sequence[str]) -> str:
    return "[" + " ".join(items) + "]"


@attrs.define(eq=False, kw_only=True)
class HandlerRunner:
    """``pod_ips(pod)`` returns the pod's IPs from the runtime (httpGet hooks without a host).

    ``host_override`` sends hooks without a host there instead (tests with simulated pod IPs).
    """

    runtime: RuntimeService
    pod_ips: Callable[[Pod], Awaitable[Sequence[str]]]
    host_override: str | None = None

    async def run(self, pod: Pod, container: Container, container_id: str, handler: LifecycleHandler) -> None:
        name = container.name
        if handler.exec is not None:
            command = list(handler.exec.command or ())
            try:
                code, output = await run_in_container(self.runtime, container_id, command, 0)
            except (TimeoutError, ProbeError) as err:
                raise HookError(
                    f'Exec lifecycle hook ({_go_list(command)}) for Container "{name}" in Pod '
                    f'"{_format_pod(pod)}" failed - error: {err}, message: ""'
                ) from err
            if code != 0:
                raise HookError(
                    f'Exec lifecycle hook ({_go_list(command)}) for Container "{name}" in Pod '
                    f"\"{_format_pod(pod)}\" failed - error: command '{' '.join(command)}' exited with "
                    f"{code}: , message: {output!r}"
                )
            return
        if handler.http_get is not None:
            from kubelet_trio.client.errors import TransportError  # only for httpGet hooks

            try:
                await self._http(pod, container, handler)
            except (TransportError, ValueError, ProbeError) as err:
                raise HookError(
                    f'HTTP lifecycle hook ({handler.http_get.path}) for Container "{name}" in Pod '
                    f'"{_format_pod(pod)}" failed - error: {err}'
                ) from err
            return
        if handler.sleep is not None:
            await trio.sleep(handler.sleep.seconds or 0)
            return
        raise HookError(f"Cannot run handler: invalid handler: {handler.to_dict()}")

    async def _http(self, pod: Pod, container: Container, handler: LifecycleHandler) -> None:
        action = handler.http_get
        assert action is not None
        host = action.host or self.host_override
        if not host:
            ips = await self.pod_ips(pod)
            if not ips:
                raise ValueError("failed to find networking container: the pod has no IP")
            host = ips[0]
        url, headers = request_for_action(action, container, host, purpose="lifecycle")
        status = await http_get(url, headers)
        logger.debug(
            "HTTP lifecycle hook answered",
            extra=kv(pod=kobj(pod), uid=pod.uid, container=container.name, status=status),
        )
