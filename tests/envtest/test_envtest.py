"""API-mode scenarios against a real kube-apiserver (the envtest tier; see conftest.py)."""

from __future__ import annotations

import contextlib
from typing import Any

import trio
import trio_util

from kubelet_trio.apimode import open_kubeconfig_client
from kubelet_trio.client import ApiClient, NotFound
from tests.apiserver.harness import open_api_node, pod_manifest
from tests.envtest.conftest import EnvtestCluster

NODE = "envtest-node"


async def poll(predicate: Any, client: ApiClient) -> None:
    """A real API server has no "changed" hook for tests: poll (the caller's deadline bounds it)."""
    async with contextlib.aclosing(trio_util.periodic(0.2)) as ticks:
        async for _ in ticks:
            if await predicate(client):
                return


async def node_ready(client: ApiClient) -> bool:
    try:
        node = await client.get(f"/api/v1/nodes/{NODE}")
    except NotFound:
        return False
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions", ()))


async def test_node_registers_and_runs_a_pod_on_a_real_api_server(envtest: EnvtestCluster) -> None:
    pods = "/api/v1/namespaces/default/pods"
    with trio.fail_after(120):
        async with (
            open_kubeconfig_client(str(envtest.kubeconfig)) as client,
            open_api_node(None, NODE, client=client),
        ):
            await poll(node_ready, client)
            lease = await client.get(f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{NODE}")
            assert lease["spec"]["holderIdentity"] == NODE

            await client.create(pods, pod_manifest("web", {"app": "run"}, node=NODE))

            async def web_running(c: ApiClient) -> bool:
                status = (await c.get(f"{pods}/web")).get("status", {})
                return status.get("phase") == "Running" and any(
                    "running" in s.get("state", {}) for s in status.get("containerStatuses", ())
                )

            await poll(web_running, client)
            await client.delete(f"{pods}/web")  # graceful: the kubelet finishes it

            async def web_gone(c: ApiClient) -> bool:
                try:
                    await c.get(f"{pods}/web")
                except NotFound:
                    return True
                return False

            await poll(web_gone, client)
