"""In-place pod resize end to end: the fake API server's ``resize`` subresource, a SimRuntime node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing

from kubelet_trio.clock import WallClock
from kubelet_trio.testing.fakeapi import FakeApi, open_fake_api
from tests.apiserver.harness import open_api_node, pod_manifest
from tests.apiserver.pod_status import api_container, phase, running


def resources(cpu: str | None = None, memory: str | None = None, *, limit_cpu: str | None = None,
              limit_memory: str | None = None) -> dict[str, Any]:  # fmt: skip
    out: dict[str, Any] = {}
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    limits = {k: v for k, v in (("cpu", limit_cpu), ("memory", limit_memory)) if v}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out


def manifest(name: str, containers: dict[str, dict[str, Any]], **extra: Any) -> dict[str, Any]:
    body = pod_manifest(name, dict.fromkeys(containers, "run"))
    for container in body["spec"]["containers"]:
        container.update(containers[container["name"]])
    body["spec"].update(extra)
    return body


def resize(api: FakeApi, name: str, containers: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``kubectl patch --subresource resize`` (a strategic merge patch): the containers' new resources."""
    patch = {"spec": {"containers": [{"name": n, "resources": r} for n, r in containers.items()]}}
    return api.store.patch("pods", "default", name, patch, "resize", strategic=True)


def conditions(api: FakeApi, name: str) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in api.pod(name).get("status", {}).get("conditions") or ()}


def resize_done(api: FakeApi, name: str, container: str, key: str, value: str) -> bool:
    status = api_container(api, name, container)
    limits = (status.get("resources") or {}).get("limits") or {}
    return (
        limits.get(key) == value
        and "PodResizeInProgress" not in conditions(api, name)
        and api.pod(name)["status"].get("observedGeneration") == api.pod(name)["metadata"]["generation"]
    )


async def test_cpu_resize_is_applied_in_place(autojump_clock: trio.testing.MockClock) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock) as node:
        app = resources("100m", "64Mi", limit_cpu="200m", limit_memory="64Mi")
        api.create_pod(manifest("web", {"app": {"resources": app}}))
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "web"))
        status = api_container(api, "web", "app")
        assert status["allocatedResources"] == {"cpu": "100m", "memory": "64Mi"}
        assert status["resources"]["limits"] == {"cpu": "200m", "memory": "64Mi"}
        first_id = status["containerID"]

        resized = resize(
            api, "web", {"app": resources("300m", "64Mi", limit_cpu="400m", limit_memory="64Mi")}
        )
        assert resized["metadata"]["generation"] == 2
        with trio.fail_after(30):
            await api.wait_for(lambda: resize_done(api, "web", "app", "cpu", "400m"))
        status = api_container(api, "web", "app")
        assert status["restartCount"] == 0 and status["containerID"] == first_id
        assert status["allocatedResources"] == {"cpu": "300m", "memory": "64Mi"}
        assert status["resources"] == {
            "limits": {"cpu": "400m", "memory": "64Mi"},
            "requests": {"cpu": "300m", "memory": "64Mi"},
        }
        (update,) = node.sim.resource_updates
        assert update[0] == first_id.removeprefix("containerd://")
        assert (update[1].cpu_quota, update[1].cpu_period, update[1].memory_limit_in_bytes) == (
            40000,
            100000,
            64 * 1024**2,
        )
        events = {e["reason"]: e["message"] for e in api.events() if e["involvedObject"]["name"] == "web"}
        summary = (
            '{"containers":[{"name":"app","resources":{"limits":{"cpu":"400m","memory":"64Mi"},'
            '"requests":{"cpu":"300m","memory":"64Mi"}}}],"generation":2}'
        )
        assert events["ResizeStarted"] == f"Pod resize started: {summary}"
        assert events["ResizeCompleted"] == f"Pod resize completed: {summary}"


