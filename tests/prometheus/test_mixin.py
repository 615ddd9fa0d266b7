"""The node as operators see it: Debian's Prometheus scrapes a kubelet-trio node on containerd, with the
recording rules of kubernetes-mixin loaded, and every PromQL expression of the mixin's kubelet dashboard,
its Compute Resources node and pod dashboards and its kubelet alerts must return data, except the ones
named in :data:`NO_DATA` with the reason.

The expressions come from ``mixin_queries.json`` (``render_mixin.py`` renders it from the mixin). The
node's four endpoints are scraped as kube-prometheus does: one ``job="kubelet"`` with a ``metrics_path``
label. kube-state-metrics is not part of a node: a stand-in serves the few series the dashboards join
with (pod info, requests and limits, node capacity), made from the pods this test runs. Each endpoint's
body also passes ``promtool check metrics``, less the lint findings Go's kubelet has as well.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from kubelet_trio.cm.container_manager import NodeConfig
from kubelet_trio.cri.instrumented import InstrumentedRuntime
from kubelet_trio.cri.remote import open_cri_runtime
from kubelet_trio.testing.env import LocalCriEnvironment, private_cgroup_root, remove_all_pods
from kubelet_trio.testing.node import open_node
from kubelet_trio.testing.registry import free_port

pytestmark = pytest.mark.containerd

QUERIES = json.loads(Path(__file__).with_name("mixin_queries.json").read_text())
NODE = "prom-node"
ENDPOINTS = ("/metrics", "/metrics/cadvisor", "/metrics/probes", "/metrics/resource")
SCRAPE_INTERVAL = "1s"
RATE_INTERVAL = "20s"
SCRIPT = "while true; do i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; echo x > /tmp/f; sleep 1; done"

#: Expressions without data on this node, by a fragment of the expression, with the reason (the README
#: lists them too).
NO_DATA = {
    "storage_operation_errors_total": "removed from the Go kubelet too; failures are status=fail-unknown",
    "kubelet_evictions": "no pod is evicted in this run",
    "kubelet_certificate_manager_client": "no client certificate rotation (no API server in this tier)",
    "kubelet_certificate_manager_server": "no serving certificate rotation (no API server in this tier)",
    "kubelet_server_expiration_renew_errors": "no serving certificate rotation (no API server in this tier)",
    "rest_client_request": "a standalone node makes no API requests (no API server in this tier)",
    "container_fs_": "no block I/O charged to the container: cgroup v1 charges writeback to the root "
    "cgroup and the image is in the page cache",
    "kube_node_status_condition": "node conditions come from kube-state-metrics, not the kubelet",
    "kube_node_spec_taint": "node taints come from kube-state-metrics, not the kubelet",
    "kube_pod_owner": "workload ownership comes from kube-state-metrics; the test pod has no owner",
    "node-exporter": "node-exporter is not part of the node",
    "node:node_cpu_utilization": "node-exporter is not part of the node",
    "unless on (cluster)": "KubeletDown returns data only while no kubelet is up",
}
#: ``promtool check metrics`` findings that Go's kubelet has as well (its names, kept).
LINT_ALLOWED = (
    "kubelet_evictions",
    "kubelet_node_name",
    "kubelet_certificate_manager",
    "kubelet_server_expiration_renew_errors",
    "container_memory_failcnt",
    'non-histogram and non-summary metrics should not have "_count" suffix',
    "machine_",
    "container_",
)


def _ksm_text(pods: list[tuple[str, str]], node: str) -> str:
    lines = [
        f'kube_node_info{{node="{node}"}} 1',
        'kube_namespace_status_phase{namespace="default",phase="Active"} 1',
    ]
    for resource, value in (("cpu", 4), ("memory", 8 * 1024**3), ("pods", 110)):
        for kind in ("capacity", "allocatable"):
            lines.append(f'kube_node_status_{kind}{{node="{node}",resource="{resource}"}} {value}')
    for pod, container in pods:
        base = f'namespace="default",pod="{pod}"'
        lines.append(f'kube_pod_info{{{base},node="{node}",uid="x"}} 1')
        lines.append(f'kube_pod_status_phase{{{base},phase="Running"}} 1')
        lines.append(f'kube_pod_owner{{{base},owner_kind="",owner_name=""}} 1')
        for kind in ("requests", "limits"):
            labels = f'{base},container="{container}",node="{node}"'
            lines.append(f'kube_pod_container_resource_{kind}{{{labels},resource="cpu",unit="core"}} 0.2')
            lines.append(
                f'kube_pod_container_resource_{kind}{{{labels},resource="memory",unit="byte"}} 67108864'
            )
    return "\n".join(lines) + "\n"


@contextmanager
def serve_text(text: str) -> Iterator[int]:
    """A plain HTTP server answering ``text`` on every path (the kube-state-metrics stand-in)."""
    body = text.encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def prometheus_config(kubelet_port: int, ksm_port: int) -> dict[str, Any]:
    jobs: list[dict[str, Any]] = [
        {
            "job_name": "kubelet" + path.replace("/", "-"),
            "metrics_path": path,
            "static_configs": [{"targets": [f"127.0.0.1:{kubelet_port}"]}],
            "relabel_configs": [
                {"target_label": "job", "replacement": "kubelet"},
                {"source_labels": ["__metrics_path__"], "target_label": "metrics_path"},
            ],
        }
        for path in ENDPOINTS
    ]
    jobs.append(
        {"job_name": "kube-state-metrics", "static_configs": [{"targets": [f"127.0.0.1:{ksm_port}"]}]}
    )
    return {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
        "rule_files": ["rules.json"],
        "scrape_configs": jobs,
    }


_COMPARISON = re.compile(r"(>=|<=|==|!=|>|<)\s*-?[0-9][0-9.e+]*")


def instantiate(expr: str, *, pod: str, alert: bool) -> str:
    """Grafana's variables filled in; an alert's thresholds dropped (its inputs must have data)."""
    match = re.fullmatch(r"\s*label_values\((.*),\s*\w+\)\s*", expr, re.S)
    if match:
        expr = match.group(1)
    for name, value in (
        ("$__rate_interval", RATE_INTERVAL),
        ("$__interval", RATE_INTERVAL),
        ("$cluster", ""),
        ("$instance", ".+"),
        ("$node", NODE),
        ("$namespace", "default"),
        ("$pod", pod),
    ):
        expr = expr.replace(name, value)
    return _COMPARISON.sub("", expr) if alert else expr


def expected_empty(expr: str) -> str | None:
    return next((reason for fragment, reason in NO_DATA.items() if fragment in expr), None)


async def _query(client: httpx.AsyncClient, expr: str) -> list[Any]:
    response = await client.get("/api/v1/query", params={"query": expr})
    body = response.json()
    assert body["status"] == "success", (expr, body)
    return list(body["data"]["result"])


async def test_mixin_expressions_return_data(
    cri_env: LocalCriEnvironment, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    prometheus = shutil.which("prometheus")
    promtool = shutil.which("promtool")
    if prometheus is None or promtool is None:
        pytest.skip("Prometheus tier needs Debian's prometheus: apt-get install prometheus")
    port, prom_port = free_port(), free_port()
    web = {
        "metadata": {"name": "web"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "volumes": [{"name": "scratch", "emptyDir": {}}],
            "containers": [
                {
                    "name": "app",
                    "image": cri_env.images.docker_busybox,
                    "command": ["sh", "-c", SCRIPT],
                    "resources": {"limits": {"cpu": "200m", "memory": "64Mi"}},
                    "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                }
            ],
        },
    }
    broken = {  # a failing pull: kubelet_runtime_operations_errors_total
        "metadata": {"name": "broken"},
        "spec": {"containers": [{"name": "app", "image": "127.0.0.1:1/missing:latest"}]},
    }
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"groups": QUERIES["rule_groups"]}))
    observe: list[Any] = []
    report: dict[str, tuple[int, int]] = {}
    missing: list[str] = []
    with (
        trio.fail_after(240),
        serve_text(_ksm_text([("web", "app")], NODE)) as ksm_port,
        private_cgroup_root() as cgroup_root,
    ):
        (tmp_path / "prometheus.json").write_text(json.dumps(prometheus_config(port, ksm_port)))
        check = await trio.run_process(
            [promtool, "check", "config", str(tmp_path / "prometheus.json")],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        assert check.returncode == 0, (check.stdout + check.stderr).decode()
        async with open_cri_runtime(cri_env.endpoint, request_timeout=30) as raw:
            runtime = InstrumentedRuntime(raw, lambda *args: observe[0](*args) if observe else None)
            try:
                async with (
                    open_node(
                        runtime,
                        NODE,
                        read_only_port=port,
                        address="127.0.0.1",
                        pod_logs_dir=str(tmp_path / "logs"),
                        root_dir=str(tmp_path / "root"),
                        cgroups=NodeConfig(cgroup_root=cgroup_root),  # pod cgroups, timed
                    ) as node,
                    httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as kubelet,
                    httpx.AsyncClient(base_url=f"http://127.0.0.1:{prom_port}", timeout=30) as prom,
                    trio.open_nursery() as nursery,
                ):
                    observe.append(node.kubelet.metrics.observe_runtime_operation)
                    process = await nursery.start(_run_prometheus, prometheus, tmp_path, prom_port)
                    (pod,) = await node.apply(web)
                    await node.apply(broken)
                    await node.wait_for_phase(pod, "Running")
                    for path in ENDPOINTS:
                        body = (await kubelet.get(path)).content
                        await _promtool_check(promtool, path, body)
                    report, missing = await _evaluate(prom)
                    process.terminate()
            finally:
                await remove_all_pods(cri_env.endpoint, NODE)
    request.node.user_properties.append(("mixin_report", report))  # the run's summary prints it
    assert not missing, "expressions without data:\n" + "\n".join(missing)


async def _run_prometheus(
    binary: str, directory: Path, port: int, *, task_status: trio.TaskStatus[trio.Process]
) -> None:
    command = [
        binary,
        f"--config.file={directory / 'prometheus.json'}",
        f"--storage.tsdb.path={directory / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    log = (directory / "prometheus.log").open("wb")

    async def run(*, task_status: trio.TaskStatus[trio.Process]) -> None:
        await trio.run_process(command, stdout=log, stderr=log, check=False, task_status=task_status)

    with log:
        async with trio.open_nursery() as nursery:
            task_status.started(await nursery.start(run))


async def _promtool_check(promtool: str, path: str, body: bytes) -> None:
    result = await trio.run_process(
        [promtool, "check", "metrics"], stdin=body, capture_stdout=True, capture_stderr=True, check=False
    )
    findings = [
        line
        for line in (result.stdout + result.stderr).decode().splitlines()
        if line.strip() and not any(allowed in line for allowed in LINT_ALLOWED)
    ]
    assert not findings, f"promtool check metrics {path}:\n" + "\n".join(findings)


async def _evaluate(prom: httpx.AsyncClient) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """Ask every expression until all that should have data have it (rates need a few scrapes)."""
    groups: dict[str, list[tuple[str, str, bool]]] = {}
    for name, queries in QUERIES["dashboards"].items():
        groups[name] = [(q["title"], q["expr"], False) for q in queries]
    for name, queries in QUERIES["alert_groups"].items():
        groups["alerts " + name] = [(q["title"], q["expr"], True) for q in queries]
    for group in QUERIES["rule_groups"]:
        groups["rules " + group["name"]] = [(r.get("record", ""), r["expr"], False) for r in group["rules"]]
    pending = {(group, title, expr, alert) for group, items in groups.items() for title, expr, alert in items}
    answered: set[tuple[str, str, str, bool]] = set()
    for _ in range(60):
        for item in sorted(pending - answered):
            expr, alert = item[2], item[3]
            try:
                result = await _query(prom, instantiate(expr, pod="web", alert=alert))
            except httpx.TransportError:
                continue  # not listening yet
            if result:
                answered.add(item)
        waiting = [i for i in pending - answered if expected_empty(i[2]) is None]
        if not waiting:
            break
        await trio.sleep(2)
    report = {
        group: (sum(1 for t, e, a in items if (group, t, e, a) in answered), len(items))
        for group, items in groups.items()
    }
    missing = sorted(
        f"{group} / {title}: {expr}"
        for group, title, expr, alert in pending - answered
        if expected_empty(expr) is None
    )
    return report, missing
