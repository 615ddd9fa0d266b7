"""ConfigMaps and Secrets from the API server (kubelet_trio.apiobjects) on SimRuntime + the in-process
fake API server (MockClock): env (valueFrom, envFrom), configMap volumes updated in place after a PATCH,
missing and optional references."""

from __future__ import annotations

import base64
import os
from typing import Any

import pytest
import trio
import trio.testing

from kubelet_trio.apimode import ApiModeOptions
from kubelet_trio.apiobjects import CONFIG_MAPS, SECRETS, ObjectRef
from kubelet_trio.clock import WallClock
from kubelet_trio.testing.fakeapi import FakeApi, open_fake_api
from tests.apiserver.harness import MACHINE, ApiNode, open_api_node, pod_manifest
from tests.apiserver.pod_status import container_status, running

SYNC_FREQUENCY = 60.0


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def create_objects(api: FakeApi) -> None:
    api.store.create(
        "configmaps", "default", {"metadata": {"name": "settings"}, "data": {"mode": "fast", "level": "3"}}
    )
    api.store.create(
        "secrets",
        "default",
        {"metadata": {"name": "creds"}, "type": "Opaque", "data": {"password": b64("s3cr3t")}},
    )


def waiting_reason(api: FakeApi, pod: str) -> str | None:
    status = container_status(api, pod)
    waiting = (status or {}).get("state", {}).get("waiting")
    return waiting.get("reason") if waiting else None


def container_env(node: ApiNode, api: FakeApi, pod: str) -> dict[str, str]:
    status = container_status(api, pod)
    assert status is not None
    container_id = status["containerID"].split("://", 1)[1]
    return {kv.key: kv.value for kv in node.sim.container_config(container_id).envs}


def volume_file(node: ApiNode, api: FakeApi, pod: str, volume: str, path: str) -> str | None:
    uid = api.pod(pod)["metadata"]["uid"]
    mounted = node.kubelet._volume_manager.mounted_volumes(uid).get(volume)
    if mounted is None:
        return None
    try:
        with open(os.path.join(mounted.host_path, path), encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return None


def with_app(manifest: dict[str, Any], **container: Any) -> dict[str, Any]:
    manifest["spec"]["containers"][0].update(container)
    return manifest


async def test_env_from_config_map_and_secret(autojump_clock: trio.testing.MockClock) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock) as node:
        create_objects(api)
        env = [
            {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}},
            {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
            {"name": "DERIVED", "value": "$(MODE)-$(CFG_level)"},
        ]
        env_from = [
            {"configMapRef": {"name": "settings"}, "prefix": "CFG_"},
            {"secretRef": {"name": "creds"}},
        ]
        api.create_pod(with_app(pod_manifest("web", {"app": "run"}), env=env, envFrom=env_from))
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "web"))
        envs = container_env(node, api, "web")
        assert envs["MODE"] == "fast"
        assert envs["PASSWORD"] == "s3cr3t"
        assert envs["CFG_mode"] == "fast" and envs["CFG_level"] == "3"
        assert envs["password"] == "s3cr3t"
        assert envs["DERIVED"] == "fast-3"
        # One watched list per object (the Watch strategy), not one per reference or per sync.
        await trio.sleep(3 * SYNC_FREQUENCY)
        lists = api.app.requests_for("GET", r"/namespaces/default/(configmaps|secrets)$")
        assert sorted((r.path, r.query["fieldSelector"]) for r in lists if "watch" not in r.query) == [
            ("/api/v1/namespaces/default/configmaps", "metadata.name=settings"),
            ("/api/v1/namespaces/default/secrets", "metadata.name=creds"),
        ]
        assert list(node.mode.objects._watches) == [  # type: ignore[union-attr]
            ObjectRef(CONFIG_MAPS, "default", "settings"),
            ObjectRef(SECRETS, "default", "creds"),
        ]


