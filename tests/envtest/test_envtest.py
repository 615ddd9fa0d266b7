"""API-mode scenarios against a real kube-apiserver (the envtest tier; see conftest.py)."""

from __future__ import annotations

import contextlib
from typing import Any

import trio
import trio_util

from kubelet_trio.apimode import open_kubeconfig_client
from kubelet_trio.client import ApiClient, NotFound
from kubelet_trio.testing.fakeapi.tokens import decode_token
from tests.apiserver.harness import open_api_node, pod_manifest
from tests.envtest.conftest import EnvtestCluster

NODE = "envtest-node"
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{NODE}"


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


async def lease_exists(client: ApiClient) -> bool:
    try:
        await client.get(LEASE)
    except NotFound:
        return False
    return True


async def test_node_registers_and_runs_a_pod_on_a_real_api_server(envtest: EnvtestCluster) -> None:
    pods = "/api/v1/namespaces/default/pods"
    with trio.fail_after(120):
        async with (
            open_kubeconfig_client(str(envtest.kubeconfig)) as client,
            open_api_node(None, NODE, client=client) as node,
        ):
            await poll(node_ready, client)
            # The lease follows the node (it is owned by it): created after registration, not before.
            await poll(lease_exists, client)
            lease = await client.get(LEASE)
            assert lease["spec"]["holderIdentity"] == NODE
            node_uid = (await client.get(f"/api/v1/nodes/{NODE}"))["metadata"]["uid"]
            assert [(o["kind"], o["name"], o["uid"]) for o in lease["metadata"]["ownerReferences"]] == [
                ("Node", NODE, node_uid)
            ]

            # A static pod gets a mirror pod.
            await node.set_static_pods(pod_manifest("static-web", {"app": "run"}, node=NODE))

            async def mirrored(c: ApiClient) -> bool:
                try:
                    mirror = await c.get(f"{pods}/static-web-{NODE}")
                except NotFound:
                    return False
                return "kubernetes.io/config.mirror" in mirror["metadata"].get("annotations", {})

            await poll(mirrored, client)

            await client.create(pods, pod_manifest("web", {"app": "run"}, node=NODE))

            async def web_running(c: ApiClient) -> bool:
                status = (await c.get(f"{pods}/web")).get("status", {})
                return status.get("phase") == "Running" and any(
                    "running" in s.get("state", {}) for s in status.get("containerStatuses", ())
                )

            await poll(web_running, client)

            async def events_recorded(c: ApiClient) -> bool:
                events = (await c.get("/api/v1/namespaces/default/events")).get("items", ())
                reasons = {e["reason"] for e in events if e["involvedObject"].get("name") == "web"}
                return {"Pulled", "Created", "Started"} <= reasons

            await poll(events_recorded, client)
            await client.delete(f"{pods}/web")  # graceful: the kubelet finishes it

            async def web_gone(c: ApiClient) -> bool:
                try:
                    await c.get(f"{pods}/web")
                except NotFound:
                    return True
                return False

            await poll(web_gone, client)


async def test_objects_tokens_and_label_patches_on_a_real_api_server(envtest: EnvtestCluster) -> None:
    """The fake API server's scenarios for API-backed data, against kube-apiserver: a configMap volume
    follows a patch, a projected token is issued by the TokenRequest API and bound to the pod, a label
    patch does not restart the pod. (No controller manager runs: the ServiceAccount and kube-root-ca.crt
    are created here.)"""
    ns = "/api/v1/namespaces/default"
    with trio.fail_after(120):
        async with (
            open_kubeconfig_client(str(envtest.kubeconfig)) as client,
            open_api_node(None, NODE, client=client, sync_frequency=2.0) as node,
        ):
            await poll(node_ready, client)
            await client.create(f"{ns}/serviceaccounts", {"metadata": {"name": "default"}})
            await client.create(
                f"{ns}/configmaps", {"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": "CA"}}
            )
            await client.create(
                f"{ns}/configmaps", {"metadata": {"name": "settings"}, "data": {"mode": "fast"}}
            )
            manifest = pod_manifest(
                "reader",
                {"app": "run"},
                node=NODE,
                # what ServiceAccount admission (off here) sets; required with a serviceAccountToken source
                serviceAccountName="default",
                volumes=[
                    {"name": "cfg", "configMap": {"name": "settings"}},
                    {
                        "name": "kube-api-access",
                        "projected": {
                            "sources": [
                                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                                {"configMap": {"name": "kube-root-ca.crt"}},
                            ]
                        },
                    },
                ],
            )
            manifest["spec"]["containers"][0]["volumeMounts"] = [
                {"name": "cfg", "mountPath": "/etc/cfg"},
                {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"},
            ]
            created = await client.create(f"{ns}/pods", manifest)
            uid = created["metadata"]["uid"]

            def volume_file(volume: str, path: str) -> str | None:
                mounted = node.kubelet._volume_manager.mounted_volumes(uid).get(volume)
                if mounted is None:
                    return None
                with contextlib.suppress(FileNotFoundError), open(f"{mounted.host_path}/{path}") as f:
                    return f.read()
                return None

            async def container_id(c: ApiClient) -> str | None:
                statuses = (await c.get(f"{ns}/pods/reader")).get("status", {}).get("containerStatuses", ())
                running = [s for s in statuses if "running" in s.get("state", {})]
                return running[0]["containerID"] if running else None

            async def reader_running(c: ApiClient) -> bool:
                return await container_id(c) is not None

            await poll(reader_running, client)
            first_id = await container_id(client)
            token = volume_file("kube-api-access", "token")
            assert token is not None and volume_file("kube-api-access", "ca.crt") == "CA"
            claims = decode_token(token)
            assert claims["sub"] == "system:serviceaccount:default:default"
            assert claims["kubernetes.io"]["pod"] == {"name": "reader", "uid": uid}
            assert volume_file("cfg", "mode") == "fast"

            await client.merge_patch(f"{ns}/configmaps/settings", {"data": {"mode": "slow"}})
            await client.merge_patch(f"{ns}/pods/reader", {"metadata": {"labels": {"tier": "edge"}}})

            async def updated(c: ApiClient) -> bool:
                return volume_file("cfg", "mode") == "slow"

            await poll(updated, client)
            await trio.sleep(4)  # two sync periods after the label patch
            assert await container_id(client) == first_id  # neither change restarted it
