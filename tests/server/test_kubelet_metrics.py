"""The kubelet metrics dashboards and alerts read beyond the basics: config error, volumes and storage
operations, evictions, certificate TTL and renewal errors, and the Trio-task stand-in for goroutines."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import attrs
import trio
import trio.testing
from prometheus_client.parser import text_string_to_metric_families

from kubelet_trio.api import Pod
from kubelet_trio.metrics import KubeletMetrics
from kubelet_trio.prober.results import ProbeKind, ProbeResult
from tests.server.harness import open_test_node, pod_manifest

Labels = tuple[tuple[str, str], ...]


def samples(text: str) -> dict[tuple[str, Labels], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def key(name: str, **labels: str) -> tuple[str, Labels]:
    return (name, tuple(sorted(labels.items())))


async def test_volume_metrics_follow_a_pod_with_an_empty_dir(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_test_node(tmp_path) as node, node.client() as client:
        before = (await client.get("/metrics")).text
        values = samples(before)
        assert values[key("kubelet_node_config_error")] == 0
        assert values[key("go_goroutines")] > 1
        assert "volume_manager_total_volumes" not in before
        assert "kubelet_evictions" not in before
        assert "storage_operation_duration_seconds_count" not in before

        manifest = pod_manifest("web", {"app": "run"})
        manifest["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
        manifest["spec"]["containers"][0]["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
        (web,) = await node.apply(manifest)
        await node.wait_running(web)
        values = samples((await client.get("/metrics")).text)
        plugin = "kubernetes.io/empty-dir"
        for state in ("desired_state_of_world", "actual_state_of_world"):
            assert values[key("volume_manager_total_volumes", plugin_name=plugin, state=state)] == 1
        mount = {
            "volume_plugin": plugin,
            "operation_name": "volume_mount",
            "status": "success",
            "migrated": "false",
        }
        assert values[key("storage_operation_duration_seconds_count", **mount)] == 1  # set up once

        await node.remove(web)
        await node.kubelet.wait_pod_finished(web.uid)
        await trio.sleep(1)
        values = samples((await client.get("/metrics")).text)
        unmount = {**mount, "operation_name": "volume_unmount"}
        assert values[key("storage_operation_duration_seconds_count", **unmount)] == 1
        assert not [k for k in values if k[0] == "volume_manager_total_volumes"]


@attrs.define
class FakeCertificate:
    not_after: dt.datetime | None
    renew_errors: int = 0

    def expiration(self) -> dt.datetime | None:
        return self.not_after


def test_evictions_and_certificates_appear_once_they_exist() -> None:
    metrics = KubeletMetrics()
    evictions: dict[str, int] = {}
    metrics.track_evictions(evictions)
    assert "kubelet_evictions" not in metrics.render().decode()
    evictions["memory.available"] = 2
    client = FakeCertificate(dt.datetime.now(dt.UTC) + dt.timedelta(days=30), renew_errors=3)
    server = FakeCertificate(None)
    metrics.track_certificates(client=client, server=server)
    text = metrics.render().decode()
    assert "# TYPE kubelet_evictions counter" in text  # Go's name, without _total
    assert 'kubelet_evictions{eviction_signal="memory.available"} 2.0' in text
    assert "# TYPE kubelet_certificate_manager_client_expiration_renew_errors counter" in text
    assert "kubelet_certificate_manager_client_expiration_renew_errors 3.0" in text
    assert "kubelet_server_expiration_renew_errors 0.0" in text
    values = samples(text)
    ttl = values[key("kubelet_certificate_manager_client_ttl_seconds")]
    assert 29 * 86400 < ttl <= 30 * 86400
    assert values[key("kubelet_certificate_manager_server_ttl_seconds")] == float("inf")
    assert "go_goroutines" not in text  # rendered outside Trio: no task tree to count


def test_a_forgotten_probe_series_comes_back_when_probed_again() -> None:
    """The labelled series are remembered between observations; forgetting a probe forgets them too,
    so a pod probed again (the same UID: a worker restarted) is counted afresh, not into a lost series."""
    metrics = KubeletMetrics()
    web = Pod.from_dict({"metadata": {"name": "web", "namespace": "default", "uid": "u1"}})
    labels = {"probe_type": "Readiness", "container": "app", "pod": "web", "namespace": "default"}
    total = key("prober_probe_total", result="successful", pod_uid="u1", **labels)
    for _ in range(2):
        metrics.observe_probe(ProbeKind.READINESS, ProbeResult.SUCCESS, web, "app", 0.01)
    assert samples(metrics.render_probes().decode())[total] == 2
    metrics.forget_probe(ProbeKind.READINESS, web, "app")
    assert total not in samples(metrics.render_probes().decode())
    metrics.observe_probe(ProbeKind.READINESS, ProbeResult.SUCCESS, web, "app", 0.01)
    values = samples(metrics.render_probes().decode())
    assert values[total] == 1
    assert values[key("prober_probe_duration_seconds_count", **labels)] == 1
