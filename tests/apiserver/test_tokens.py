"""Projected service account tokens through the TokenRequest API, on SimRuntime + the in-process fake API
server (MockClock): the standard ``kube-api-access`` volume (token, kube-root-ca.crt, namespace), the
token bound to the pod, refreshed at 80 % of its lifetime without restarting the container, and a missing
ServiceAccount failing only that pod's mount until it exists."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import trio
import trio.testing

from kubelet_trio.clock import WallClock
from kubelet_trio.testing.fakeapi import FakeApi, open_fake_api
from kubelet_trio.testing.fakeapi.tokens import API_AUDIENCE, FAKE_CA_PEM, decode_token
from tests.apiserver.harness import ApiNode, eventually, open_api_node, pod_manifest
from tests.apiserver.pod_status import container_status, running
from tests.apiserver.test_objects import volume_file, with_app

SYNC_FREQUENCY = 10.0
LIFETIME = 600
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def api_access_pod(name: str, **spec: Any) -> dict[str, Any]:
    """A pod as the ServiceAccount admission plugin leaves it: the ``kube-api-access`` volume mounted."""
    volume = {
        "name": "kube-api-access",
        "projected": {
            "sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": LIFETIME}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]
                    }
                },
            ]
        },
    }
    manifest = pod_manifest(name, {"app": "run"}, volumes=[volume], **spec)
    return with_app(
        manifest, volumeMounts=[{"name": "kube-api-access", "mountPath": SA_DIR, "readOnly": True}]
    )


def token_file(node: ApiNode, api: FakeApi, pod: str) -> str | None:
    return volume_file(node, api, pod, "kube-api-access", "token")


@contextlib.asynccontextmanager
async def seeded_node() -> AsyncIterator[tuple[FakeApi, ApiNode]]:
    """A node behind the fake API server whose default namespace has what a cluster's controllers make."""
    clock = WallClock()
    async with (
        open_fake_api(now=clock.now) as api,
        open_api_node(api, clock=clock, sync_frequency=SYNC_FREQUENCY) as node,
    ):
        api.seed_namespace("default")
        yield api, node


async def test_projected_token_is_bound_to_the_pod_and_refreshed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with seeded_node() as (api, node):
        api.create_pod(api_access_pod("web"))
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "web"))
        uid = api.pod("web")["metadata"]["uid"]
        first = token_file(node, api, "web")
        assert first is not None
        issued_at = trio.current_time()
        claims = decode_token(first)
        assert claims["sub"] == "system:serviceaccount:default:default"
        assert claims["aud"] == [API_AUDIENCE]
        assert claims["kubernetes.io"]["pod"] == {"name": "web", "uid": uid}
        assert claims["exp"] - claims["iat"] == LIFETIME
        assert volume_file(node, api, "web", "kube-api-access", "ca.crt") == FAKE_CA_PEM
        assert volume_file(node, api, "web", "kube-api-access", "namespace") == "default"
        (request,) = api.app.requests_for("POST", r"/serviceaccounts/default/token$")
        assert request.body["spec"]["boundObjectRef"] == {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "web",
            "uid": uid,
        }
        assert request.body["spec"]["expirationSeconds"] == LIFETIME
        container_id = container_status(api, "web")["containerID"]  # type: ignore[index]

        await eventually(lambda: token_file(node, api, "web") != first, LIFETIME)
        refreshed_after = trio.current_time() - issued_at
        # Go: once less than 20 % of the lifetime (plus a jitter of 0-9 s) is left, at the next resync
        # (every sync period, jittered by up to half of it).
        assert 0.8 * LIFETIME - 10 <= refreshed_after <= 0.8 * LIFETIME + 1.5 * SYNC_FREQUENCY + 1
        # Cached in between: one request per token, not one per sync.
        assert len(api.app.requests_for("POST", r"/serviceaccounts/default/token$")) == 2
        second = decode_token(token_file(node, api, "web") or "")
        assert second["jti"] != claims["jti"] and second["exp"] > claims["exp"]
        status = container_status(api, "web")
        assert status is not None and status["containerID"] == container_id and status["restartCount"] == 0

        assert node.mode.tokens._cache
        await node.client.delete("/api/v1/namespaces/default/pods/web", grace_period_seconds=0)
        with trio.fail_after(60):
            await api.wait_for(lambda: not api.has_pod("web"))
        await eventually(lambda: not node.mode.tokens._cache, 60)  # dropped with the volumes


async def test_missing_service_account_fails_only_that_mount(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with seeded_node() as (api, node):
        api.create_pod(api_access_pod("robot", serviceAccountName="robot"))
        api.create_pod(api_access_pod("web"))

        def failed_mount() -> bool:
            return any(
                e.get("reason") == "FailedMount"
                and e["involvedObject"]["name"] == "robot"
                and e["message"]
                == 'MountVolume.SetUp failed for volume "kube-api-access" : '
                'failed to fetch token: 404 NotFound: serviceaccounts "robot" not found'
                for e in api.events("default")
            )

        with trio.fail_after(60):
            await api.wait_for(lambda: running(api, "web") and failed_mount())
        assert not running(api, "robot")
        assert token_file(node, api, "robot") is None

        api.store.create("serviceaccounts", "default", {"metadata": {"name": "robot"}})
        with trio.fail_after(3 * SYNC_FREQUENCY):
            await api.wait_for(lambda: running(api, "robot"))
        token = token_file(node, api, "robot")
        assert token is not None
        assert decode_token(token)["sub"] == "system:serviceaccount:default:robot"
