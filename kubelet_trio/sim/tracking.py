"""A simulated runtime that can say cheaply whether anything the relister sees may have changed.

A node's PLEG lists every pod and container each second. On a simulated runtime nothing changes unless
the kubelet calls it (create, start, stop, remove ...), a test crashes a container, or a scripted
``exit K after D`` comes due; :class:`ChangeTrackingSimRuntime` counts the first two and keeps the due
times of the third, and its :meth:`~ChangeTrackingSimRuntime.change_token` changes whenever any of them
happened. It declares the token among its capabilities, and the PLEG (``GenericPLEG.change_token``) skips
the listing while the token is the one of its last listing, which makes an idle simulated node's relists
free: ``kubelet-trio sim-nodes`` runs hundreds.
"""

from __future__ import annotations

import heapq

import attrs

from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.runtime import RuntimeCapabilities
from kubelet_trio.sim.runtime import SimRuntime

__all__ = ["ChangeTrackingSimRuntime"]


@attrs.define(eq=False, kw_only=True)
class ChangeTrackingSimRuntime(SimRuntime):
    """A :class:`SimRuntime` with a change token; behaves the same otherwise."""

    _generation: int = attrs.field(init=False, default=0)
    _exits_due: list[int] = attrs.field(init=False, factory=list)  # heap of scripted exit times (ns)
    _exits_passed: int = attrs.field(init=False, default=0)

    def capabilities(self) -> RuntimeCapabilities:
        return RuntimeCapabilities(simulated=True, change_token=self.change_token)

    def change_token(self) -> tuple[int, int]:
        """Equal tokens: no sandbox or container changed state in between."""
        now = self.now_ns()
        while self._exits_due and self._exits_due[0] <= now:
            heapq.heappop(self._exits_due)
            self._exits_passed += 1
        return self._generation, self._exits_passed

    def _changed(self) -> None:
        self._generation += 1

    # Every call that changes state counts before and after (a call may wait, e.g. a stop's grace period,
    # and change state at its end).

    def kill_sandbox_process(self, sandbox_id: str) -> None:
        self._changed()
        super().kill_sandbox_process(sandbox_id)

    def crash_container(self, container_id: str, exit_code: int) -> None:
        self._changed()
        super().crash_container(container_id, exit_code)

    async def run_pod_sandbox(self, config: pb.PodSandboxConfig, runtime_handler: str = "") -> str:
        self._changed()
        try:
            return await super().run_pod_sandbox(config, runtime_handler)
        finally:
            self._changed()

    async def stop_pod_sandbox(self, pod_sandbox_id: str) -> None:
        self._changed()
        try:
            await super().stop_pod_sandbox(pod_sandbox_id)
        finally:
            self._changed()

    async def remove_pod_sandbox(self, pod_sandbox_id: str) -> None:
        self._changed()
        try:
            await super().remove_pod_sandbox(pod_sandbox_id)
        finally:
            self._changed()

    async def create_container(
        self, pod_sandbox_id: str, config: pb.ContainerConfig, sandbox_config: pb.PodSandboxConfig
    ) -> str:
        self._changed()
        try:
            return await super().create_container(pod_sandbox_id, config, sandbox_config)
        finally:
            self._changed()

    async def start_container(self, container_id: str) -> None:
        self._changed()
        try:
            await super().start_container(container_id)
        finally:
            self._changed()
            record = self.container_record(container_id)
            natural = record.natural_exit() if record is not None else None
            if natural is not None:
                heapq.heappush(self._exits_due, natural.at_ns)

    async def stop_container(self, container_id: str, timeout_seconds: int) -> None:
        self._changed()
        try:
            await super().stop_container(container_id, timeout_seconds)
        finally:
            self._changed()

    async def remove_container(self, container_id: str) -> None:
        self._changed()
        try:
            await super().remove_container(container_id)
        finally:
            self._changed()
