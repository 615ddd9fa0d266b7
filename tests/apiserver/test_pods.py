"""Pods through the API on SimRuntime + the in-process fake API server (MockClock): status publishing,
graceful deletion, mirror pods and events."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from kubelet_trio.clock import WallClock
from kubelet_trio.testing.fakeapi import open_fake_api
from tests.apiserver.harness import open_api_node, pod_manifest
from tests.apiserver.pod_status import api_container, phase, running


async def test_pod_runs_and_status_is_published(autojump_clock: trio.testing.MockClock) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock):
        api.create_pod(pod_manifest("web", {"app": "run"}))
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "web") and phase(api, "web") == "Running")
        status = api.pod("web")["status"]
        conditions = {c["type"]: c["status"] for c in status["conditions"]}
        assert conditions == {
            "PodReadyToStartContainers": "True",
            "Initialized": "True",
            "Ready": "True",
            "ContainersReady": "True",
            "PodScheduled": "True",
        }
        app = api_container(api, "web", "app")
        assert app["ready"] is True and app["restartCount"] == 0
        assert status["hostIP"] == "192.0.2.10" and status["podIP"]
        # Every status write carried the UID precondition (and the resourceVersion it was computed
        # against, when it was not read first) and was a merge patch.
        patches = api.app.requests_for("PATCH", r"/pods/web/status$")
        uid = api.pod("web")["metadata"]["uid"]
        assert patches and all(
            p.body["metadata"]["uid"] == uid and set(p.body["metadata"]) <= {"uid", "resourceVersion"}
            for p in patches
        )
        assert all(p.content_type == "application/merge-patch+json" for p in patches)
        # Nothing changes: the 10 s reconcile sends nothing more.
        count = len(patches)
        await trio.sleep(60)
        assert len(api.app.requests_for("PATCH", r"/pods/web/status$")) == count

        # A label change is an UPDATE, not a restart.
        container_id = app["containerID"]
        api.store.patch("pods", "default", "web", {"metadata": {"labels": {"version": "2"}}})
        await trio.sleep(30)
        app = api_container(api, "web", "app")
        assert app["containerID"] == container_id and app["restartCount"] == 0
        assert "running" in app["state"]


async def test_a_field_the_server_drops_is_not_resent_every_sweep(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """kube-apiserver 1.24 drops ``status.hostIPs`` (a 1.28 field): the API copy then never equals ours,
    but nobody changed the pod after our write, so the 10 s drift sweep sends nothing."""
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock):
        api.store.unknown_pod_status_fields = frozenset({"hostIPs"})
        api.create_pod(pod_manifest("web", {"app": "run"}))
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "web") and phase(api, "web") == "Running")
        await trio.sleep(5)
        assert "hostIPs" not in api.pod("web")["status"]
        count = len(api.app.requests_for("PATCH", r"/pods/web/status$"))
        await trio.sleep(60)
        assert len(api.app.requests_for("PATCH", r"/pods/web/status$")) == count
        # Someone else changes the status: the sweep repairs it (and only then writes again).
        api.store.patch("pods", "default", "web", {"status": {"phase": "Pending"}}, subresource="status")
        await trio.sleep(11)
        assert phase(api, "web") == "Running"
        assert len(api.app.requests_for("PATCH", r"/pods/web/status$")) == count + 1


async def test_graceful_delete_stops_containers_then_removes_the_pod(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock) as node:
        api.create_pod(pod_manifest("web", {"app": "run"}, terminationGracePeriodSeconds=20))
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "web"))
        uid = api.pod("web")["metadata"]["uid"]
        api.store.delete("pods", "default", "web")  # graceful: deletionTimestamp + 20 s
        assert api.pod("web")["metadata"]["deletionGracePeriodSeconds"] == 20
        start = trio.current_time()
        with trio.fail_after(60):
            await api.wait_for(lambda: not api.has_pod("web"))
        assert trio.current_time() - start < 20  # SIGTERM stopped it at once: no need to wait out 20 s
        assert node.kubelet._pod_workers.is_finished(uid) or not node.kubelet._pod_workers.is_known(uid)
        assert not [c for c in await node.sim.list_containers() if c.state == 1]  # nothing running
        final = api.app.requests_for("DELETE", r"/pods/web$")[-1]
        assert final.body["gracePeriodSeconds"] == 0
        assert final.body["preconditions"] == {"uid": uid}
        # The terminal phase was published before the final DELETE.
        order = [r for r in api.app.requests if r.path.endswith("/pods/web/status") or r is final]
        terminal = [
            i
            for i, r in enumerate(order)
            if r.method == "PATCH" and r.body["status"].get("phase") == "Failed"
        ]
        assert terminal and terminal[-1] < order.index(final)


async def test_delete_collection_removes_only_the_selected_pods(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """As on a real API server (the conformance tier checks the same): the selected pods are marked for
    graceful deletion, the kubelet stops them and they go; the others are untouched."""
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock) as node:
        for name in ("batch-0", "batch-1", "keeper"):
            manifest = pod_manifest(name, {"app": "run"})
            if name.startswith("batch"):
                manifest["metadata"]["labels"] = {"set": "batch"}
            api.create_pod(manifest)
        with trio.fail_after(30):
            await api.wait_for(lambda: all(running(api, n) for n in ("batch-0", "batch-1", "keeper")))
        async with api.client() as client:
            answer = await client.request(
                "DELETE", "/api/v1/namespaces/default/pods", params={"labelSelector": "set=batch"}
            )
        # the selected pods as they were before (kube-apiserver 1.24 answers so), now marked for deletion
        assert answer["kind"] == "PodList"
        assert [p["metadata"]["name"] for p in answer["items"]] == ["batch-0", "batch-1"]
        assert not any("deletionTimestamp" in p["metadata"] for p in answer["items"])
        with trio.fail_after(60):
            await api.wait_for(lambda: not api.has_pod("batch-0") and not api.has_pod("batch-1"))
        # graceful: each went only with the kubelet's final DELETE, once its containers had stopped
        for name in ("batch-0", "batch-1"):
            (final,) = api.app.requests_for("DELETE", rf"/pods/{name}$")
            assert final.body["gracePeriodSeconds"] == 0
        keeper = api.pod("keeper")
        assert "deletionTimestamp" not in keeper["metadata"] and running(api, "keeper")
        assert len([c for c in await node.sim.list_containers() if c.state == 1]) == 1


async def test_static_pod_gets_a_mirror_pod(autojump_clock: trio.testing.MockClock) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock) as node:
        (static,) = await node.set_static_pods(
            {
                "metadata": {"name": "etcd", "annotations": {"sim.kubelet-trio.io/app": "run"}},
                "spec": {"containers": [{"name": "app", "image": "registry.sim/busybox:1.36"}]},
            }
        )
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "etcd-node-1"))
        mirror = api.pod("etcd-node-1")
        meta = mirror["metadata"]
        assert (
            meta["annotations"]["kubernetes.io/config.mirror"]
            == static.annotations["kubernetes.io/config.hash"]
        )
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "name": "node-1",
                "uid": api.node("node-1")["metadata"]["uid"],
                "controller": True,
            }
        ]
        assert meta["uid"] != static.uid
        assert mirror["status"]["phase"] == "Running"  # the static pod's status, published through it
        assert not node.kubelet._pod_manager.get(meta["uid"])  # the mirror is not run as a pod

        # Deleted by someone: recreated (a new UID), the static pod keeps running.
        api.store.delete("pods", "default", "etcd-node-1", grace_period_seconds=0)
        with trio.fail_after(10):
            await api.wait_for(lambda: api.has_pod("etcd-node-1"))
        assert api.pod("etcd-node-1")["metadata"]["uid"] != meta["uid"]

        # The manifest goes away: so does the mirror pod.
        await node.set_static_pods()
        with trio.fail_after(10):
            await api.wait_for(lambda: not api.has_pod("etcd-node-1"))


async def test_events_are_recorded_and_aggregated(autojump_clock: trio.testing.MockClock) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock):
        api.create_pod(pod_manifest("crash", {"app": "exit 1 after 1s"}))
        api.create_pod(pod_manifest("web", {"app": "run"}))
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "web"))
        api.store.delete("pods", "default", "web")
        await trio.sleep(120)

        def reasons(name: str) -> dict[str, dict[str, Any]]:
            return {e["reason"]: e for e in api.events("default") if e["involvedObject"]["name"] == name}

        web = reasons("web")
        assert {"Pulled", "Created", "Started", "Killing"} <= set(web), set(web)
        started = web["Started"]
        assert started["involvedObject"]["kind"] == "Pod" and started["type"] == "Normal"
        assert started["source"] == {"component": "kubelet", "host": "node-1"}
        crash = reasons("crash")
        assert crash["BackOff"]["type"] == "Warning"
        assert crash["BackOff"]["count"] > 1  # repeats are counted on one Event, not re-created
        assert len([e for e in api.events("default") if e["reason"] == "BackOff"]) == 1
        node_events = {e["reason"] for e in api.events("default") if e["involvedObject"]["kind"] == "Node"}
        assert {"Starting", "NodeHasSufficientMemory"} <= node_events


async def test_status_names_the_generation_it_observed(autojump_clock: trio.testing.MockClock) -> None:
    """Go 1.35+ (PodObservedGenerationTracking): ``status.observedGeneration`` and each kubelet-owned
    condition's ``observedGeneration`` follow ``metadata.generation``, which each spec change bumps."""
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock):
        api.create_pod(pod_manifest("web", {"app": "run"}))
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "web") and phase(api, "web") == "Running")
        pod = api.pod("web")
        assert pod["metadata"]["generation"] == 1 and pod["status"]["observedGeneration"] == 1
        owned = {"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"}
        assert {c["type"]: c.get("observedGeneration") for c in pod["status"]["conditions"]} == dict.fromkeys(
            owned, 1
        )
        api.store.patch("pods", "default", "web", {"spec": {"activeDeadlineSeconds": 3600}})
        assert api.pod("web")["metadata"]["generation"] == 2
        with trio.fail_after(10):
            await api.wait_for(lambda: api.pod("web")["status"].get("observedGeneration") == 2)
        conditions = api.pod("web")["status"]["conditions"]
        assert {c["type"]: c.get("observedGeneration") for c in conditions} == dict.fromkeys(owned, 2)
        # a label change is no spec change: the generation stays
        api.store.patch("pods", "default", "web", {"metadata": {"labels": {"v": "2"}}})
        assert api.pod("web")["metadata"]["generation"] == 2
