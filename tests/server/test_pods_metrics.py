"""``/pods``, ``/runningpods``, ``/metrics`` and ``/stats/summary`` against the in-process truth."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing
from prometheus_client.parser import text_string_to_metric_families

from tests.server.harness import open_test_node, pod_manifest


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a text exposition, keyed by (name, sorted labels)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(all_samples: dict, name: str, **labels: str) -> float:
    return all_samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_pods_lists_desired_pods_with_current_status(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_test_node(tmp_path) as node, node.client() as client:
        web, job = await node.apply(
            pod_manifest("web", {"app": "run"}),
            pod_manifest("job", {"task": "exit 0 after 2s"}, restart_policy="Never"),
        )
        await node.wait_running(web)
        await node.kubelet.wait_for_status(job.uid, lambda s: s.phase == "Succeeded")
        body = (await client.get("/pods")).json()
        assert body["kind"] == "PodList" and body["apiVersion"] == "v1"
        by_uid = {item["metadata"]["uid"]: item for item in body["items"]}
        assert set(by_uid) == {web.uid, job.uid}
        for pod in (web, job):
            expected = node.kubelet.status_of(pod.uid)
            assert expected is not None
            assert by_uid[pod.uid]["status"] == expected.to_dict()
            assert by_uid[pod.uid]["spec"]["containers"][0]["image"] == "registry.sim/busybox:1.36"
        assert by_uid[job.uid]["status"]["phase"] == "Succeeded"
        assert by_uid[web.uid]["status"]["containerStatuses"][0]["state"]["running"]

        await node.kubelet.wait_pod_finished(job.uid)  # its sandbox is stopped
        running = (await client.get("/runningpods/")).json()
        assert [(i["metadata"], i["spec"]) for i in running["items"]] == [
            (
                {"name": "web", "namespace": "default", "uid": web.uid, "creationTimestamp": None},
                {"containers": [{"name": "app", "image": "registry.sim/busybox:1.36"}]},
            )
        ]
        assert (await client.get("/nothing")).status_code == 404


async def test_metrics_parse_and_move_as_pods_start(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_test_node(tmp_path) as node, node.client() as client:
        await trio.sleep(3)
        response = await client.get("/metrics")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
        before = samples(response.text)
        assert value(before, "kubelet_running_pods") == 0
        assert value(before, "kubelet_pleg_relist_duration_seconds_count") >= 3
        assert value(before, "kubelet_pleg_relist_interval_seconds_count") >= 2
        assert value(before, "kubelet_runtime_operations_total", operation_type="list_podsandbox") >= 3
        assert value(before, "kubelet_runtime_operations_total", operation_type="run_podsandbox") == 0

        pods = await node.apply(*(pod_manifest(f"web-{i}", {"app": "run", "side": "run"}) for i in range(3)))
        for pod in pods:
            await node.wait_running(pod)
        after = samples((await client.get("/metrics")).text)
        assert value(after, "kubelet_running_pods") == 3
        assert value(after, "kubelet_running_containers", container_state="running") == 6
        assert value(after, "kubelet_running_containers", container_state="exited") == 0
        assert value(after, "kubelet_runtime_operations_total", operation_type="run_podsandbox") == 3
        assert value(after, "kubelet_runtime_operations_total", operation_type="start_container") == 6
        assert (
            value(
                after, "kubelet_runtime_operations_duration_seconds_count", operation_type="start_container"
            )
            == 6
        )
        assert value(after, "kubelet_pod_start_duration_seconds_count") == 3
        # seen and reported running by the same sync: no relist to wait for (MockClock)
        assert value(after, "kubelet_pod_start_duration_seconds_sum") == 0
        assert value(after, "kubelet_pod_worker_duration_seconds_count", operation_type="sync") >= 3
        assert value(after, "kubelet_runtime_operations_errors_total", operation_type="list_podsandbox") == 0

        node.sim.listing_broken = True
        await trio.sleep(3)
        broken = samples((await client.get("/metrics")).text)
        assert value(broken, "kubelet_runtime_operations_errors_total", operation_type="list_podsandbox") >= 2


async def test_stats_summary_has_node_and_pod_stats(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_test_node(tmp_path) as node, node.client() as client:
        (pod,) = await node.apply(pod_manifest("web", {"app": "run"}))
        await node.wait_running(pod)
        first = (await client.get("/stats/summary")).json()
        await trio.sleep(1)
        summary = (await client.get("/stats/summary")).json()
        assert first["node"]["nodeName"] == "test-node"
        node_stats = summary["node"]
        assert node_stats["cpu"]["usageCoreNanoSeconds"] > 0
        assert "usageNanoCores" in node_stats["cpu"]  # second sample
        assert node_stats["memory"]["availableBytes"] > 0
        assert node_stats["fs"]["capacityBytes"] >= node_stats["fs"]["availableBytes"] > 0
        assert "imageFs" in node_stats["runtime"]
        (pod_stats,) = summary["pods"]
        assert pod_stats["podRef"] == {"name": "web", "namespace": "default", "uid": pod.uid}
        assert [c["name"] for c in pod_stats["containers"]] == ["app"]
        assert pod_stats["containers"][0]["cpu"]["usageCoreNanoSeconds"] == 0
        assert pod_stats["startTime"]
