"""ApiObjectStore (kubelet_trio.apiobjects) against the in-process fake API server: what a pod
references, the TTL, cached 404s, API errors keeping the last known object, eviction."""

from __future__ import annotations

import base64

import pytest
import trio
import trio.testing

from kubelet_trio.api import Pod
from kubelet_trio.apiobjects import (
    CONFIG_MAPS,
    SECRETS,
    ApiObjectStore,
    ObjectRef,
    WatchingObjectStore,
    referenced_objects,
)
from kubelet_trio.client.reflector import ObjectReflector
from kubelet_trio.objects import ObjectUnavailable
from kubelet_trio.testing.fakeapi import open_fake_api

CM_PATH = r"/configmaps/cfg$"


def test_referenced_objects_are_each_listed_once() -> None:
    pod = Pod.from_dict(
        {
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {
                "initContainers": [
                    {
                        "name": "i",
                        "envFrom": [{"secretRef": {"name": "s1"}}, {"configMapRef": {"name": "cfg"}}],
                    }
                ],
                "containers": [
                    {
                        "name": "c",
                        "env": [
                            {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "a"}}},
                            {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s2", "key": "b"}}},
                            {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        ],
                    }
                ],
                "volumes": [
                    {"name": "v1", "configMap": {"name": "cfg2"}},
                    {"name": "v2", "secret": {"secretName": "s1"}},
                    {
                        "name": "v3",
                        "projected": {
                            "sources": [{"configMap": {"name": "cfg3"}}, {"secret": {"name": "s3"}}]
                        },
                    },
                    {"name": "v4", "emptyDir": {}},
                ],
            },
        }
    )
    assert referenced_objects(pod) == [
        ObjectRef(SECRETS, "ns", "s1"),
        ObjectRef(CONFIG_MAPS, "ns", "cfg"),
        ObjectRef(SECRETS, "ns", "s2"),
        ObjectRef(CONFIG_MAPS, "ns", "cfg2"),
        ObjectRef(CONFIG_MAPS, "ns", "cfg3"),
        ObjectRef(SECRETS, "ns", "s3"),
    ]


async def test_ttl_not_found_errors_and_eviction(autojump_clock: trio.testing.MockClock) -> None:
    async with open_fake_api() as api, api.client() as client:
        store = ApiObjectStore(client, ttl=60)
        ref = ObjectRef(CONFIG_MAPS, "default", "cfg")

        # A 404 is remembered (for the TTL) as "missing".
        await store.ensure([ref])
        assert store.cached(ref) and store.get_config_map("default", "cfg") is None
        api.store.create("configmaps", "default", {"metadata": {"name": "cfg"}, "data": {"k": "1"}})
        await store.ensure([ref])
        assert store.get_config_map("default", "cfg") is None
        assert len(api.app.requests_for("GET", CM_PATH)) == 1

        # After the TTL the next ensure asks again.
        await trio.sleep(60)
        await store.ensure([ref])
        found = store.get_config_map("default", "cfg")
        assert found is not None and found.data == {"k": "1"}
        with pytest.raises(ObjectUnavailable, match="couldn't get secret default/cfg: not fetched"):
            store.get_secret("default", "cfg")  # a different kind, a different object: never asked for

        # An API error keeps the last known object; the following ensure retries.
        api.store.patch("configmaps", "default", "cfg", {"data": {"k": "2"}})
        await trio.sleep(60)
        api.app.inject("GET", CM_PATH, 403)
        await store.ensure([ref])
        assert store.get_config_map("default", "cfg") == found
        await store.ensure([ref])
        found = store.get_config_map("default", "cfg")
        assert found is not None and found.data == {"k": "2"}

        # An object never fetched because of an API error is unknown, not missing (fails optional refs).
        other = ObjectRef(SECRETS, "default", "other")
        api.app.inject("GET", "/secrets/other$", 500, times=3)
        await store.ensure([other])
        with pytest.raises(ObjectUnavailable, match="couldn't get secret default/other: 500 Injected500"):
            store.get_secret("default", "other")
        await store.ensure([other])
        assert store.get_secret("default", "other") is None  # now known: 404

        # Secrets are decoded; binaryData too.
        secret_ref = ObjectRef(SECRETS, "default", "s")
        api.store.create(
            "secrets",
            "default",
            {"metadata": {"name": "s"}, "data": {"p": base64.b64encode(b"\x00pw").decode()}},
        )
        await store.ensure([secret_ref])
        secret = store.get_secret("default", "s")
        assert secret is not None and secret.data == {"p": b"\x00pw"}

        # Entries no pod asked for in ten TTLs are dropped.
        await trio.sleep(601)
        await store.ensure([secret_ref])
        assert not store.cached(ref) and store.cached(secret_ref)


