"""Helpers for node-level probe and hook tests on SimRuntime: a runtime that records ExecSync and
StopContainer calls, an event log, and manifest builders."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import attrs
import trio

from kubelet_trio.api import Pod, PodStatus
from kubelet_trio.clock import WallClock
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.fsio import run_inline
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.testing.node import SimNode, open_sim_node
from kubelet_trio.testing.pods import container_status

SIM = "sim.kubelet-trio.io/"
IMAGE = "registry.sim/busybox:1.36"


@attrs.define(eq=False, kw_only=True)
class RecordingSim(SimRuntime):
    """Records ``(trio time, container id, argv)`` of every ExecSync and ``(time, id, timeout)`` of every
    StopContainer; ``inspect_delay`` slows ContainerStatus down."""

    execs: list[tuple[float, str, tuple[str, ...]]] = attrs.field(factory=list, init=False)
    stops: list[tuple[float, str, int]] = attrs.field(factory=list, init=False)
    inspect_delay: float = 0.0  # ContainerStatus answers this late (a loaded runtime)

    async def container_status(self, container_id: str, verbose: bool = False) -> pb.ContainerStatusResponse:
        await trio.sleep(self.inspect_delay)
        return await super().container_status(container_id, verbose)

    async def exec_sync(
        self, container_id: str, cmd: list[str], timeout_seconds: int = 0
    ) -> pb.ExecSyncResponse:
        self.execs.append((trio.current_time(), container_id, tuple(cmd)))
        return await super().exec_sync(container_id, cmd, timeout_seconds)

    async def stop_container(self, container_id: str, timeout_seconds: int) -> None:
        self.stops.append((trio.current_time(), container_id, timeout_seconds))
        await super().stop_container(container_id, timeout_seconds)

    def exec_times(self, *argv: str) -> list[float]:
        return [t for t, _, cmd in self.execs if cmd == argv]


@attrs.define
class EventLog:
    events: list[tuple[float, str, str, str]] = attrs.Factory(list)  # (time, pod name, reason, message)

    def __call__(self, pod: Pod, type_: str, reason: str, message: str) -> None:
        self.events.append((trio.current_time(), pod.name, reason, message))

    def reasons(self, reason: str, pod: str | None = None) -> list[tuple[float, str]]:
        return [(t, m) for t, p, r, m in self.events if r == reason and (pod is None or p == pod)]


@attrs.define
class ProbeNode:
    node: SimNode
    sim: RecordingSim
    events: EventLog


@contextlib.asynccontextmanager
async def open_probe_node(
    *, inspect_delay: float = 0.0, pull_delay: float = 0.0, **config: Any
) -> AsyncIterator[ProbeNode]:
    """A sim node with exec/stop recording, an event log and no probe start jitter."""
    clock = WallClock()
    sim = RecordingSim(clock=clock, run_sync=run_inline, inspect_delay=inspect_delay, pull_delay=pull_delay)
    events = EventLog()
    config.setdefault("probe_start_jitter", False)
    async with open_sim_node(sim=sim, clock=clock, event_sink=events, **config) as node:
        yield ProbeNode(node, sim, events)


def pod_manifest(
    name: str,
    containers: list[dict[str, Any]],
    *,
    scripts: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if scripts:
        metadata["annotations"] = {SIM + c: s for c, s in scripts.items()}
    if labels:
        metadata["labels"] = labels
    return {"metadata": metadata, "spec": {"containers": containers, **spec}}


def container(name: str = "app", **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": IMAGE, **extra}


def exec_probe(*argv: str, **extra: Any) -> dict[str, Any]:
    return {"exec": {"command": list(argv)}, **extra}


def bare_id(status: PodStatus, name: str = "app") -> str:
    container_id = container_status(status, name).container_id
    assert container_id
    return container_id.partition("://")[2]


def condition(status: PodStatus, kind: str) -> Any:
    for c in status.conditions or ():
        if c.type == kind:
            return c
    raise AssertionError(f"no condition {kind}")
