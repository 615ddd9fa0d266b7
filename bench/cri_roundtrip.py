"""CRI round-trip benchmark. Prints JSON.

1. ListContainers round trip (p50/p99, ms) and this process's CPU time per call (µs, every thread) with
   0 and 100 containers on three targets: SimRuntime in-process, SimRuntime served by ``kubelet-trio
   sim-cri`` over a unix socket, and a private containerd; on containerd also through the raw grpclib
   stubs on an asyncio thread (``containerd_raw_grpclib``), the way ``CriRuntime`` called it before its
   Trio-native HTTP/2 channel (:mod:`kubelet_trio.cri.h2channel`).
2. Starting N pods (RunPodSandbox + CreateContainer + StartContainer, all pods concurrently) on containerd
   through ``CriRuntime`` versus the same requests through the raw grpclib stubs, in the same run,
   interleaved, N = 10 and 30. The raw stubs are the baseline: ``ratio`` = CriRuntime / raw, for wall
   time, and ``cpu_ratio`` for this process's CPU time.

Usage: python bench/cri_roundtrip.py [--rounds 3] [--samples 300]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from kubelet_trio.aiobridge import AsyncioThread, open_asyncio_thread
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.gen.runtime.v1 import services
from kubelet_trio.cri.remote import CriRuntime, open_cri_runtime
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.cri.wire import CriCodec
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.testing.env import LocalCriEnvironment, missing_prerequisites, remove_all_pods

COMMAND = ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def pod_configs(image: str, log_dir: str) -> tuple[pb.PodSandboxConfig, pb.ContainerConfig]:
    uid = secrets.token_hex(8)
    sandbox = pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name=f"bench-{uid[:8]}", namespace="bench", uid=uid),
        log_directory=f"{log_dir}/{uid}",
        labels={"bench.kubelet-trio.io": "1"},
    )
    container = pb.ContainerConfig(
        metadata=pb.ContainerMetadata(name="app"),
        image=pb.ImageSpec(image=image),
        command=COMMAND,
        log_path="app/0.log",
    )
    return sandbox, container


async def fill(runtime: Runtime, image: str, count: int, log_dir: str) -> None:
    """Create ``count`` containers (10 per sandbox, created state) so listing has work to do."""
    await runtime.pull_image(pb.ImageSpec(image=image))
    for _ in range(count // 10):
        sandbox, container = pod_configs(image, log_dir)
        sandbox_id = await runtime.run_pod_sandbox(sandbox)
        for i in range(10):
            meta = pb.ContainerMetadata(name=f"c{i}")
            config = pb.ContainerConfig(
                metadata=meta, image=container.image, command=container.command, log_path=f"c{i}/0.log"
            )
            await runtime.create_container(sandbox_id, config, sandbox)


async def clear(runtime: Runtime) -> None:
    for sandbox in await runtime.list_pod_sandbox():
        await runtime.stop_pod_sandbox(sandbox.id)
        await runtime.remove_pod_sandbox(sandbox.id)


async def list_latency(runtime: Runtime, samples: int) -> dict[str, float]:
    """Round-trip percentiles, and this process's CPU time per call (every thread: a bridge's too)."""
    timings = []
    cpu0 = time.process_time()
    for _ in range(samples):
        t0 = time.perf_counter()
        await runtime.list_containers()
        timings.append((time.perf_counter() - t0) * 1000)
    cpu_us = (time.process_time() - cpu0) / samples * 1e6
    return {
        "p50_ms": round(percentile(timings, 0.5), 4),
        "p99_ms": round(percentile(timings, 0.99), 4),
        "cpu_us_per_call": round(cpu_us, 1),
    }


async def list_benchmark(runtime: Runtime, image: str, samples: int, log_dir: str) -> dict[str, Any]:
    await clear(runtime)
    result = {"containers_0": await list_latency(runtime, samples)}
    await fill(runtime, image, 100, log_dir)
    assert len(await runtime.list_containers()) == 100
    result["containers_100"] = await list_latency(runtime, samples)
    await clear(runtime)
    return result


StartOne = Callable[[pb.PodSandboxConfig, pb.ContainerConfig], Awaitable[None]]


def via_runtime(rt: CriRuntime) -> StartOne:
    async def start(sandbox: pb.PodSandboxConfig, container: pb.ContainerConfig) -> None:
        sandbox_id = await rt.run_pod_sandbox(sandbox)
        cid = await rt.create_container(sandbox_id, container, sandbox)
        await rt.start_container(cid)

    return start


def via_raw_stubs(stub: services.RuntimeServiceStub, bridge: AsyncioThread) -> StartOne:
    def call(fn: Any) -> Any:
        return functools.partial(bridge.call, fn)

    async def start(sandbox: pb.PodSandboxConfig, container: pb.ContainerConfig) -> None:
        resp = await call(stub.run_pod_sandbox)(pb.RunPodSandboxRequest(config=sandbox))
        created = await call(stub.create_container)(
            pb.CreateContainerRequest(
                pod_sandbox_id=resp.pod_sandbox_id, config=container, sandbox_config=sandbox
            )
        )
        await call(stub.start_container)(pb.StartContainerRequest(container_id=created.container_id))

    return start


async def start_pods(start: StartOne, n: int, image: str, log_dir: str) -> tuple[float, float]:
    """Wall-clock seconds and this process's CPU seconds to start ``n`` pods concurrently."""
    configs = [pod_configs(image, log_dir) for _ in range(n)]
    t0, cpu0 = time.perf_counter(), time.process_time()
    async with trio.open_nursery() as nursery:
        for sandbox, container in configs:
            nursery.start_soon(start, sandbox, container)
    return time.perf_counter() - t0, time.process_time() - cpu0


