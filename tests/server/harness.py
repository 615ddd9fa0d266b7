"""An in-process node whose runtime calls are instrumented, with its ASGI apps reachable through httpx.

Everything runs on Trio's clock (SimRuntime, Kubelet, file operations inline), so the tests run under
``autojump_clock`` and the HTTP requests go straight into the ASGI app (``httpx.ASGITransport``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import httpx
import trio

from kubelet_trio.api import Pod
from kubelet_trio.clock import WallClock
from kubelet_trio.config.podconfig import PodConfig
from kubelet_trio.config.types import SourceSet
from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.fsio import run_inline
from kubelet_trio.kubelet import Kubelet, KubeletConfig
from kubelet_trio.kubelet_builder import KubeletDeps, open_kubelet
from kubelet_trio.metrics import KubeletMetrics
from kubelet_trio.server import healthz_app, read_only_app
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.stats import HostSampler, read_host_sample
from kubelet_trio.testing.node import as_pod
from kubelet_trio.testing.pods import pod_manifest as sim_pod_manifest

IMAGE = "registry.sim/busybox:1.36"
SOURCE = "test"


def pod_manifest(
    name: str, containers: Mapping[str, str], *, restart_policy: str = "Always", image: str = IMAGE
) -> dict[str, Any]:
    """A pod whose containers behave as the given sim scripts, with a 2 s grace period."""
    return sim_pod_manifest(name, containers, restart_policy=restart_policy, image=image, grace=2)


@attrs.define(eq=False, kw_only=True)
class BreakableSim(SimRuntime):
    """A SimRuntime whose listing (what the PLEG relists with) or Status call can be made to fail."""

    listing_broken: bool = False
    status_broken: bool = False
    sandbox_stats_broken: bool = False  # ListPodSandboxStats fails as on containerd without pod cgroups
    sandbox_stats_calls: int = 0

    async def list_pod_sandbox(self, filter: pb.PodSandboxFilter | None = None) -> list[pb.PodSandbox]:
        if self.listing_broken:
            raise cri_errors.UnavailableError("ListPodSandbox", "connection refused")
        return await super().list_pod_sandbox(filter)

    async def list_pod_sandbox_stats(
        self, filter: pb.PodSandboxStatsFilter | None = None
    ) -> list[pb.PodSandboxStats]:
        self.sandbox_stats_calls += 1
        if self.sandbox_stats_broken:
            raise cri_errors.CriCallError("ListPodSandboxStats", "cgroupPath is empty")
        return await super().list_pod_sandbox_stats(filter)

    async def status(self, verbose: bool = False) -> pb.StatusResponse:
        if self.status_broken:
            raise cri_errors.UnavailableError("Status", "connection refused")
        return await super().status(verbose)


@attrs.define(eq=False)
class HttpNode:
    kubelet: Kubelet
    sim: BreakableSim
    logs_dir: Path
    _source: trio.MemorySendChannel[SourceSet]
    _pods: dict[str, Pod] = attrs.Factory(dict)

    async def apply(self, *manifests: Mapping[str, Any]) -> list[Pod]:
        pods = [as_pod(m) for m in manifests]
        self._pods.update({p.uid: p for p in pods})
        await self._source.send(SourceSet(SOURCE, tuple(self._pods.values())))
        return pods

    async def remove(self, *pods: Pod) -> None:
        for pod in pods:
            self._pods.pop(pod.uid, None)
        await self._source.send(SourceSet(SOURCE, tuple(self._pods.values())))

    def client(self, *, read_only: bool = True) -> httpx.AsyncClient:
        app = read_only_app(self.kubelet) if read_only else healthz_app(self.kubelet)
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://kubelet")

    async def wait_running(self, pod: Pod) -> None:
        def running(status: Any) -> bool:
            return status.phase == "Running" and all(
                c.state is not None and c.state.running is not None for c in status.container_statuses or ()
            )

        await self.kubelet.wait_for_status(pod.uid, running)


@contextlib.asynccontextmanager
async def open_test_node(
    tmp_path: Path,
    *,
    host_stats: HostSampler = read_host_sample,
    configz: Mapping[str, Any] | None = None,
    **config: Any,
) -> AsyncIterator[HttpNode]:
    clock = WallClock()
    sim = BreakableSim(clock=clock, run_sync=run_inline, preloaded_images=[IMAGE])
    metrics = KubeletMetrics()
    logs_dir = tmp_path / "pod-logs"
    kubelet_config = KubeletConfig(
        node_name="test-node",
        pod_logs_dir=str(logs_dir),
        root_dir=str(tmp_path / "root"),
        node_ips=("192.0.2.10",),
        **config,
    )
    pod_config = PodConfig(sources=(SOURCE,), now=clock.now)
    source = pod_config.source_channel(SOURCE)
    deps = KubeletDeps(
        runtime=sim,
        pod_config=pod_config,
        clock=clock,
        run_sync=run_inline,
        metrics=metrics,
        instrument_runtime=True,
        host_stats=host_stats,
        configz=configz,
    )
    async with source, open_kubelet(kubelet_config, deps) as built:
        node = HttpNode(built.kubelet, sim, logs_dir, source)
        await source.send(SourceSet(SOURCE, ()))
        yield node
