"""``/metrics`` (node name, process, REST client, no ``*_created``), ``/metrics/probes``,
``/metrics/resource`` and ``/configz``, against the in-process truth."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing
import yaml
from prometheus_client.parser import text_string_to_metric_families

from kubelet_trio.client import RetryPolicy, open_api_client
from kubelet_trio.client.errors import ApiUnavailable, NotFound
from kubelet_trio.configz import configz_body, kubelet_configuration
from kubelet_trio.metrics import KubeletMetrics
from kubelet_trio.options import SETTINGS, load_options
from kubelet_trio.server.app import kubelet_api_app
from kubelet_trio.sim.usage import USAGE_ANNOTATION_PREFIX
from kubelet_trio.stats import HostSample, fixed_host_sample
from kubelet_trio.testing.apinode import open_api_node
from kubelet_trio.testing.fakeapi import open_fake_api
from tests.apiserver.scripted import Reply, scripted_api
from tests.server.harness import open_test_node, pod_manifest

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
HOST = HostSample(
    cpu_core_nano_seconds=42_500_000_000,
    memory_total_bytes=4 * 1024**3,
    memory_available_bytes=3 * 1024**3,
    memory_free_bytes=2 * 1024**3,
    fs_capacity_bytes=10 * 1024**3,
    fs_available_bytes=5 * 1024**3,
    fs_free_bytes=6 * 1024**3,
    fs_inodes=100,
    fs_inodes_free=50,
)


def samples(text: str) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def timestamps(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], Any]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.timestamp
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def key(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return (name, tuple(sorted(labels.items())))


async def test_metrics_name_the_node_and_the_process_without_created_series(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_test_node(tmp_path) as node, node.client() as client:
        (web,) = await node.apply(pod_manifest("web", {"app": "run"}))
        await node.wait_running(web)
        text = (await client.get("/metrics")).text
        values = samples(text)
        assert values[key("kubelet_node_name", node="test-node")] == 1
        assert [k for k in values if k[0] == "kubelet_node_name"] == [
            key("kubelet_node_name", node="test-node")
        ]
        assert values[key("process_start_time_seconds")] > 1.6e9
        assert values[key("process_resident_memory_bytes")] > 0
        assert values[key("kubelet_runtime_operations_total", operation_type="start_container")] == 1
        assert "# TYPE kubelet_runtime_operations_total counter" in text
        assert "_created" not in text


async def test_rest_client_metrics_count_attempts_and_time_requests(
    autojump_clock: trio.testing.MockClock,
) -> None:
    answers = iter([503, 200, 404])

    metrics = KubeletMetrics()
    retry = RetryPolicy(initial=1.0, jitter=0.0)
    reply = lambda _: Reply.json({"kind": "Status"}, next(answers))  # noqa: E731
    async with scripted_api(reply, server="http://10.1.2.3:6443", retry=retry) as api:
        api.metrics = metrics
        await api.get("/api/v1/nodes/n")  # 503, retried after 1 s, then 200
        with pytest.raises(NotFound):
            await api.get("/api/v1/nodes/gone")
    values = samples(metrics.render().decode())
    host = "10.1.2.3:6443"
    assert values[key("rest_client_requests_total", code="503", method="GET", host=host)] == 1
    assert values[key("rest_client_requests_total", code="200", method="GET", host=host)] == 1
    assert values[key("rest_client_requests_total", code="404", method="GET", host=host)] == 1
    assert values[key("rest_client_request_duration_seconds_count", verb="GET", host=host)] == 2
    assert values[key("rest_client_request_duration_seconds_sum", verb="GET", host=host)] == 1.0
    assert values[key("rest_client_request_duration_seconds_bucket", verb="GET", host=host, le="0.005")] == 1


async def test_rest_client_errors_without_an_answer_are_counted_as_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def refuse(host: str, port: int) -> trio.abc.Stream:
        raise ConnectionRefusedError(errno.ECONNREFUSED, "connection refused")

    metrics = KubeletMetrics()
    retry = RetryPolicy(max_attempts=2, initial=0.5, jitter=0.0)
    async with open_api_client(server="https://api:6443", connect=refuse, retry=retry) as api:
        api.metrics = metrics
        with pytest.raises(ApiUnavailable):
            await api.get("/api/v1/pods")
    values = samples(metrics.render().decode())
    assert values[key("rest_client_requests_total", code="<error>", method="GET", host="api:6443")] == 2


async def test_an_api_mode_node_reports_its_api_requests(autojump_clock: trio.testing.MockClock) -> None:
    async with open_fake_api() as api, open_api_node(api) as node:
        await trio.sleep(30)
        assert node.client.metrics is node.kubelet.metrics
        values = samples(node.kubelet.metrics.render().decode())
        host = node.client.host
        by_code = {
            (dict(labels)["method"], dict(labels)["code"]): value
            for (name, labels), value in values.items()
            if name == "rest_client_requests_total" and dict(labels)["host"] == host
        }
        assert by_code[("POST", "201")] >= 1  # the Node registration
        assert by_code[("GET", "200")] >= 1
        assert values[key("rest_client_request_duration_seconds_count", verb="GET", host=host)] >= 1


async def test_probe_metrics_count_each_probe_by_result(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_test_node(tmp_path) as node, node.client() as client:
        await trio.sleep(20)  # workers started long after the prober: no start jitter
        manifest = pod_manifest("web", {"app": 'run; exec ready? -> 0 "yes"'})
        manifest["spec"]["containers"][0]["readinessProbe"] = {
            "exec": {"command": ["ready?"]},
            "periodSeconds": 5,
        }
        (web,) = await node.apply(manifest)
        await node.kubelet.wait_for_status(
            web.uid, lambda s: all(c.ready for c in s.container_statuses or ()) and s.phase == "Running"
        )
        labels = {
            "probe_type": "Readiness", "container": "app", "pod": "web", "namespace": "default",
            "pod_uid": web.uid,
        }  # fmt: skip

        def count(text: str, result: str) -> float:
            return samples(text).get(key("prober_probe_total", result=result, **labels), 0.0)

        first = (await client.get("/metrics/probes")).text
        assert count(first, "successful") >= 1
        await trio.sleep(22)  # probes at +5, +10, +15, +20
        second = (await client.get("/metrics/probes")).text
        assert count(second, "successful") == count(first, "successful") + 4
        assert count(second, "failed") == 0
        duration = {k: v for k, v in labels.items() if k != "pod_uid"}
        assert samples(second)[key("prober_probe_duration_seconds_count", **duration)] == count(
            second, "successful"
        )
        assert samples(second)[key("process_start_time_seconds")] > 1.6e9
        assert "_created" not in second

        (status,) = node.kubelet.status_of(web.uid).container_statuses or ()  # type: ignore[union-attr]
        assert status.container_id
        node.sim.set_exec_result(status.container_id.partition("://")[2], ["ready?"], 1)
        await trio.sleep(9)  # two probes, both failing
        third = (await client.get("/metrics/probes")).text
        assert count(third, "failed") == 2
        assert count(third, "successful") == count(second, "successful")

        await node.remove(web)  # the pod goes, and so do its workers' series
        await node.kubelet.wait_pod_finished(web.uid)
        await trio.sleep(1)
        gone = (await client.get("/metrics/probes")).text
        assert "prober_probe_total{" not in gone


async def test_resource_metrics_have_upstream_names_values_and_timestamps(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with (
        open_test_node(tmp_path, host_stats=fixed_host_sample(HOST)) as node,
        node.client() as client,
    ):
        manifest = pod_manifest("web", {"app": "run", "side": "run"})
        manifest["metadata"]["annotations"][USAGE_ANNOTATION_PREFIX + "app"] = "cpu=500m memory=32Mi"
        manifest["metadata"]["annotations"][USAGE_ANNOTATION_PREFIX + "side"] = "memory=8Mi"
        (web,) = await node.apply(manifest)
        await node.wait_running(web)
        await trio.sleep(8)
        summary = await node.kubelet.stats_summary(cpu_and_memory_only=True)
        response = await client.get("/metrics/resource")
        assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
        text = response.text
        values, stamps = samples(text), timestamps(text)
        (pod,) = summary.pods
        app = pod.containers[0]
        assert app.cpu is not None and app.cpu.usage_core_nano_seconds is not None and app.start_time_ns
        app_labels = {"container": "app", "pod": "web", "namespace": "default"}
        side_labels = {**app_labels, "container": "side"}
        assert (
            values[key("container_cpu_usage_seconds_total", **app_labels)]
            == app.cpu.usage_core_nano_seconds / 1e9
        )
        assert values[key("container_cpu_usage_seconds_total", **app_labels)] >= 4.0  # 500m for >= 8 s
        assert values[key("container_cpu_usage_seconds_total", **side_labels)] == 0
        assert values[key("container_memory_working_set_bytes", **app_labels)] == 32 * 1024**2
        assert values[key("container_memory_working_set_bytes", **side_labels)] == 8 * 1024**2
        assert values[key("container_start_time_seconds", **app_labels)] == app.start_time_ns / 1e9
        assert values[key("pod_memory_working_set_bytes", pod="web", namespace="default")] == 40 * 1024**2
        assert values[key("pod_cpu_usage_seconds_total", pod="web", namespace="default")] == (
            app.cpu.usage_core_nano_seconds / 1e9
        )
        assert values[key("node_cpu_usage_seconds_total")] == 42.5
        assert values[key("node_memory_working_set_bytes")] == 1024**3
        assert values[key("scrape_error")] == values[key("resource_scrape_error")] == 0
        now_ms = node.kubelet.wall_ns() // 10**6
        stamp = stamps[key("container_memory_working_set_bytes", **app_labels)]
        assert stamp is not None and round(float(stamp) * 1000) == now_ms  # the reading's time, in ms
        assert stamps[key("container_start_time_seconds", **app_labels)] is None
        assert "# TYPE container_cpu_usage_seconds_total counter" in text
        assert "_created" not in text

        node.sim.listing_broken = True
        broken = samples((await client.get("/metrics/resource")).text)
        assert broken[key("scrape_error")] == broken[key("resource_scrape_error")] == 1
        assert not [k for k in broken if k[0].startswith("container_")]


async def test_configz_serves_the_effective_configuration_as_go_does(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    options, _ = load_options(
        ["--max-pods=42", "--sync-frequency=30s", "--eviction-hard=memory.available<200Mi", "--v=3"]
    )
    async with open_test_node(tmp_path) as node:
        app = kubelet_api_app(node.kubelet, configz=configz_body(options))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://k") as client:
            body = (await client.get("/configz")).json()
    config = body["kubeletconfig"]
    assert set(body) == {"kubeletconfig"}
    assert "kind" not in config and "apiVersion" not in config
    assert config["maxPods"] == 42
    assert config["syncFrequency"] == "30s"
    assert config["evictionHard"] == {"memory.available": "200Mi"}
    assert config["logging"]["verbosity"] == 3
    assert config["authentication"]["webhook"]["cacheTTL"] == "2m0s"
    assert config["streamingConnectionIdleTimeout"] == "4h0m0s"


async def test_configz_without_options_is_not_found(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_test_node(tmp_path) as node:
        app = kubelet_api_app(node.kubelet)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://k") as client:
            response = await client.get("/configz")
    assert response.status_code == 404


def test_configz_round_trips_into_config(tmp_path: Path) -> None:
    """What ``/configz`` says, written as a ``--config`` file (kind and apiVersion added, as the Go
    docs' recipe does), loads back into the same options."""
    base = tmp_path / "base.yaml"
    base.write_text(
        yaml.safe_dump(
            {
                "kind": "KubeletConfiguration",
                "apiVersion": "kubelet.config.k8s.io/v1beta1",
                "clusterDNS": ["10.96.0.10"],
                "clusterDomain": "cluster.local",
                "authentication": {"anonymous": {"enabled": False}, "webhook": {"cacheTTL": "1m30s"}},
                "evictionSoftGracePeriod": {"memory.available": "1m30s"},
                "evictionSoft": {"memory.available": "300Mi"},
                "kubeReserved": {"cpu": "100m", "memory": "256Mi"},
                "registerWithTaints": [{"key": "edge", "value": "yes", "effect": "NoSchedule"}],
                "staticPodURLHeader": {"X-Token": ["a", "b"]},
                "kubeAPIQPS": 12.5,
                "allowedUnsafeSysctls": ["net.core.*"],
            }
        )
    )
    options, _ = load_options(
        ["--config", str(base), "--read-only-port=10255", "--node-status-update-frequency=4s"]
    )
    served = configz_body(options)["kubeletconfig"]
    written = tmp_path / "configz.yaml"
    written.write_text(
        yaml.safe_dump(
            {"kind": "KubeletConfiguration", "apiVersion": "kubelet.config.k8s.io/v1beta1", **served}
        )
    )
    again, warnings = load_options(["--config", str(written)])
    assert warnings == []
    for setting in SETTINGS:
        if setting.key:
            assert getattr(again, setting.dest) == getattr(options, setting.dest), setting.key
    assert kubelet_configuration(again) == served
    assert served["kubeAPIQPS"] == 12.5 and served["evictionSoftGracePeriod"] == {"memory.available": "1m30s"}