async def test_a_memory_request_resize_is_reported_as_actuated(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """No cgroup holds a memory request: the status shows the one last actuated (Go fills it from the
    actuated state), not the previous status's."""
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock):
        api.create_pod(manifest("web", {"app": {"resources": resources("25m", "40Mi")}}))
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "web"))
        assert api_container(api, "web", "app")["resources"] == {"requests": {"cpu": "25m", "memory": "40Mi"}}

        resize(api, "web", {"app": resources("25m", "35Mi")})

        def reported() -> bool:
            return (api_container(api, "web", "app").get("resources") or {}).get("requests") == {
                "cpu": "25m",
                "memory": "35Mi",
            }

        with trio.fail_after(30):
            await api.wait_for(reported)
        assert api_container(api, "web", "app")["restartCount"] == 0


async def test_memory_resize_with_restart_container_restarts_only_that_container(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = WallClock()
    policy = [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock) as node:
        small = resources("100m", "64Mi", limit_cpu="100m", limit_memory="64Mi")
        api.create_pod(
            manifest(
                "db",
                {"app": {"resources": small, "resizePolicy": policy}, "side": {"resources": small}},
            )
        )
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "db", "app") and running(api, "db", "side"))
        big = resources("100m", "128Mi", limit_cpu="100m", limit_memory="128Mi")
        resize(api, "db", {"app": big})
        with trio.fail_after(60):
            await api.wait_for(
                lambda: running(api, "db", "app") and resize_done(api, "db", "app", "memory", "128Mi")
            )
        assert api_container(api, "db", "app")["restartCount"] == 1
        assert api_container(api, "db", "side")["restartCount"] == 0
        assert api_container(api, "db", "side")["resources"]["limits"]["memory"] == "64Mi"
        assert node.sim.resource_updates == []  # a restart, not an update


async def test_a_resize_that_does_not_fit_is_deferred_until_room_frees_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock) as node:
        api.create_pod(manifest("grow", {"app": {"resources": resources("1")}}))
        await trio.sleep(1)
        api.create_pod(
            manifest("big", {"app": {"resources": resources("2500m")}}, terminationGracePeriodSeconds=1)
        )
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "grow") and running(api, "big"))
        resize(api, "grow", {"app": resources("2")})
        with trio.fail_after(30):
            await api.wait_for(lambda: "PodResizePending" in conditions(api, "grow"))
        pending = conditions(api, "grow")["PodResizePending"]
        assert pending["reason"] == "Deferred"
        assert pending["message"] == (
            "Node didn't have enough resource: cpu, requested: 2000, used: 2500, capacity: 4000"
        )
        assert pending["observedGeneration"] == 2
        assert api_container(api, "grow", "app")["allocatedResources"] == {"cpu": "1"}
        assert node.sim.resource_updates == []
        # eviction ranks pods by what they were admitted with (Go getAllocatedPods), not the pending resize
        ranked = {p.name: p for p in node.kubelet._eviction_manager.active_pods()}
        app = ranked["grow"].spec.containers[0]  # type: ignore[union-attr, index]
        assert app.resources.requests["cpu"].milli_value() == 1000  # type: ignore[union-attr, index]
        (deferred,) = [e for e in api.events() if e["reason"] == "ResizeDeferred"]
        assert deferred["type"] == "Warning"
        assert deferred["message"] == (
            'Pod resize Deferred: {"containers":[{"name":"app","resources":{"requests":{"cpu":"2"}}}],'
            '"generation":2,"error":"Node didn\'t have enough resource: cpu, requested: 2000, used: 2500, '
            'capacity: 4000"}'
        )

        api.store.delete("pods", "default", "big")
        with trio.fail_after(60):
            await api.wait_for(
                lambda: (
                    not api.has_pod("big")
                    and api_container(api, "grow", "app").get("allocatedResources") == {"cpu": "2"}
                    and not {"PodResizePending", "PodResizeInProgress"} & set(conditions(api, "grow"))
                )
            )
        assert api_container(api, "grow", "app")["restartCount"] == 0
        assert api_container(api, "grow", "app")["resources"]["requests"] == {"cpu": "2"}
        assert len(node.sim.resource_updates) == 1


