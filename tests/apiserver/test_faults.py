"""Fault tests on SimRuntime + the in-process fake API server (MockClock): the API server going away,
a watch answered 410, a conflicting status write, and pods deleted while the kubelet was down."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from kubelet_trio.clock import WallClock
from kubelet_trio.config import apiserver
from kubelet_trio.fsio import run_inline
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.testing.fakeapi import open_fake_api
from tests.apiserver.harness import open_api_node, pod_manifest
from tests.apiserver.pod_status import api_container, phase, running

RUNNING = 1  # CRI ContainerState.CONTAINER_RUNNING


async def running_ids(sim: SimRuntime) -> set[str]:
    return {c.id for c in await sim.list_containers() if c.state == RUNNING}


async def test_api_server_away_for_a_minute(autojump_clock: trio.testing.MockClock) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock) as node:
        api.create_pod(pod_manifest("web", {"app": "run"}))
        api.create_pod(pod_manifest("job", {"app": "exit 0 after 30s"}, restart_policy="Never"))
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "web") and running(api, "job"))
        before = await running_ids(node.sim)
        web_id = api_container(api, "web", "app")["containerID"]
        renewals = node.mode.lease.renewals

        api.go_down()
        await trio.sleep(60)
        # Running pods are untouched; the job finished meanwhile, which the API has not heard of.
        assert await running_ids(node.sim) <= before
        assert len(await running_ids(node.sim)) == 1
        assert node.kubelet.status_of(node.kubelet.pods()[1].uid) is not None
        assert phase(api, "job") == "Running"

        api.come_back()
        with trio.fail_after(60):
            await api.wait_for(lambda: phase(api, "job") == "Succeeded")
        assert api_container(api, "web", "app")["containerID"] == web_id
        assert api_container(api, "web", "app")["restartCount"] == 0
        assert phase(api, "web") == "Running"
        await trio.sleep(20)
        assert node.mode.lease.renewals > renewals  # the heartbeat resumed
        ready = {c["type"]: c for c in api.node("node-1")["status"]["conditions"]}["Ready"]
        assert ready["status"] == "True"


async def test_watch_answered_410_relists_without_losing_or_duplicating(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock) as node:
        for name in ("a", "b"):
            api.create_pod(pod_manifest(name, {"app": "run"}))
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "a") and running(api, "b"))
        a_id = api_container(api, "a", "app")["containerID"]
        source = node.mode.source
        assert source.lists == 1

        api.go_down()  # the watch breaks; while it is gone the history it needs is compacted away
        api.store.delete("pods", "default", "b", grace_period_seconds=0)
        api.create_pod(pod_manifest("c", {"app": "run"}))
        api.store.patch("pods", "default", "a", {"metadata": {"labels": {"x": "y"}}})
        api.store.compact()
        api.come_back()

        with trio.fail_after(60):
            await api.wait_for(lambda: running(api, "c"))
        assert source.lists == 2  # the re-watch got 410 and relisted
        await trio.sleep(10)
        pods = {p.name: p for p in node.kubelet.pods()}
        assert set(pods) == {"a", "c"}
        assert pods["a"].metadata is not None and pods["a"].metadata.labels == {"x": "y"}
        assert api_container(api, "a", "app")["containerID"] == a_id  # not restarted
        containers = await node.sim.list_containers()
        by_pod: dict[str, list[str]] = {}
        for c in containers:
            by_pod.setdefault(c.labels["io.kubernetes.pod.name"], []).append(c.id)
        assert len(by_pod["c"]) == 1  # started once: no duplicate ADD
        assert all(c.state != RUNNING for c in containers if c.labels["io.kubernetes.pod.name"] == "b")


async def test_status_patch_conflict_rereads_and_retries(autojump_clock: trio.testing.MockClock) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api:
        api.app.inject(
            "PATCH",
            r"/pods/web/status$",
            409,
            times=2,
            reason="Conflict",
            message="the object has been modified",
        )
        async with open_api_node(api, clock=clock) as node:
            api.create_pod(pod_manifest("web", {"app": "run"}))
            with trio.fail_after(30):
                await api.wait_for(lambda: running(api, "web"))
            pod_calls = {
                ("GET", "/api/v1/namespaces/default/pods/web"),
                ("PATCH", "/api/v1/namespaces/default/pods/web/status"),
            }
            calls = [(r.method, r.body) for r in api.app.requests if (r.method, r.path) in pod_calls]
            # The first write goes against the watched copy, its resourceVersion a precondition, without
            # a read; each 409 makes the next attempt read the pod first.
            assert [method for method, _ in calls[:5]] == ["PATCH", "GET", "PATCH", "GET", "PATCH"]
            first = calls[0][1]["metadata"]
            assert first["resourceVersion"] and first["uid"] == api.pod("web")["metadata"]["uid"]
            assert node.mode.publisher.patches >= 1


async def test_uid_precondition_protects_a_recreated_pod(autojump_clock: trio.testing.MockClock) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock) as node:
        api.create_pod(pod_manifest("web", {"app": "run"}))
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "web"))
        old_uid = api.pod("web")["metadata"]["uid"]
        # Replaced behind the kubelet's back: same name, new UID, not yet scheduled (no nodeName).
        api.store.delete("pods", "default", "web", grace_period_seconds=0)
        api.create_pod(
            {**pod_manifest("web", {"app": "run"}), "spec": {"containers": [{"name": "app", "image": "x"}]}}
        )
        await trio.sleep(30)
        assert api.pod("web")["metadata"]["uid"] != old_uid
        assert api.pod("web")["status"] == {"phase": "Pending"}  # the old pod's status never leaked onto it
        assert old_uid not in {p.uid for p in node.kubelet.pods()}


async def test_pod_deleted_while_the_kubelet_was_down_is_cleaned_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = WallClock()
    sim = SimRuntime(clock=clock, run_sync=run_inline)
    async with open_fake_api(now=clock.now) as api:
        api.create_pod(pod_manifest("web", {"app": "run"}))
        api.create_pod(pod_manifest("keep", {"app": "run"}))
        async with open_api_node(api, clock=clock, sim=sim):
            with trio.fail_after(30):
                await api.wait_for(lambda: running(api, "web") and running(api, "keep"))
        keep_id = api_container(api, "keep", "app")["containerID"].split("://")[1]
        assert len(await running_ids(sim)) == 2  # a stopped kubelet leaves its pods running
        api.store.delete("pods", "default", "web", grace_period_seconds=0)  # force-deleted meanwhile
        async with open_api_node(api, clock=clock, sim=sim):
            await trio.sleep(20)
            assert await running_ids(sim) == {keep_id}  # housekeeping killed the orphan, adopted the other
            assert api_container(api, "keep", "app")["restartCount"] == 0


async def test_reflector_pages_and_follows_bookmarks(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(apiserver, "LIST_PAGE_SIZE", 2)
    clock = WallClock()
    async with open_fake_api(now=clock.now, bookmark_interval=1.0) as api:
        for i in range(5):
            api.create_pod(pod_manifest(f"p{i}", {"app": "run"}))
        api.create_pod(pod_manifest("elsewhere", {"app": "run"}, node="node-2"))
        async with open_api_node(api, clock=clock) as node:
            await trio.sleep(5)
            assert {p.name for p in node.kubelet.pods()} == {f"p{i}" for i in range(5)}
            lists = api.app.requests_for("GET", r"^/api/v1/pods$")
            assert [r.query.get("continue") is not None for r in lists[:3]] == [False, True, True]
            assert all(r.query["fieldSelector"] == "spec.nodeName=node-1" for r in lists)
            api.create_pod(pod_manifest("other", {"app": "run"}, node="node-2"))  # not ours: only a bookmark
            await trio.sleep(3)
            assert node.mode.source.resource_version == str(api.store.rv)
            watches = api.app.requests_for("GET", r"^/api/v1/pods$")
            assert any(r.query.get("allowWatchBookmarks") == "true" for r in watches)
