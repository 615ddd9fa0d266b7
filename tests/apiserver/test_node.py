"""Node registration, status cadence and the Lease, on SimRuntime + the in-process fake API (MockClock)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from kubelet_trio.apimode import KUBELET_VERSION, ApiModeOptions
from kubelet_trio.clock import WallClock
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.testing.fakeapi import open_fake_api
from tests.apiserver.harness import MACHINE, open_api_node


def conditions(node: dict) -> dict[str, dict]:
    return {c["type"]: c for c in node["status"]["conditions"]}


async def test_registers_a_ready_node_with_a_lease(autojump_clock: trio.testing.MockClock) -> None:
    clock = WallClock()
    options = ApiModeOptions(
        machine=MACHINE, node_labels={"tier": "edge"}, kube_reserved={"cpu": "500m", "memory": "1Gi"}
    )
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock, options=options) as node:
        with trio.fail_after(5):
            await api.wait_for(lambda: api.store.list("leases", "kube-node-lease")["items"] != [])
        obj = api.node("node-1")
        labels = obj["metadata"]["labels"]
        assert labels["kubernetes.io/hostname"] == "node-1"
        assert labels["kubernetes.io/os"] == "linux" and labels["kubernetes.io/arch"] == "amd64"
        assert labels["tier"] == "edge"
        status = obj["status"]
        assert status["capacity"] == {
            "cpu": "4",
            "memory": "8Gi",
            "ephemeral-storage": "100Gi",
            "pods": "110",
            "hugepages-1Gi": "0",
            "hugepages-2Mi": "0",
        }
        assert status["allocatable"]["cpu"] == "3500m"
        assert status["allocatable"]["memory"] == "7068Mi"  # 8Gi - 1Gi - 100Mi eviction threshold
        assert status["allocatable"]["ephemeral-storage"] == "90Gi"  # 100Gi - 10%
        assert status["addresses"] == [
            {"type": "InternalIP", "address": "192.0.2.10"},
            {"type": "Hostname", "address": "node-1"},
        ]
        assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10250}}
        info = status["nodeInfo"]
        assert info["containerRuntimeVersion"].startswith("kubelet-trio-sim://")
        assert info["kubeletVersion"] == KUBELET_VERSION
        assert info["bootID"] == MACHINE.boot_id and info["machineID"] == MACHINE.machine_id
        assert info["osImage"] == MACHINE.os_image and info["kernelVersion"] == "6.1.0-test"
        conds = conditions(obj)
        assert conds["Ready"]["status"] == "True" and conds["Ready"]["reason"] == "KubeletReady"
        assert conds["MemoryPressure"]["reason"] == "KubeletHasSufficientMemory"
        assert conds["DiskPressure"]["reason"] == "KubeletHasNoDiskPressure"
        assert conds["PIDPressure"]["reason"] == "KubeletHasSufficientPID"
        assert all(conds[t]["status"] == "False" for t in ("MemoryPressure", "DiskPressure", "PIDPressure"))
        lease = api.lease("node-1")
        assert lease["spec"]["holderIdentity"] == "node-1"
        assert lease["spec"]["leaseDurationSeconds"] == 40
        assert lease["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": obj["metadata"]["uid"]}
        ]
        first = lease["spec"]["renewTime"]
        await trio.sleep(30)
        renewals = api.app.requests_for("PUT", r"/leases/node-1$")
        assert len(renewals) >= 2
        assert api.lease("node-1")["spec"]["renewTime"] > first
        assert node.mode.lease.renewals >= 3


async def test_status_is_patched_on_change_or_every_five_minutes(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock):
        with trio.fail_after(5):
            await api.wait_for(lambda: "conditions" in api.node("node-1").get("status", {}))
        await trio.sleep(1)
        start = len(api.app.requests_for("PATCH", r"/nodes/node-1/status$"))
        await trio.sleep(100)  # ten syncs, nothing changes: heartbeats alone are not reported
        assert len(api.app.requests_for("PATCH", r"/nodes/node-1/status$")) == start
        await trio.sleep(200)  # past 5 minutes since the last report
        assert len(api.app.requests_for("PATCH", r"/nodes/node-1/status$")) == start + 1

        # A real change (the runtime goes down) is reported at the next sync, as NotReady.
        async def runtime_down(self: SimRuntime, verbose: bool = False) -> None:
            raise RuntimeError("test outage")

        monkeypatch.setattr(SimRuntime, "status", runtime_down)
        await trio.sleep(15)  # the runtime check (5 s) notices, the next node sync (10 s) reports
        ready = conditions(api.node("node-1"))["Ready"]
        assert ready["status"] == "False" and ready["reason"] == "KubeletNotReady"
        assert ready["message"] == "container runtime is down: test outage"
        assert len(api.app.requests_for("PATCH", r"/nodes/node-1/status$")) == start + 2

        # Node events: each condition as it appears, then the Ready transition (Go's setters).
        await trio.sleep(2)  # the event recorder's flush
        node_events = [
            (e["reason"], e["message"], e["count"])
            for e in sorted(api.events("default"), key=lambda e: int(e["metadata"]["resourceVersion"]))
            if e["involvedObject"]["kind"] == "Node"
        ]
        assert node_events == [
            ("Starting", "Starting kubelet.", 1),
            *(
                (reason, f"Node node-1 status is now: {reason}", 1)
                for reason in (
                    "NodeHasSufficientMemory",
                    "NodeHasNoDiskPressure",
                    "NodeHasSufficientPID",
                    "NodeNotReady",  # Ready was True from the start: only its change is an event (Go)
                )
            ),
        ]


async def test_reregistration_keeps_labels_and_taints_it_does_not_own(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api:
        api.store.create(
            "nodes",
            None,
            {
                "metadata": {"name": "node-1", "labels": {"team": "a", "kubernetes.io/hostname": "old"}},
                "spec": {"taints": [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}]},
                "status": {
                    "conditions": [
                        {"type": "NetworkUnavailable", "status": "False", "reason": "RouteCreated"}
                    ]
                },
            },
        )
        async with open_api_node(api, clock=clock):
            with trio.fail_after(5):
                await api.wait_for(lambda: "Ready" in conditions(api.node("node-1")))
            obj = api.node("node-1")
            assert obj["metadata"]["labels"]["team"] == "a"
            assert obj["metadata"]["labels"]["kubernetes.io/hostname"] == "node-1"
            assert obj["spec"]["taints"] == [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}]
            assert conditions(obj)["NetworkUnavailable"]["reason"] == "RouteCreated"  # not ours: kept