async def test_kubelet_restart_keeps_the_allocated_resources(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """A resize deferred before a restart stays deferred after it: the new kubelet admits the pods with
    what was allocated (``allocated_pods_state``), not with the resized spec (which would not fit)."""
    clock = WallClock()
    root = str(tmp_path / "root")
    async with open_fake_api(now=clock.now) as api:
        async with open_api_node(api, clock=clock, root_dir=root) as node:
            sim = node.sim
            api.create_pod(manifest("grow", {"app": {"resources": resources("1")}}))
            await trio.sleep(1)
            api.create_pod(manifest("big", {"app": {"resources": resources("2500m")}}))
            with trio.fail_after(30):
                await api.wait_for(lambda: running(api, "grow") and running(api, "big"))
            resize(api, "grow", {"app": resources("2")})
            with trio.fail_after(30):
                await api.wait_for(lambda: "PodResizePending" in conditions(api, "grow"))
        assert (tmp_path / "root" / "allocated_pods_state").exists()
        await trio.sleep(5)
        async with open_api_node(api, clock=clock, root_dir=root, sim=sim):
            await trio.sleep(30)
            assert phase(api, "big") == "Running" and phase(api, "grow") == "Running"
            pending = conditions(api, "grow")["PodResizePending"]
            assert pending["reason"] == "Deferred"
            assert api_container(api, "grow", "app")["allocatedResources"] == {"cpu": "1"}
            assert api_container(api, "grow", "app")["restartCount"] == 0
            assert sim.resource_updates == []


async def test_a_memory_limit_below_usage_is_refused(autojump_clock: trio.testing.MockClock) -> None:
    """Go ``validateMemoryResizeAction``: the resize is allocated but not actuated; PodResizeInProgress
    says why (reason Error) and the container keeps its limit."""
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock) as node:
        body = manifest("mem", {"app": {"resources": resources("100m", "256Mi", limit_memory="256Mi")}})
        body["metadata"]["annotations"]["sim.kubelet-trio.io/usage.app"] = "memory=100Mi"
        api.create_pod(body)
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "mem"))
        resize(api, "mem", {"app": resources("100m", "64Mi", limit_memory="64Mi")})
        with trio.fail_after(30):
            await api.wait_for(
                lambda: conditions(api, "mem").get("PodResizeInProgress", {}).get("reason") == "Error"
            )
        condition = conditions(api, "mem")["PodResizeInProgress"]
        assert condition["message"] == (
            'cannot decrease memory limits: attempting to set container "app" memory limit (67108864) '
            "below current usage (104857600)"
        )
        assert condition["observedGeneration"] == 2
        status = api_container(api, "mem", "app")
        assert status["allocatedResources"] == {"cpu": "100m", "memory": "64Mi"}
        assert status["resources"]["limits"] == {"memory": "256Mi"}
        assert node.sim.resource_updates == []


async def test_a_sidecar_is_resized_in_place(autojump_clock: trio.testing.MockClock) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock) as node:
        body = manifest("side", {"app": {"resources": resources("100m", limit_cpu="100m")}})
        body["metadata"]["annotations"]["sim.kubelet-trio.io/proxy"] = "run"
        body["spec"]["initContainers"] = [
            {
                "name": "proxy",
                "image": body["spec"]["containers"][0]["image"],
                "restartPolicy": "Always",
                "resources": resources("100m", limit_cpu="100m"),
            }
        ]
        api.create_pod(body)
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "side"))
        patch = {
            "spec": {"initContainers": [{"name": "proxy", "resources": resources("200m", limit_cpu="300m")}]}
        }
        api.store.patch("pods", "default", "side", patch, "resize")

        def done() -> bool:
            statuses = api.pod("side")["status"].get("initContainerStatuses") or ()
            proxy = next((s for s in statuses if s["name"] == "proxy"), {})
            limits = (proxy.get("resources") or {}).get("limits") or {}
            return limits.get("cpu") == "300m" and "PodResizeInProgress" not in conditions(api, "side")

        with trio.fail_after(30):
            await api.wait_for(done)
        statuses = api.pod("side")["status"]["initContainerStatuses"]
        assert statuses[0]["restartCount"] == 0
        assert statuses[0]["allocatedResources"] == {"cpu": "200m"}
        assert len(node.sim.resource_updates) == 1
