"""Eviction through a whole node on the simulated runtime: usage from the runtime's stats (annotations),
pressure from simulated signals, the pod killed through its worker, Failed/Evicted with Go's message and
an event, the others left running, BestEffort admission refused while the pressure lasts, and the Node's
conditions."""

from __future__ import annotations

import re

import trio
import trio.testing

from kubelet_trio.clock import WallClock
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.eviction import MEMORY_AVAILABLE, SimulatedSignals
from kubelet_trio.fsio import run_inline
from kubelet_trio.kuberuntime.labels import POD_NAME_LABEL
from kubelet_trio.nodestatus.machine import MachineInfo
from kubelet_trio.nodestatus.setters import NodeStatusConfig, build_status
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.sim.usage import USAGE_ANNOTATION_PREFIX
from kubelet_trio.testing.pods import pod_manifest
from tests.eviction.node import open_eviction_node

MI = 1 << 20
GI = 1 << 30


def _with_usage(manifest: dict[str, object], usage: str) -> dict[str, object]:
    metadata = manifest["metadata"]
    assert isinstance(metadata, dict)
    metadata["annotations"][USAGE_ANNOTATION_PREFIX + "main"] = usage
    return manifest


async def test_memory_pressure_evicts_the_pod_over_its_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = WallClock()
    sim = SimRuntime(clock=clock, run_sync=run_inline)
    signals = SimulatedSignals()
    async with open_eviction_node(
        sim,
        signals,
        clock=clock,
        run_sync=run_inline,
        memory_backed_volumes=False,
        eviction_hard={"memory.available": "100Mi"},
        eviction_pressure_transition_period=30.0,
    ) as node:
        hog = _with_usage(pod_manifest("hog", {"main": "run"}), "memory=300Mi")
        steady = _with_usage(pod_manifest("steady", {"main": "run"}), "memory=50Mi")
        steady["spec"]["containers"][0]["resources"] = {"requests": {"memory": "100Mi"}}  # type: ignore[index]
        hog_pod, steady_pod = await node.apply(hog, steady)
        await node.wait_for_phase(hog_pod, "Running")
        await node.wait_for_phase(steady_pod, "Running")
        start = trio.current_time()

        signals.set(MEMORY_AVAILABLE, 50 * MI, 8 * GI)
        status = await node.wait_for_phase(hog_pod, "Failed")
        evicted_at = trio.current_time()
        signals.set(MEMORY_AVAILABLE, 2 * GI)  # the hog's memory is free again
        assert evicted_at - start <= 10.0  # the next monitoring round
        message = (
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
            "Container main was using 300Mi, request is 0, has larger consumption of memory. "
        )
        assert (status.reason, status.message) == ("Evicted", message)
        disruption = [c for c in status.conditions or () if c.type == "DisruptionTarget"]
        assert [(c.status, c.reason, c.message) for c in disruption] == [
            ("True", "TerminationByKubelet", message)
        ]
        assert ("hog", "Warning", "Evicted", message) in node.events
        await node.kubelet.wait_pod_finished(hog_pod.uid)
        states = {
            (c.labels[POD_NAME_LABEL], c.state is pb.ContainerState.CONTAINER_RUNNING)
            for c in await sim.list_containers()
        }
        assert ("hog", True) not in states and ("steady", True) in states
        assert node.kubelet.status_of(hog_pod.uid).phase == "Failed"  # type: ignore[union-attr]
        await trio.sleep(2)  # the next relist: an evicted pod's dead containers go, as a deleted pod's
        left = [c.labels[POD_NAME_LABEL] for c in await sim.list_containers()]
        assert left == ["steady"]
        assert node.kubelet.node_pressure() == {"MemoryPressure"}  # for the transition period

        # while the pressure is reported a BestEffort pod is refused, a Burstable one admitted
        burstable = pod_manifest("late-burstable", {"main": "run"})
        burstable["spec"]["containers"][0]["resources"] = {"requests": {"memory": "10Mi"}}  # type: ignore[index]
        late_be, late_burstable = await node.apply(pod_manifest("late-be", {"main": "run"}), burstable)
        rejected = await node.wait_for_phase(late_be, "Failed")
        assert (rejected.reason, rejected.message) == (
            "Evicted",
            "Pod was rejected: The node had condition: [MemoryPressure]. ",
        )
        await node.wait_for_phase(late_burstable, "Running")
        # the condition clears once it was last observed a transition period ago (rounds every 10 s)
        await node.kubelet._eviction_manager.conditions.wait_value(frozenset())
        assert 30.0 <= trio.current_time() - evicted_at <= 40.0 + 1.0
        assert node.kubelet.status_of(steady_pod.uid).phase == "Running"  # type: ignore[union-attr]
        (again,) = await node.apply(pod_manifest("late-be-2", {"main": "run"}))
        await node.wait_for_phase(again, "Running")
        await trio.sleep(
            61
        )  # a container GC (every minute): the evicted pod's sandbox goes, though it is desired
        names = {s.metadata.name for s in await sim.list_pod_sandbox()}
        assert "hog" not in names and {"steady", "late-be-2"} <= names


