"""Pods, a recording pod killer and a manager factory for the eviction tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import trio

from kubelet_trio.api import Pod
from kubelet_trio.eviction import (
    EvictionConfig,
    EvictionManager,
    SimulatedPodUsage,
    SimulatedSignals,
    parse_thresholds,
)
from kubelet_trio.testing.node import as_pod

MI = 1 << 20


def make_pod(
    name: str,
    *,
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    priority: int | None = None,
    grace: int | None = None,
    annotations: Mapping[str, str] | None = None,
    **spec: Any,
) -> Pod:
    container: dict[str, Any] = {"name": "main", "image": "busybox"}
    if requests or limits:
        container["resources"] = {"requests": dict(requests or {}), "limits": dict(limits or {})}
    body: dict[str, Any] = {"containers": [container], **spec}
    if priority is not None:
        body["priority"] = priority
    if grace is not None:
        body["terminationGracePeriodSeconds"] = grace
    return as_pod({"metadata": {"name": name, "annotations": dict(annotations or {})}, "spec": body})


@attrs.frozen
class Kill:
    pod: str
    grace_period: int
    reason: str
    message: str
    at: float


@attrs.define(eq=False)
class RecordingKiller:
    """Kills by removing the pod from the active list; remembers what it was asked and when."""

    active: list[Pod]
    kills: list[Kill] = attrs.Factory(list)

    async def terminate_pod_abnormally(
        self, pod: Pod, *, grace_period: int, reason: str, message: str, evict: bool = False
    ) -> None:
        await trio.lowlevel.checkpoint()
        assert evict  # the eviction manager's kills are evictions (the pod's content goes)
        self.kills.append(Kill(pod.name, grace_period, reason, message, trio.current_time()))
        self.active.remove(pod)


@attrs.define(eq=False)
class Harness:
    manager: EvictionManager
    signals: SimulatedSignals
    usage: SimulatedPodUsage
    killer: RecordingKiller
    pod_events: list[tuple[str, str, str, str]]
    node_events: list[tuple[str, str, str]]

    @property
    def evicted(self) -> list[str]:
        return [k.pod for k in self.killer.kills]


def harness(
    pods: list[Pod],
    hard: Mapping[str, str] = {},
    *,
    soft: Mapping[str, str] = {},
    soft_grace: Mapping[str, float] = {},
    minimum_reclaim: Mapping[str, str] = {},
    transition: float = 300.0,
    max_pod_grace_period: int = 0,
    **manager: Any,
) -> Harness:
    signals = SimulatedSignals()
    usage = SimulatedPodUsage()
    killer = RecordingKiller(pods)
    pod_events: list[tuple[str, str, str, str]] = []
    node_events: list[tuple[str, str, str]] = []
    config = EvictionConfig(
        thresholds=parse_thresholds(hard, soft, soft_grace, minimum_reclaim),
        pressure_transition_period=transition,
        max_pod_grace_period=max_pod_grace_period,
    )
    built = EvictionManager(
        config=config,
        signals=signals,
        usage=usage,
        killer=killer,
        active_pods=lambda: list(killer.active),
        pod_events=lambda pod, *rest: pod_events.append((pod.name, *rest)),
        node_events=lambda *event: node_events.append(event),
        **manager,
    )
    return Harness(built, signals, usage, killer, pod_events, node_events)