@pytest.mark.parametrize(
    ("strategy", "cache_ttl", "node_ttl", "periods"),
    [
        ("Watch", None, None, 1.5),  # the next resync (jittered by up to half a period) sees the change
        ("Get", None, None, 1.5),  # every sync asks
        ("Cache", None, None, 2.5),  # the cache's TTL (the sync frequency) plus the next resync
        ("Cache", 1000.0, None, None),  # a long TTL: still the old data after 3 periods
        ("Cache", 1000.0, "0", 1.5),  # the TTL controller's node annotation (0 in small clusters) wins
    ],
)
async def test_config_map_volume_follows_a_patch(
    autojump_clock: trio.testing.MockClock,
    strategy: str,
    cache_ttl: float | None,
    node_ttl: str | None,
    periods: float | None,
) -> None:
    clock = WallClock()
    options = ApiModeOptions(machine=MACHINE, object_strategy=strategy, object_cache_ttl=cache_ttl)
    async with (
        open_fake_api(now=clock.now) as api,
        open_api_node(api, clock=clock, sync_frequency=SYNC_FREQUENCY, options=options) as node,
    ):
        create_objects(api)
        if node_ttl is not None:
            with trio.fail_after(30):
                await api.wait_for(lambda: api.store.list("nodes", None)["items"] != [])
            await node.client.merge_patch(
                "/api/v1/nodes/node-1",
                {"metadata": {"annotations": {"node.alpha.kubernetes.io/ttl": node_ttl}}},
            )
        manifest = with_app(
            pod_manifest(
                "web",
                {"app": "run"},
                volumes=[
                    {"name": "cfg", "configMap": {"name": "settings"}},
                    {"name": "creds", "secret": {"secretName": "creds"}},
                    {
                        "name": "both",
                        "projected": {
                            "sources": [
                                {"configMap": {"name": "settings", "items": [{"key": "mode", "path": "m"}]}},
                                {"secret": {"name": "creds"}},
                            ]
                        },
                    },
                ],
            ),
            volumeMounts=[
                {"name": "cfg", "mountPath": "/etc/cfg"},
                {"name": "creds", "mountPath": "/etc/creds"},
                {"name": "both", "mountPath": "/etc/both"},
            ],
        )
        api.create_pod(manifest)
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "web"))
        assert volume_file(node, api, "web", "cfg", "mode") == "fast"
        assert volume_file(node, api, "web", "creds", "password") == "s3cr3t"
        assert volume_file(node, api, "web", "both", "m") == "fast"
        assert volume_file(node, api, "web", "both", "password") == "s3cr3t"
        container_id = container_status(api, "web")["containerID"]  # type: ignore[index]

        await node.client.merge_patch(
            "/api/v1/namespaces/default/configmaps/settings", {"data": {"mode": "slow"}}
        )
        patched_at = trio.current_time()
        if periods is None:
            await trio.sleep(3 * SYNC_FREQUENCY)
            assert volume_file(node, api, "web", "cfg", "mode") == "fast"
            return
        with trio.fail_after(periods * SYNC_FREQUENCY):
            await api.wait_for(lambda: volume_file(node, api, "web", "cfg", "mode") == "slow")
        assert trio.current_time() - patched_at > 0
        assert volume_file(node, api, "web", "both", "m") == "slow"
        # Updated in place: the container was not restarted.
        status = container_status(api, "web")
        assert status is not None and status["containerID"] == container_id and status["restartCount"] == 0


async def test_missing_object_fails_only_its_pod(autojump_clock: trio.testing.MockClock) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock) as node:
        create_objects(api)
        missing_env = [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "x"}}}]
        api.create_pod(with_app(pod_manifest("broken", {"app": "run"}), env=missing_env))
        api.create_pod(
            with_app(
                pod_manifest(
                    "nomount", {"app": "run"}, volumes=[{"name": "s", "secret": {"secretName": "nosuch"}}]
                ),
                volumeMounts=[{"name": "s", "mountPath": "/s"}],
            )
        )
        ok_env = [{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}}]
        api.create_pod(with_app(pod_manifest("fine", {"app": "run"}), env=ok_env))
        with trio.fail_after(60):
            await api.wait_for(
                lambda: running(api, "fine") and waiting_reason(api, "broken") == "CreateContainerConfigError"
            )
        waiting = container_status(api, "broken")["state"]["waiting"]  # type: ignore[index]
        assert 'configmap "absent" not found' in waiting["message"]
        assert container_env(node, api, "fine")["MODE"] == "fast"

        def failed_mount() -> bool:
            return any(
                e.get("reason") == "FailedMount"
                and e["involvedObject"]["name"] == "nomount"
                and 'secret "nosuch" not found' in e.get("message", "")
                for e in api.events("default")
            )

        with trio.fail_after(60):
            await api.wait_for(failed_mount)
        assert not running(api, "nomount")

        # Creating the object lets the pod start (after the cached 404 expires).
        api.store.create("configmaps", "default", {"metadata": {"name": "absent"}, "data": {"x": "1"}})
        with trio.fail_after(3 * SYNC_FREQUENCY):
            await api.wait_for(lambda: running(api, "broken"))
        assert container_env(node, api, "broken")["X"] == "1"


async def test_optional_missing_references_are_allowed(autojump_clock: trio.testing.MockClock) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock) as node:
        env = [
            {
                "name": "X",
                "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "x", "optional": True}},
            },
            {"name": "Y", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "y", "optional": True}}},
            {"name": "Z", "value": "z"},
        ]
        env_from = [{"configMapRef": {"name": "gone", "optional": True}}]
        manifest = with_app(
            pod_manifest(
                "web",
                {"app": "run"},
                volumes=[{"name": "cfg", "configMap": {"name": "gone", "optional": True}}],
            ),
            env=env,
            envFrom=env_from,
            volumeMounts=[{"name": "cfg", "mountPath": "/etc/cfg"}],
        )
        api.create_pod(manifest)
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "web"))
        envs = container_env(node, api, "web")
        assert envs["Z"] == "z" and "X" not in envs and "Y" not in envs
        uid = api.pod("web")["metadata"]["uid"]
        path = node.kubelet._volume_manager.mounted_volumes(uid)["cfg"].host_path
        assert [f for f in os.listdir(path) if not f.startswith("..")] == []
