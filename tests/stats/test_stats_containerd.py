"""Usage from real containerd: ``/stats/summary`` and ``/metrics/resource`` of a running busybox."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from kubelet_trio.cri.remote import open_cri_runtime
from kubelet_trio.testing.env import LocalCriEnvironment, remove_all_pods
from kubelet_trio.testing.node import open_node
from kubelet_trio.testing.registry import free_port

pytestmark = pytest.mark.containerd

NODE = "stats-node"
SCRIPT = "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 3600"  # some CPU time, then idle


async def test_usage_of_a_running_busybox(cri_env: LocalCriEnvironment, tmp_path: Path) -> None:
    port = free_port()
    manifest = {
        "metadata": {"name": "busy"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "app", "image": cri_env.images.docker_busybox, "command": ["sh", "-c", SCRIPT]}
            ],
        },
    }
    with trio.fail_after(120):
        async with open_cri_runtime(cri_env.endpoint, request_timeout=30) as runtime:
            try:
                async with (
                    open_node(
                        runtime,
                        NODE,
                        read_only_port=port,
                        address="127.0.0.1",
                        pod_logs_dir=str(tmp_path / "logs"),
                        root_dir=str(tmp_path / "root"),
                    ) as node,
                    httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client,
                ):
                    (pod,) = await node.apply(manifest)
                    await node.wait_for_phase(pod, "Running")
                    summary = (await client.get("/stats/summary")).json()
                    while not _has_memory(summary):  # containerd samples its cgroups lazily
                        await trio.sleep(0.5)
                        summary = (await client.get("/stats/summary")).json()
                    (pod_stats,) = summary["pods"]
                    assert pod_stats["podRef"] == {"name": "busy", "namespace": "default", "uid": pod.uid}
                    (app,) = pod_stats["containers"]
                    assert app["name"] == "app"
                    assert app["memory"]["workingSetBytes"] > 0
                    assert app["cpu"]["usageCoreNanoSeconds"] > 0
                    assert app["rootfs"]["usedBytes"] >= 0
                    assert app["logs"]["usedBytes"] >= 0
                    assert app["startTime"]
                    # containerd has no pod cgroup to report for (no cgroup parent is set up): the pod
                    # is the sum of its containers.
                    assert pod_stats["memory"]["workingSetBytes"] == app["memory"]["workingSetBytes"]
                    assert pod_stats["cpu"]["usageCoreNanoSeconds"] == app["cpu"]["usageCoreNanoSeconds"]
                    assert pod_stats["ephemeral-storage"]["usedBytes"] >= app["rootfs"]["usedBytes"]
                    node_stats = summary["node"]
                    assert node_stats["memory"]["workingSetBytes"] > 0
                    image_fs = node_stats["runtime"]["imageFs"]  # containerd sums snapshots every 10 s
                    assert image_fs["capacityBytes"] >= image_fs["availableBytes"] > 0
                    assert image_fs["usedBytes"] >= 0

                    text = (await client.get("/metrics/resource")).text
                    values = {
                        (s.name, tuple(sorted(s.labels.items()))): s.value
                        for family in text_string_to_metric_families(text)
                        for s in family.samples
                    }
                    labels = (("container", "app"), ("namespace", "default"), ("pod", "busy"))
                    assert values[("container_memory_working_set_bytes", labels)] > 0
                    assert values[("container_cpu_usage_seconds_total", labels)] > 0
                    assert values[("container_start_time_seconds", labels)] > 1.6e9
                    pod_labels = (("namespace", "default"), ("pod", "busy"))
                    assert values[("pod_memory_working_set_bytes", pod_labels)] > 0
                    assert values[("node_memory_working_set_bytes", ())] > 0
                    assert values[("scrape_error", ())] == 0
            finally:
                await remove_all_pods(cri_env.endpoint, NODE)


def _has_memory(summary: dict) -> bool:  # type: ignore[type-arg]
    pods = summary.get("pods") or []
    return bool(pods) and all(
        c.get("memory", {}).get("workingSetBytes", 0) > 0 for p in pods for c in p.get("containers", [])
    )