async def test_disk_pressure_collects_dead_containers_before_evicting(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """On one filesystem (no dedicated imagefs) nodefs pressure first removes what the container GC may
    (here a removed pod's stopped containers, long before the minutely GC would); the signal is still low
    afterwards, so a pod is evicted too."""
    clock = WallClock()
    sim = SimRuntime(clock=clock, run_sync=run_inline)
    signals = SimulatedSignals()
    async with open_eviction_node(
        sim,
        signals,
        clock=clock,
        run_sync=run_inline,
        memory_backed_volumes=False,
        eviction_hard={"nodefs.available": "10%"},
        container_gc_period=3600.0,
    ) as node:
        gone, stays = await node.apply(
            pod_manifest("gone", {"main": "run"}), pod_manifest("stays", {"main": "run"})
        )
        await node.wait_for_phase(gone, "Running")
        await node.wait_for_phase(stays, "Running")
        await node.remove(gone)
        await node.kubelet.wait_pod_finished(gone.uid)
        assert {c.labels[POD_NAME_LABEL] for c in await sim.list_containers()} == {"gone", "stays"}

        signals.set("nodefs.available", 50, 1000)
        status = await node.wait_for_phase(stays, "Failed")
        assert status.reason == "Evicted"
        # then its log file (a block or so on disk) over its request of 0
        assert re.fullmatch(
            r"The node was low on resource: ephemeral-storage\. Threshold quantity: 100, available: 50\. "
            r"Container main was using \d+Ki, request is 0, has larger consumption of ephemeral-storage\. ",
            status.message or "",
        )
        assert {c.labels[POD_NAME_LABEL] for c in await sim.list_containers()} == {"stays"}
        assert {s.metadata.name for s in await sim.list_pod_sandbox() if s.metadata} == {"stays"}


def _machine() -> MachineInfo:
    return MachineInfo(
        num_cores=2,
        memory_bytes=8 * GI,
        ephemeral_storage_bytes=100 * GI,
        machine_id="m",
        system_uuid="u",
        boot_id="b",
        kernel_version="6.1",
        os_image="Linux",
        operating_system="linux",
        architecture="amd64",
    )


def test_node_conditions_report_the_pressure_with_gos_reasons() -> None:
    config = NodeStatusConfig(node_name="n", kubelet_version="v1.31.0")
    now = "2026-01-01T00:00:00Z"
    calm = build_status(None, config=config, machine=_machine(), runtime_version="x", errors=[], now=now)
    later = "2026-01-01T00:01:00Z"
    pressed = build_status(
        calm,
        config=config,
        machine=_machine(),
        runtime_version="x",
        errors=[],
        now=later,
        pressure={"DiskPressure"},
    )
    conditions = {c["type"]: c for c in pressed["conditions"]}
    assert {t: (c["status"], c["reason"], c["message"]) for t, c in conditions.items()} == {
        "MemoryPressure": ("False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        "DiskPressure": ("True", "KubeletHasDiskPressure", "kubelet has disk pressure"),
        "PIDPressure": ("False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        "Ready": ("True", "KubeletReady", "kubelet is posting ready status"),
    }
    assert conditions["DiskPressure"]["lastTransitionTime"] == later
    assert conditions["MemoryPressure"]["lastTransitionTime"] == now
    both = build_status(
        pressed,
        config=config,
        machine=_machine(),
        runtime_version="x",
        errors=[],
        now=later,
        pressure={"MemoryPressure", "PIDPressure"},
    )
    shown = {c["type"]: (c["status"], c["reason"]) for c in both["conditions"]}
    assert shown["MemoryPressure"] == ("True", "KubeletHasInsufficientMemory")
    assert shown["PIDPressure"] == ("True", "KubeletHasInsufficientPID")
    assert shown["DiskPressure"] == ("False", "KubeletHasNoDiskPressure")