async def test_watching_store_follows_objects_and_drops_idle_watches(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_fake_api() as api, api.client() as client, trio.open_nursery() as nursery:
        store = WatchingObjectStore(client, idle_after=300, max_watches=2)
        await nursery.start(store.run)
        cfg, gone = ObjectRef(CONFIG_MAPS, "default", "cfg"), ObjectRef(SECRETS, "default", "gone")
        api.store.create("configmaps", "default", {"metadata": {"name": "cfg"}, "data": {"k": "1"}})
        await store.ensure([cfg, gone])
        found = store.get_config_map("default", "cfg")
        assert found is not None and found.data == {"k": "1"}
        assert store.get_secret("default", "gone") is None  # listed: absent
        assert list(store._watches) == [cfg, gone]

        # Changes arrive through the watch: no GET per use.
        api.store.patch("configmaps", "default", "cfg", {"data": {"k": "2"}})
        api.store.create("secrets", "default", {"metadata": {"name": "gone"}, "data": {"p": "eA=="}})
        await trio.sleep(1)
        found = store.get_config_map("default", "cfg")
        assert found is not None and found.data == {"k": "2"}
        secret = store.get_secret("default", "gone")
        assert secret is not None and secret.data == {"p": b"x"}
        api.store.delete("configmaps", "default", "cfg")
        await trio.sleep(1)
        assert store.get_config_map("default", "cfg") is None
        assert len(api.app.requests_for("GET", r"/configmaps$")) == 2  # the list and the watch

        # Beyond max_watches: fetched per ensure (the Get strategy).
        extra = ObjectRef(CONFIG_MAPS, "default", "extra")
        api.store.create("configmaps", "default", {"metadata": {"name": "extra"}, "data": {"e": "1"}})
        await store.ensure([extra])
        assert list(store._watches) == [cfg, gone] and store.get_config_map("default", "extra") is not None
        with pytest.raises(ObjectUnavailable, match="couldn't get configmap default/never: not fetched"):
            store.get_config_map("default", "never")

        # Nobody asked for cfg in idle_after: its watch stops; gone stays.
        for _ in range(5):  # idle sweeps every 150 s
            await trio.sleep(100)
            await store.ensure([gone])
        assert list(store._watches) == [gone]
        assert api.store.watch_count == 1
        nursery.cancel_scope.cancel()


async def test_watching_store_unreachable_api_server(autojump_clock: trio.testing.MockClock) -> None:
    async with open_fake_api() as api, api.client() as client, trio.open_nursery() as nursery:
        store = WatchingObjectStore(client)
        await nursery.start(store.run)
        api.go_down()
        with trio.move_on_after(5):  # the kubelet bounds the wait (OBJECT_PREFETCH_TIMEOUT)
            await store.ensure([ObjectRef(SECRETS, "default", "s")])
        with pytest.raises(ObjectUnavailable, match=r"couldn.t get secret default/s: "):
            store.get_secret("default", "s")
        api.come_back()
        api.store.create("secrets", "default", {"metadata": {"name": "s"}})
        with trio.fail_after(60):
            await store.ensure([ObjectRef(SECRETS, "default", "s")])
        assert store.get_secret("default", "s") is not None
        nursery.cancel_scope.cancel()


async def test_a_watch_the_server_ends_at_once_backs_off(autojump_clock: trio.testing.MockClock) -> None:
    """client-go's "very short watch": a server (or proxy) that closes every watch at once is not
    hammered; the reflector backs off (0.8 s doubling, jittered) and says why."""
    async with open_fake_api() as api, api.client() as client, trio.open_nursery() as nursery:
        reflector = ObjectReflector(
            client, "/api/v1/namespaces/default/configmaps", "cfg", min_watch_timeout=0
        )  # timeoutSeconds=0: the fake ends each watch at once
        await nursery.start(reflector.run)
        await trio.sleep(10)
        watches = [r for r in api.app.requests_for("GET", r"/configmaps$") if "watch" in r.query]
        assert 3 <= len(watches) <= 5  # 0.8-1.6, 1.6-3.2, 3.2-6.4 s apart: not hundreds
        assert reflector.synced.is_set() and reflector.last_error is not None
        assert "very short watch" in reflector.last_error
        nursery.cancel_scope.cancel()


async def test_get_strategy_does_not_serve_stale_objects(autojump_clock: trio.testing.MockClock) -> None:
    async with open_fake_api() as api, api.client() as client:
        store = ApiObjectStore(client, ttl=0, keep_stale=False)
        ref = ObjectRef(CONFIG_MAPS, "default", "cfg")
        api.store.create("configmaps", "default", {"metadata": {"name": "cfg"}, "data": {"k": "1"}})
        await store.ensure([ref])
        assert store.get_config_map("default", "cfg") is not None
        api.app.inject("GET", CM_PATH, 500, times=3)
        await store.ensure([ref])  # every ensure asks; this one fails
        with pytest.raises(ObjectUnavailable, match="couldn't get configmap default/cfg: 500"):
            store.get_config_map("default", "cfg")


async def test_names_that_are_not_a_path_segment_are_never_requested(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The API server accepts a volume naming secret ``../x``; requesting it would address another
    resource (``/namespaces/default/x``), so it is refused by name, as client-go refuses it."""
    pod = Pod.from_dict(
        {
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "containers": [{"name": "c"}],
                "volumes": [
                    {"name": "v1", "secret": {"secretName": "../x"}},
                    {"name": "v2", "configMap": {"name": "a/b"}},
                    {"name": "v3", "configMap": {"name": "%2e%2e"}},
                    {"name": "v4", "configMap": {"name": "good"}},
                ],
            },
        }
    )
    assert referenced_objects(pod) == [ObjectRef(CONFIG_MAPS, "default", "good")]
    async with open_fake_api() as api, api.client() as client:
        for store in (ApiObjectStore(client, ttl=60), WatchingObjectStore(client)):
            async with trio.open_nursery() as nursery:
                if isinstance(store, WatchingObjectStore):
                    await nursery.start(store.run)
                await store.ensure_pod(pod)
                with pytest.raises(
                    ObjectUnavailable, match=r"invalid resource name '\.\./x': may not contain '/'"
                ):
                    store.get_secret("default", "../x")
                with pytest.raises(
                    ObjectUnavailable, match="invalid resource name '%2e%2e': may not contain '%'"
                ):
                    store.get_config_map("default", "%2e%2e")
                assert store.get_config_map("default", "good") is None  # asked for: not found
                nursery.cancel_scope.cancel()
        paths = [r.path for r in api.app.requests]
        assert paths and all("/x" not in p and "/a/b" not in p and "%" not in p for p in paths), paths
        assert any(p.endswith("/configmaps/good") for p in paths), paths


async def test_a_watch_the_node_authorizer_refuses_is_stopped(autojump_clock: trio.testing.MockClock) -> None:
    """The Node authorizer lets a node read only what its pods reference: once the last such pod is gone,
    re-watching is refused (403) and the watch stops instead of retrying for as long as it is kept; a 403
    before the first list (the authorizer's graph catching up with a new pod) is retried."""
    async with open_fake_api() as api, api.client() as client, trio.open_nursery() as nursery:
        store = WatchingObjectStore(client, idle_after=1e6)
        await nursery.start(store.run)
        cfg = ObjectRef(CONFIG_MAPS, "default", "cfg")
        api.store.create("configmaps", "default", {"metadata": {"name": "cfg"}, "data": {"k": "1"}})
        api.app.inject("GET", r"/configmaps$", 403, times=2, reason="Forbidden")
        with trio.fail_after(30):
            await store.ensure([cfg])  # refused twice, then listed
        assert list(store._watches) == [cfg] and store.get_config_map("default", "cfg") is not None

        api.app.inject("GET", r"/configmaps$", 403, times=1000, reason="Forbidden")
        before = len(api.app.requests_for("GET", r"/configmaps$"))
        await trio.sleep(3600)  # the open watch times out (at most 10 min), the next one is refused
        assert list(store._watches) == []
        assert len(api.app.requests_for("GET", r"/configmaps$")) - before == 1
        nursery.cancel_scope.cancel()