async def start_benchmark(endpoint: str, image: str, rounds: int, log_dir: str) -> dict[str, Any]:
    from grpclib.client import Channel

    results: dict[str, Any] = {}
    async with open_cri_runtime(endpoint) as rt, open_asyncio_thread() as bridge:
        raw_channel = await bridge.run_sync(Channel, path=endpoint.removeprefix("unix://"))
        try:
            raw = via_raw_stubs(services.RuntimeServiceStub(raw_channel), bridge)
            ours = via_runtime(rt)
            await rt.pull_image(pb.ImageSpec(image=image))
            await start_pods(raw, 2, image, log_dir)  # warm both paths up
            await clear(rt)
            for n in (10, 30):
                times: dict[str, list[float]] = {"raw_grpclib_s": [], "cri_runtime_s": []}
                cpu: dict[str, list[float]] = {"raw_grpclib_cpu_s": [], "cri_runtime_cpu_s": []}
                for _ in range(rounds):
                    for key, start in (("raw_grpclib", raw), ("cri_runtime", ours)):
                        wall, used = await start_pods(start, n, image, log_dir)
                        times[f"{key}_s"].append(wall)
                        cpu[f"{key}_cpu_s"].append(used)
                        await clear(rt)
                medians = {k: round(statistics.median(v), 4) for k, v in {**times, **cpu}.items()}
                results[f"n_{n}"] = {
                    **medians,
                    "ratio": round(medians["cri_runtime_s"] / medians["raw_grpclib_s"], 3),
                    "cpu_ratio": round(medians["cri_runtime_cpu_s"] / medians["raw_grpclib_cpu_s"], 3),
                    "rounds": {k: [round(x, 4) for x in v] for k, v in times.items()},
                }
        finally:
            await bridge.run_sync(raw_channel.close)
    return results


class RawLister:
    """``list_containers`` through grpclib's stub on an asyncio thread: the pre-h2channel call path."""

    def __init__(self, stub: services.RuntimeServiceStub, bridge: AsyncioThread) -> None:
        self.stub = stub
        self.bridge = bridge

    async def list_containers(self) -> list[pb.Container]:
        resp = await self.bridge.call(self.stub.list_containers, pb.ListContainersRequest())
        return list(resp.containers)


async def raw_list_benchmark(endpoint: str, image: str, samples: int, log_dir: str) -> dict[str, Any]:
    """:func:`list_benchmark`'s figures through :class:`RawLister`, decoding as CriRuntime did then."""
    from grpclib.client import Channel

    async with open_cri_runtime(endpoint) as rt, open_asyncio_thread() as bridge:
        path = endpoint.removeprefix("unix://")
        channel = await bridge.run_sync(functools.partial(Channel, path=path, codec=CriCodec()))
        try:
            raw: Any = RawLister(services.RuntimeServiceStub(channel), bridge)
            await clear(rt)
            result = {"containers_0": await list_latency(raw, samples)}
            await fill(rt, image, 100, log_dir)
            result["containers_100"] = await list_latency(raw, samples)
            await clear(rt)
            return result
        finally:
            await bridge.run_sync(channel.close)


async def bench_endpoint(endpoint: str, image: str, samples: int, log_dir: str) -> dict[str, Any]:
    async with open_cri_runtime(endpoint) as rt:
        return await list_benchmark(rt, image, samples, log_dir)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=300)
    args = parser.parse_args()
    out: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}}
    with tempfile.TemporaryDirectory(prefix="kubelet-trio-bench-") as tmp:
        logs = f"{tmp}/logs"
        sim_image = "registry.sim/bench/busybox:1"
        out["list_containers"] = {
            "sim": trio.run(list_benchmark, SimRuntime(), sim_image, args.samples, logs)
        }
        sock = Path(tmp) / "sim.sock"
        server = subprocess.Popen(
            [sys.executable, "-m", "kubelet_trio", "sim-cri", "--listen", f"unix://{sock}"],
            stderr=subprocess.DEVNULL,
        )
        try:
            while not sock.exists():
                time.sleep(0.05)
            out["list_containers"]["sim_cri"] = trio.run(
                bench_endpoint, f"unix://{sock}", sim_image, args.samples, logs
            )
        finally:
            server.terminate()
            server.wait()
        missing = missing_prerequisites()
        if missing:
            out["containerd"] = {"skipped": missing}
        else:
            with LocalCriEnvironment(Path(tmp) / "cri") as env:
                out["containerd_version"] = subprocess.run(
                    ["containerd", "--version"], capture_output=True, text=True, check=False
                ).stdout.strip()
                out["list_containers"]["containerd"] = trio.run(
                    bench_endpoint, env.endpoint, env.images.busybox, args.samples, logs
                )
                out["list_containers"]["containerd_raw_grpclib"] = trio.run(
                    raw_list_benchmark, env.endpoint, env.images.busybox, args.samples, logs
                )
                out["start_pods"] = trio.run(
                    start_benchmark, env.endpoint, env.images.busybox, args.rounds, logs
                )
                trio.run(remove_all_pods, env.endpoint)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
