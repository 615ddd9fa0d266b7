"""Eviction in API-server mode on SimRuntime and the in-process fake API (MockClock): the Node object shows
MemoryPressure with Go's reason while the pressure lasts and for the transition period after it, with an
event per transition; the evicted pod's status reaches the API as Failed/Evicted with an event."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from kubelet_trio.apimode import ApiModeOptions
from kubelet_trio.clock import WallClock
from kubelet_trio.eviction import MEMORY_AVAILABLE, SimulatedSignals
from kubelet_trio.sim.usage import USAGE_ANNOTATION_PREFIX
from kubelet_trio.testing.apinode import MACHINE, open_api_node
from kubelet_trio.testing.fakeapi import FakeApi, open_fake_api
from kubelet_trio.testing.pods import pod_manifest

MI = 1 << 20


def memory_pressure(api: FakeApi) -> tuple[str, str] | None:
    for condition in api.node("node-1")["status"].get("conditions") or ():
        if condition["type"] == "MemoryPressure":
            return condition["status"], condition["reason"]
    return None


def node_event_reasons(api: FakeApi) -> list[str]:
    return [e["reason"] for e in api.events() if e["involvedObject"].get("kind") == "Node"]


def node_event_count(api: FakeApi, reason: str) -> int:
    return sum(
        e.get("count", 1)
        for e in api.events()
        if e["involvedObject"].get("kind") == "Node" and e["reason"] == reason
    )


def hog(name: str, memory: str) -> dict[str, Any]:
    manifest = pod_manifest(name, {"main": "run"}, node="node-1")
    manifest["metadata"]["annotations"][USAGE_ANNOTATION_PREFIX + "main"] = f"memory={memory}"
    return manifest


async def test_the_node_reports_memory_pressure_and_the_pod_is_evicted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = WallClock()
    options = ApiModeOptions(machine=MACHINE)
    async with (
        open_fake_api(now=clock.now) as api,
        open_api_node(
            api,
            clock=clock,
            options=options,
            eviction_hard={"memory.available": "100Mi"},
            eviction_pressure_transition_period=60.0,
        ) as node,
    ):
        signals = node.kubelet._eviction_manager.signals
        assert isinstance(signals, SimulatedSignals)  # a simulated node's default: no pressure
        api.create_pod(hog("big", "400Mi"))
        api.create_pod(hog("small", "10Mi"))
        with trio.fail_after(30):
            await api.wait_for(
                lambda: all(api.pod(n)["status"].get("phase") == "Running" for n in ("big", "small"))
            )
            await api.wait_for(lambda: memory_pressure(api) == ("False", "KubeletHasSufficientMemory"))

        signals.set(MEMORY_AVAILABLE, 50 * MI)
        start = trio.current_time()
        with trio.fail_after(30):
            await api.wait_for(lambda: api.pod("big")["status"].get("phase") == "Failed")
        signals.set(MEMORY_AVAILABLE, 4096 * MI)  # the big pod's memory is back
        status = api.pod("big")["status"]
        assert status["reason"] == "Evicted"
        assert status["message"].startswith(
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
            "Container main was using 400Mi, request is 0, has larger consumption of memory. "
        )

        def pod_events() -> list[tuple[str, str]]:
            return [
                (e["type"], e["reason"]) for e in api.events() if e["involvedObject"].get("name") == "big"
            ]

        with trio.fail_after(5):  # events are posted in the background, apart from the status
            await api.wait_for(lambda: ("Warning", "Evicted") in pod_events())
        with trio.fail_after(30):
            await api.wait_for(lambda: memory_pressure(api) == ("True", "KubeletHasInsufficientMemory"))
        assert trio.current_time() - start <= 20.0  # one monitoring round, one status update
        with trio.fail_after(5):  # events are posted in the background
            await api.wait_for(lambda: "NodeHasInsufficientMemory" in node_event_reasons(api))
        assert "EvictionThresholdMet" in node_event_reasons(api)

        with trio.fail_after(120):
            await api.wait_for(lambda: memory_pressure(api) == ("False", "KubeletHasSufficientMemory"))
        # reported for the 60 s transition period after the last observation, plus a round and an update
        assert 60.0 <= trio.current_time() - start <= 90.0
        with trio.fail_after(5):  # at registration and at relief (one Event, counted twice)
            await api.wait_for(lambda: node_event_count(api, "NodeHasSufficientMemory") == 2)
        assert api.pod("small")["status"]["phase"] == "Running"
