"""A node whose pods come from a source named ``api`` (so they are neither static nor critical and may be
evicted, as pods from an API server are) with eviction signals the test controls."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import attrs
import trio

from kubelet_trio.api import Pod
from kubelet_trio.clock import WallClock
from kubelet_trio.config.podconfig import PodConfig
from kubelet_trio.config.types import SourceSet
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.eviction import SignalSource
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.kubelet import Kubelet, KubeletConfig
from kubelet_trio.kubelet_builder import KubeletDeps, open_kubelet
from kubelet_trio.testing.node import as_pod, temporary_root

SOURCE = "api"


@attrs.define(eq=False)
class EvictionNode:
    kubelet: Kubelet
    root: str
    _source: trio.MemorySendChannel[SourceSet]
    events: list[tuple[str, str, str, str]] = attrs.Factory(list)  # (pod, type, reason, message)
    _pods: dict[str, Pod] = attrs.Factory(dict)

    async def apply(self, *manifests: Mapping[str, Any]) -> list[Pod]:
        pods = [as_pod(m) for m in manifests]
        self._pods.update((pod.uid, pod) for pod in pods)
        await self._source.send(SourceSet(SOURCE, tuple(self._pods.values())))
        return pods

    async def remove(self, *pods: Pod) -> None:
        for pod in pods:
            self._pods.pop(pod.uid, None)
        await self._source.send(SourceSet(SOURCE, tuple(self._pods.values())))

    async def wait_for_phase(self, pod: Pod, *phases: str) -> Any:
        return await self.kubelet.wait_for_status(pod.uid, lambda s: s.phase in phases)


@contextlib.asynccontextmanager
async def open_eviction_node(
    runtime: Runtime,
    signals: SignalSource | None,
    *,
    clock: WallClock,
    run_sync: RunSync = run_in_thread,
    root: str | None = None,
    **config: Any,
) -> AsyncIterator[EvictionNode]:
    with contextlib.ExitStack() as stack:
        tmp = root or stack.enter_context(temporary_root("kubelet-trio-eviction-"))
        kubelet_config = KubeletConfig(
            node_name="eviction-node",
            pod_logs_dir=config.pop("pod_logs_dir", f"{tmp}/pod-logs"),
            root_dir=config.pop("root_dir", f"{tmp}/root"),
            node_ips=("192.0.2.10",),
            **config,
        )
        pod_config = PodConfig(sources=(SOURCE,), now=clock.now)
        source = pod_config.source_channel(SOURCE)
        events: list[tuple[str, str, str, str]] = []
        deps = KubeletDeps(
            runtime=runtime,
            pod_config=pod_config,
            clock=clock,
            run_sync=run_sync,
            event_sink=lambda pod, *event: events.append((pod.name, *event)),
            eviction_signals=signals,
        )
        async with source, open_kubelet(kubelet_config, deps) as built:
            node = EvictionNode(built.kubelet, tmp, source, events)
            await node.apply()  # an empty first SET: the source is ready
            yield node
