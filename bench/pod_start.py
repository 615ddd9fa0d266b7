"""Pod start/stop benchmark for the whole node loop. Prints JSON.

- containerd, N = 10 and 30: N static pods (busybox, long-running) written to a manifest directory, from
  kubelet start to all running (as the runtime shows it, and as the kubelet's status shows it), then to
  all gone after the manifests are removed. The floor is measured in the same run: the same pods started
  (RunPodSandbox + CreateContainer + StartContainer, all concurrently) and stopped straight through the
  ``Runtime``, with no kubelet.
- SimRuntime, N = 100 and 1000: the same, in-process (real clock), the runtime listed every 100 ms
  rather than every 20 ms (the listing runs in the kubelet's process).
- Steady state: the kubelet as its own process with 30 containerd pods, CPU (% of one core) and RSS
  over ``--steady-seconds`` (60 by default).

Usage: python bench/pod_start.py [--steady-seconds 60] [--skip-containerd]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any

import trio
import trio_util
from _common import COMMAND, floor_run, proc_cpu_seconds, proc_rss_mb

from kubelet_trio.config.file import FileSource
from kubelet_trio.config.podconfig import PodConfig
from kubelet_trio.config.types import FILE_SOURCE
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.remote import open_cri_runtime
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.kubelet import KubeletConfig
from kubelet_trio.kubelet_builder import KubeletDeps, open_kubelet
from kubelet_trio.kuberuntime.labels import NODE_LABEL
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.testing.env import LocalCriEnvironment, missing_prerequisites, remove_all_pods

RUNNING = pb.ContainerStateValue(state=pb.ContainerState.CONTAINER_RUNNING)


def write_manifests(directory: Path, n: int, image: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"bench-{i}"},
            "spec": {
                "terminationGracePeriodSeconds": 5,
                "containers": [{"name": "app", "image": image, "command": COMMAND}],
            },
        }
        (directory / f"bench-{i}.json").write_text(json.dumps(pod))


async def count_running(runtime: Runtime, node: str) -> int:
    return len(
        await runtime.list_containers(pb.ContainerFilter(state=RUNNING, label_selector={NODE_LABEL: node}))
    )


async def wait_until(check: Callable[[], Awaitable[bool]], period: float = 0.02) -> float:
    """Seconds until ``check`` holds, polling the runtime as an outside observer."""
    started = time.perf_counter()
    async with aclosing(trio_util.periodic(period)) as ticks:
        async for _ in ticks:
            if await check():
                return time.perf_counter() - started
    raise AssertionError("unreachable")


async def kubelet_run(
    runtime: Runtime, image: str, n: int, workdir: Path, poll: float = 0.02
) -> dict[str, float]:
    """Start a kubelet over N manifests; time all running, then remove the manifests; time all gone.

    ``poll``: how often the runtime is listed (the observer shares the kubelet's process and CPU; listing
    1000 simulated containers every 20 ms cost as much CPU as the kubelet itself)."""
    manifests = workdir / "manifests"
    write_manifests(manifests, n, image)
    node = f"bench-{secrets.token_hex(3)}"
    await runtime.pull_image(pb.ImageSpec(image=image))
    pod_config = PodConfig(sources=(FILE_SOURCE,))
    source = FileSource(str(manifests), node, pod_config.source_channel(FILE_SOURCE))
    config = KubeletConfig(node_name=node, pod_logs_dir=str(workdir / "logs"), root_dir=str(workdir / "root"))
    deps = KubeletDeps(runtime=runtime, pod_config=pod_config, sources=(source,))
    result: dict[str, float] = {}
    t0 = time.perf_counter()
    async with open_kubelet(config, deps) as built:
        kubelet = built.kubelet

        async def all_running() -> bool:
            return await count_running(runtime, node) >= n

        async def all_reported() -> bool:
            statuses = [kubelet.status_of(p.uid) for p in kubelet.pods()]
            return len(statuses) == n and all(s is not None and s.phase == "Running" for s in statuses)

        await wait_until(all_running, poll)
        result["all_running_s"] = round(time.perf_counter() - t0, 3)
        await wait_until(all_reported, poll)
        result["all_reported_running_s"] = round(time.perf_counter() - t0, 3)

        t1 = time.perf_counter()
        for f in manifests.iterdir():
            f.unlink()

        async def all_gone() -> bool:
            return await count_running(runtime, node) == 0

        await wait_until(all_gone, poll)
        result["all_gone_s"] = round(time.perf_counter() - t1, 3)
    return result


async def containerd_benchmarks(endpoint: str, image: str, workdir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with open_cri_runtime(endpoint) as runtime:
        for n in (10, 30):
            floor = await floor_run(runtime, image, n, workdir / f"floor-{n}")
            kubelet = await kubelet_run(runtime, image, n, workdir / f"kubelet-{n}")
            await remove_all_pods(endpoint)
            out[f"n_{n}"] = {
                "cri_floor": floor,
                "kubelet": kubelet,
                "running_ratio": round(kubelet["all_running_s"] / floor["all_running_s"], 2),
            }
    return out


async def sim_benchmarks(workdir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in (100, 1000):
        out[f"n_{n}"] = await kubelet_run(
            SimRuntime(), "registry.sim/busybox:1.36", n, workdir / f"sim-{n}", poll=0.1
        )
    return out


def steady_state(env: LocalCriEnvironment, workdir: Path, seconds: float) -> dict[str, Any]:
    """The kubelet as a process with 30 running pods: CPU share and RSS while nothing changes."""
    manifests = workdir / "steady-manifests"
    write_manifests(manifests, 30, env.images.busybox)
    node = "bench-steady"
    cmd = [
        sys.executable, "-m", "kubelet_trio",
        "--pod-manifest-path", str(manifests),
        "--container-runtime-endpoint", env.endpoint,
        "--root-dir", str(workdir / "steady-root"),
        "--pod-logs-dir", str(workdir / "steady-logs"),
        "--hostname-override", node,
        "--healthz-port", "0",
    ]  # fmt: skip
    with (workdir / "steady.log").open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=log)
    try:

        async def wait_all() -> None:
            async with open_cri_runtime(env.endpoint) as runtime:

                async def ready() -> bool:
                    return await count_running(runtime, node) >= 30

                with trio.fail_after(120):
                    await wait_until(ready, 0.2)

        trio.run(wait_all)
        time.sleep(5)  # let the first syncs and relists after start-up settle
        cpu0, t0 = proc_cpu_seconds(proc.pid), time.monotonic()
        time.sleep(seconds)
        cpu1, t1 = proc_cpu_seconds(proc.pid), time.monotonic()
        return {
            "pods": 30,
            "seconds": round(t1 - t0, 1),
            "cpu_percent_of_one_core": round(100 * (cpu1 - cpu0) / (t1 - t0), 2),
            "rss_mb": round(proc_rss_mb(proc.pid), 1),
        }
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        trio.run(remove_all_pods, env.endpoint)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steady-seconds", type=float, default=60.0)
    parser.add_argument("--skip-containerd", action="store_true")
    args = parser.parse_args()
    out: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}}
    with tempfile.TemporaryDirectory(prefix="kubelet-trio-bench-") as tmp:
        workdir = Path(tmp)
        out["sim"] = trio.run(sim_benchmarks, workdir)
        missing = missing_prerequisites()
        if args.skip_containerd or missing:
            out["containerd"] = {"skipped": missing or ["--skip-containerd"]}
        else:
            with LocalCriEnvironment(workdir / "cri") as env:
                out["containerd"] = trio.run(containerd_benchmarks, env.endpoint, env.images.busybox, workdir)
                out["steady_state"] = steady_state(env, workdir, args.steady_seconds)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
