"""The allocation manager alone: allocation from the spec, resize admission, the pending queue's order."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from kubelet_trio.allocation import AllocationManager, resize_policy
from kubelet_trio.api import Pod, default_pod
from kubelet_trio.lifecycle.predicate import NodeView, fits


def pod(name: str, cpu: str, *, priority: int = 0, guaranteed: bool = False, generation: int = 1) -> Pod:
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": "64Mi"}}
    if guaranteed:
        resources["limits"] = {"cpu": cpu, "memory": "64Mi"}
    body = {
        "metadata": {"name": name, "namespace": "default", "uid": name, "generation": generation},
        "spec": {
            "priority": priority,
            "containers": [
                {
                    "name": "c",
                    "image": "i",
                    "resources": resources,
                    "resizePolicy": [{"resourceName": "memory", "restartPolicy": "RestartContainer"}],
                }
            ],
        },
    }
    return default_pod(Pod.from_dict(body))


NODE = NodeView("node-1", {"cpu": "4", "memory": "8Gi"})


def manager(pods: dict[str, Pod], **kwargs: Any) -> AllocationManager:
    return AllocationManager(
        checkpoint_dir=None,
        admit=lambda p, others: fits(p, others, NODE),
        active_pods=lambda: list(pods.values()),
        pod_by_uid=pods.get,
        now=lambda: "2026-01-01T00:00:00Z",
        **kwargs,
    )


def test_resize_policy_defaults_to_not_required() -> None:
    container = pod("a", "1").spec.containers[0]  # type: ignore[union-attr,index]
    assert resize_policy(container, "memory") == "RestartContainer"
    assert resize_policy(container, "cpu") == "NotRequired"


async def test_allocation_follows_admission_not_the_spec() -> None:
    pods = {"a": pod("a", "1")}
    am = manager(pods)
    am.add_pod(pods["a"])
    pods["a"] = pod("a", "2", generation=2)
    allocated, pending = am.update_pod_from_allocation(pods["a"])
    assert pending
    assert allocated.spec.containers[0].resources.requests["cpu"].milli_value() == 1000  # type: ignore[union-attr,index]
    assert am.handle_resize(pods["a"])
    assert [c.type for c in am.resize_conditions("a")] == ["PodResizeInProgress"]
    assert am.resize_conditions("a")[0].observed_generation == 2
    assert not am.update_pod_from_allocation(pods["a"])[1]


async def test_infeasible_under_the_static_cpu_manager_policy() -> None:
    pods = {"g": pod("g", "1", guaranteed=True)}
    am = manager(pods, cpu_manager_policy="static")
    am.add_pod(pods["g"])
    pods["g"] = pod("g", "2", guaranteed=True, generation=2)
    assert not am.handle_resize(pods["g"])
    (condition,) = am.resize_conditions("g")
    assert (condition.type, condition.reason, condition.message) == (
        "PodResizePending",
        "Infeasible",
        'Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"',
    )
    assert am.is_infeasible("g") and not am.is_deferred("g")


async def test_pending_resizes_are_retried_in_go_order(autojump_clock: trio.testing.MockClock) -> None:
    """Decreases first, then priority, then Guaranteed, then the oldest pending."""
    pods = {
        "hog": pod("hog", "3500m"),
        "old": pod("old", "100m"),
        "new": pod("new", "100m"),
        "high": pod("high", "100m", priority=10),
        "guaranteed": pod("guaranteed", "100m", guaranteed=True),
        "shrink": pod("shrink", "200m"),
    }
    am = manager(pods)
    for p in pods.values():
        am.add_pod(p)
    order = ["old", "new", "high", "guaranteed", "shrink"]
    for name in order:
        pods[name] = pod(name, "100m" if name == "shrink" else "1", priority=pods[name].spec.priority or 0,  # type: ignore[union-attr]
                         guaranteed=name == "guaranteed", generation=2)  # fmt: skip
        am.push_pending_resize(name)
        am.retry_pending_resizes("test")
        await trio.sleep(1)
    # everything but the decrease is deferred: 3.5 + 0.1 * 4 CPUs are used of 4
    assert {n for n in order if am.is_deferred(n)} == {"old", "new", "high", "guaranteed"}
    am.push_pending_resize("old")  # re-sorts
    assert am._pending == ["high", "guaranteed", "old", "new"]
    pods["hog"] = pod("hog", "100m", generation=2)  # room for exactly two (0.9 CPU each)
    am.push_pending_resize("hog")
    allocated = am.retry_pending_resizes("test")
    assert [p.uid for p in allocated] == ["hog", "high", "guaranteed", "old"]
    assert am._pending == ["new"]
