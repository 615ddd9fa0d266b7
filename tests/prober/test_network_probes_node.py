"""httpGet and tcpSocket probes through a whole node on SimRuntime, against servers on 127.0.0.1.

Simulated pods get IPs that do not exist, so the prober's ``host_override`` sends probes without a host
to 127.0.0.1. Real sockets need Trio's real clock: periods are 1 s and every test has a deadline.
"""

from __future__ import annotations

import trio

from kubelet_trio.testing.pods import container_status, is_running
from tests.prober.nodes import container, open_probe_node, pod_manifest
from tests.prober.servers import http_server, tcp_listener


async def test_http_readiness_and_tcp_liveness() -> None:
    with trio.fail_after(30):
        async with http_server() as web, open_probe_node() as env:
            env.node.kubelet._probe_manager.prober.host_override = "127.0.0.1"
            healthy = {"value": True}
            web.routes["/ready"] = lambda: (200, {}, b"ok") if healthy["value"] else (503, {}, b"busy")
            async with tcp_listener() as tcp_port:
                readiness = {
                    "httpGet": {"path": "/ready", "port": "web"},
                    "periodSeconds": 1,
                    "failureThreshold": 1,
                }
                liveness = {"tcpSocket": {"port": tcp_port}, "periodSeconds": 1, "failureThreshold": 2}
                (pod,) = await env.node.apply(
                    pod_manifest(
                        "web",
                        [
                            container(
                                ports=[{"name": "web", "containerPort": web.port}],
                                readinessProbe=readiness,
                                livenessProbe=liveness,
                            )
                        ],
                    )
                )
                await env.node.wait_for(
                    pod, lambda s: bool(s.container_statuses) and bool(container_status(s).ready)
                )
                assert web.requests[-1][1]["user-agent"] == "kube-probe/1.36"
                healthy["value"] = False
                status = await env.node.wait_for(pod, lambda s: not container_status(s).ready)
                assert container_status(status).restart_count == 0
                assert any(
                    m == "Readiness probe failed: HTTP probe failed with statuscode: 503"
                    for _, m in env.events.reasons("Unhealthy")
                )
                healthy["value"] = True
                await env.node.wait_for(pod, lambda s: bool(container_status(s).ready))
            # The TCP listener is gone: two failed connections restart the container.
            status = await env.node.wait_for(
                pod, lambda s: container_status(s).restart_count == 1 and is_running(s)
            )
            assert any(
                m.startswith("Liveness probe failed: dial tcp 127.0.0.1:")
                for _, m in env.events.reasons("Unhealthy")
            )
