"""RuntimeClass on SimRuntime + the in-process fake API server (MockClock): the handler reaches
RunPodSandbox, an unknown handler or a missing class fails sandbox creation with a FailedCreatePodSandBox
event and is retried with the pod worker's backoff, and the class's overhead counts in admission."""

from __future__ import annotations

from typing import Any

import attrs
import trio
import trio.testing

from kubelet_trio.clock import WallClock
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.fsio import run_inline
from kubelet_trio.kuberuntime.labels import POD_UID_LABEL
from kubelet_trio.pod_workers import BACKOFF_PERIOD
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.testing.fakeapi import FakeApi, open_fake_api
from tests.apiserver.harness import open_api_node, pod_manifest
from tests.apiserver.pod_status import api_container, phase, running


@attrs.define(eq=False, kw_only=True)
class RecordingSim(SimRuntime):
    """A SimRuntime that remembers when RunPodSandbox was asked for which handler."""

    sandbox_calls: list[tuple[float, str, str]] = attrs.Factory(list)  # (time, pod name, handler)

    async def run_pod_sandbox(self, config: pb.PodSandboxConfig, runtime_handler: str = "") -> str:
        name = config.metadata.name if config.metadata else ""
        self.sandbox_calls.append((trio.current_time(), name, runtime_handler))
        return await super().run_pod_sandbox(config, runtime_handler)


def sandbox_events(api: FakeApi, pod: str) -> list[dict[str, Any]]:
    return [
        e
        for e in api.events("default")
        if e["reason"] == "FailedCreatePodSandBox" and e["involvedObject"]["name"] == pod
    ]


def waiting_reason(api: FakeApi, pod: str) -> str | None:
    statuses = api.pod(pod).get("status", {}).get("containerStatuses") or ()
    return next((s["state"].get("waiting", {}).get("reason") for s in statuses), None)


async def sandboxes_of(sim: SimRuntime, api: FakeApi, pod: str) -> list[pb.PodSandbox]:
    uid = api.pod(pod)["metadata"]["uid"]
    return await sim.list_pod_sandbox(pb.PodSandboxFilter(label_selector={POD_UID_LABEL: uid}))


async def test_handler_of_the_runtime_class_reaches_run_pod_sandbox(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = WallClock()
    sim = RecordingSim(clock=clock, run_sync=run_inline, runtime_handlers={"runc", "runsc"})
    async with open_fake_api(now=clock.now) as api:
        api.create_runtime_class("gvisor", "runsc")
        async with open_api_node(api, clock=clock, sim=sim) as node:
            api.create_pod(pod_manifest("sandboxed", {"app": "run"}, runtimeClassName="gvisor"))
            api.create_pod(pod_manifest("plain", {"app": "run"}))
            with trio.fail_after(30):
                await api.wait_for(lambda: running(api, "sandboxed") and running(api, "plain"))
            handlers = {name: handler for _, name, handler in sim.sandbox_calls}
            assert handlers == {"sandboxed": "runsc", "plain": ""}
            (sandbox,) = await sandboxes_of(sim, api, "sandboxed")
            assert sandbox.runtime_handler == "runsc"
            status = (await sim.pod_sandbox_status(sandbox.id)).status
            assert status is not None and status.runtime_handler == "runsc"
            # The informer listed the classes once and then only watched.
            assert node.mode.runtime_classes.handlers() == {"gvisor": "runsc"}
            assert node.mode.runtime_classes.lists == 1


async def test_unknown_handler_fails_the_sandbox_and_is_retried_with_backoff(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = WallClock()
    sim = RecordingSim(clock=clock, run_sync=run_inline)
    async with open_fake_api(now=clock.now) as api:
        api.create_runtime_class("kata", "nosuchhandler")
        async with open_api_node(api, clock=clock, sim=sim, jitter=0.0):
            api.create_pod(pod_manifest("vm", {"app": "run"}, runtimeClassName="kata"))
            with trio.fail_after(60):
                await api.wait_for(lambda: [e["count"] for e in sandbox_events(api, "vm")] == [4])
            (event,) = sandbox_events(api, "vm")
            assert event["type"] == "Warning"
            assert event["message"] == (
                "Failed to create pod sandbox: RunPodSandbox: failed to get sandbox runtime: "
                'no runtime for "nosuchhandler" is configured'
            )
            # Each failed sync is retried after the pod worker's backoff (no jitter here).
            first = sim.sandbox_calls[0][0]
            assert [(at - first, handler) for at, _, handler in sim.sandbox_calls] == [
                (n * BACKOFF_PERIOD, "nosuchhandler") for n in range(4)
            ]
            assert phase(api, "vm") == "Pending"
            assert waiting_reason(api, "vm") == "ContainerCreating"
            assert await sandboxes_of(sim, api, "vm") == []


async def test_missing_runtime_class_fails_until_it_is_created(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = WallClock()
    sim = RecordingSim(clock=clock, run_sync=run_inline)
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock, sim=sim, jitter=0.0):
        api.create_pod(pod_manifest("web", {"app": "run"}, runtimeClassName="runc-class"))
        with trio.fail_after(30):
            await api.wait_for(lambda: bool(sandbox_events(api, "web")))
        (event,) = sandbox_events(api, "web")
        assert (
            event["message"]
            == 'Failed to create pod sandbox: runtimeclass.node.k8s.io "runc-class" not found'
        )
        assert waiting_reason(api, "web") == "ContainerCreating"
        assert sim.sandbox_calls == []  # the runtime was never asked

        created_at = trio.current_time()
        api.create_runtime_class("runc-class", "runc")
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "web"))
        # Picked up by the next retry, one backoff period after the failure.
        ((started, _, handler),) = sim.sandbox_calls
        assert handler == "runc"
        assert started - created_at == BACKOFF_PERIOD
        assert phase(api, "web") == "Running"


async def test_runtime_class_overhead_counts_in_admission(autojump_clock: trio.testing.MockClock) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api:
        api.create_runtime_class("heavy", "runc", pod_fixed={"cpu": "3", "memory": "100Mi"})
        async with open_api_node(api, clock=clock):
            # Without overhead both fit the 4-CPU node (0.5 + 1.5); with 3 CPUs each, the second does not.
            small = pod_manifest("small", {"app": "run"}, runtimeClassName="heavy")
            small["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m"}}
            api.create_pod(small)
            assert api.pod("small")["spec"]["overhead"] == {"cpu": "3", "memory": "100Mi"}
            with trio.fail_after(30):
                await api.wait_for(lambda: running(api, "small"))
            big = pod_manifest("big", {"app": "run"}, runtimeClassName="heavy")
            big["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1500m"}}
            api.create_pod(big)
            with trio.fail_after(30):
                await api.wait_for(lambda: phase(api, "big") == "Failed")
            status = api.pod("big")["status"]
            assert status["reason"] == "OutOfcpu"
            assert status["message"] == (
                "Pod was rejected: Node didn't have enough resource: cpu, requested: 4500, used: 3500, "
                "capacity: 4000"
            )
            assert "running" in api_container(api, "small", "app")["state"]
