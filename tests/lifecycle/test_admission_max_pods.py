"""``maxPods`` without an API server: admission counts the active pods, as Go's standalone kubelet does
against its initial Node (allocatable pods = maxPods), and rejects a pod beyond it with ``OutOfpods``
(``lifecycle/predicate.go``; the scheduler's fit: "Node didn't have enough resource: pods, ...")."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.testing

from kubelet_trio.api import Pod
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.lifecycle.predicate import admit_pod_count
from kubelet_trio.logs import record_fields
from kubelet_trio.testing.node import open_sim_node

OUT_OF_PODS = "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"


def manifest(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "annotations": {"sim.kubelet-trio.io/app": "run"}},
        "spec": {"containers": [{"name": "app", "image": "registry.sim/busybox:1.36"}]},
    }


def test_the_pod_count_is_the_fit_s_first_check() -> None:
    a, b = Pod.from_dict(manifest("a")), Pod.from_dict(manifest("b"))
    assert admit_pod_count(2, [a]) is None
    rejection = admit_pod_count(2, [a, b])
    assert rejection is not None and (rejection.reason, rejection.message) == ("OutOfpods", OUT_OF_PODS)
    nothing = admit_pod_count(0, [])
    assert nothing is not None and nothing.message == (
        "Node didn't have enough resource: pods, requested: 1, used: 0, capacity: 0"
    )


async def test_max_pods_2_runs_two_and_rejects_the_third(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kubelet_trio.kubelet")
    events: list[tuple[str, str, str, str]] = []

    def sink(pod: Pod, type_: str, reason: str, message: str) -> None:
        events.append((pod.name, type_, reason, message))

    async with open_sim_node(max_pods=2, event_sink=sink) as node:
        first, second, third = await node.apply(manifest("a"), manifest("b"), manifest("c"))
        with trio.fail_after(60):
            rejected = await node.wait_for_phase(third, "Failed")
            await node.wait_for_phase(first, "Running")
            await node.wait_for_phase(second, "Running")
        assert (rejected.reason, rejected.message) == ("OutOfpods", f"Pod was rejected: {OUT_OF_PODS}")
        sandboxes = await node.sim.list_pod_sandbox(pb.PodSandboxFilter())
        assert sorted(s.metadata.name for s in sandboxes if s.metadata) == ["a", "b"]  # never started
        assert ("c", "Warning", "OutOfpods", OUT_OF_PODS) in events  # the event: the bare message, as Go

        # A pod that leaves frees its place for a new one; the rejected pod stays rejected (Go never
        # retries admission).
        await node.remove(first)
        await node.wait_terminated(first)
        (fourth,) = await node.apply(manifest("d"))
        with trio.fail_after(60):
            await node.wait_for_phase(fourth, "Running")
        assert node.status(third).phase == "Failed"  # type: ignore[union-attr]

    rejections = [record_fields(r) for r in caplog.records if r.getMessage() == "pod rejected"]
    assert [(str(f["pod"]), f["reason"], f["message"]) for f in rejections] == [
        ("default/c", "OutOfpods", OUT_OF_PODS)
    ]
    assert all(r.levelno == logging.WARNING for r in caplog.records if r.getMessage() == "pod rejected")


async def test_an_embedded_node_has_no_pod_limit_unless_given_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_sim_node() as node:
        assert node.kubelet.config.max_pods is None
        pods = await node.apply(*(manifest(f"p{i}") for i in range(3)))
        with trio.fail_after(60):
            for pod in pods:
                await node.wait_for_phase(pod, "Running")


async def test_a_terminating_pod_still_counts_against_max_pods(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Go ``filterOutInactivePods``: a pod being terminated holds its place until it is terminated, so a
    pod added meanwhile is admitted against it (a churning node at its limit rejects, as Go's does)."""
    stubborn = manifest("a")
    stubborn["metadata"]["annotations"]["sim.kubelet-trio.io/app"] = "ignore-sigterm"
    stubborn["spec"]["terminationGracePeriodSeconds"] = 30
    async with open_sim_node(max_pods=1) as node:
        (first,) = await node.apply(stubborn)
        with trio.fail_after(60):
            await node.wait_for_phase(first, "Running")
        await node.delete(first, grace_period_seconds=30)
        await trio.sleep(1)  # terminating: SIGTERM sent, ignored
        (second,) = await node.apply(manifest("b"))
        with trio.fail_after(60):
            rejected = await node.wait_for_phase(second, "Failed")
        assert rejected.reason == "OutOfpods"
        assert rejected.message == (
            "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1"
        )

        await node.wait_terminated(first)  # after the grace period: its place is free again
        (third,) = await node.apply(manifest("c"))
        with trio.fail_after(60):
            await node.wait_for_phase(third, "Running")
