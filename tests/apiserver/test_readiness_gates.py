"""Readiness gates (``spec.readinessGates``): conditions another controller writes into the pod's status
decide, with the containers, whether the pod is Ready. The kubelet keeps those conditions and, when one
changes, syncs the pod so that ``Ready`` follows within the upstream spec's 10 s tolerance
(e2e ``Pods should support pod readiness gates``)."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from kubelet_trio.clock import WallClock
from kubelet_trio.testing.fakeapi import FakeApi, open_fake_api
from tests.apiserver.harness import open_api_node, pod_manifest
from tests.apiserver.pod_status import running

GATE_1 = "k8s.io/test-condition1"
GATE_2 = "k8s.io/test-condition2"


def _conditions(api: FakeApi) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in api.pod("gated")["status"].get("conditions") or ()}


def _set_gate(api: FakeApi, gate: str, value: str) -> None:
    """As a controller's status patch does: the other conditions stay as they are."""
    conditions = [c for c in _conditions(api).values() if c["type"] != gate]
    conditions.append({"type": gate, "status": value, "lastTransitionTime": "2026-01-01T00:00:00Z"})
    api.store.patch("pods", "default", "gated", {"status": {"conditions": conditions}}, subresource="status")


async def _ready_within(api: FakeApi, expected: str, seconds: float) -> float:
    start = trio.current_time()
    with trio.fail_after(seconds):
        await api.wait_for(lambda: _conditions(api).get("Ready", {}).get("status") == expected)
    return trio.current_time() - start


async def test_ready_follows_the_readiness_gates(autojump_clock: trio.testing.MockClock) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock):
        manifest = pod_manifest("gated", {"app": "run"})
        manifest["spec"]["readinessGates"] = [{"conditionType": GATE_1}, {"conditionType": GATE_2}]
        api.create_pod(manifest)
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "gated") and "Ready" in _conditions(api))
        await trio.sleep(5)
        ready = _conditions(api)["Ready"]
        assert ready["status"] == "False" and ready["reason"] == "ReadinessGatesNotReady"
        assert _conditions(api)["ContainersReady"]["status"] == "True"
        assert GATE_1 in ready["message"] and GATE_2 in ready["message"]

        _set_gate(api, GATE_1, "True")
        await trio.sleep(15)  # one gate of two: still not Ready, and the gate's condition is kept
        assert _conditions(api)["Ready"]["status"] == "False"
        assert _conditions(api)[GATE_1]["status"] == "True"

        _set_gate(api, GATE_2, "True")
        assert await _ready_within(api, "True", 10) < 2  # at the next sync, not the 10 s status sweep
        assert {_conditions(api)[GATE_1]["status"], _conditions(api)[GATE_2]["status"]} == {"True"}

        _set_gate(api, GATE_1, "False")
        assert await _ready_within(api, "False", 10) < 2
        assert _conditions(api)["Ready"]["reason"] == "ReadinessGatesNotReady"
