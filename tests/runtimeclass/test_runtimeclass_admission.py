"""Admission and RuntimeClasses: ``spec.overhead`` in the resource fit, and the standalone rejection of a
``runtimeClassName`` (unit, and on a node under MockClock)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.testing

from kubelet_trio.api import Pod, default_pod
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.lifecycle.predicate import (
    RUNTIME_CLASS_NOT_SUPPORTED,
    NodeView,
    PredicateAdmitHandler,
    admit_standalone,
    pod_requests,
)
from kubelet_trio.logs import format_fields
from kubelet_trio.testing.node import open_sim_node

NODE = NodeView("node-1", {"cpu": "2", "memory": "1Gi", "pods": "10"})


def pod(name: str, *, cpu: str | None = None, **spec: Any) -> Pod:
    resources = {"requests": {"cpu": cpu}} if cpu else {}
    body = {
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": resources}], **spec},
    }
    return default_pod(Pod.from_dict(body))


def test_overhead_is_added_to_the_pod_requests() -> None:
    p = pod(
        "vm",
        cpu="250m",
        overhead={"cpu": "250m", "memory": "120Mi", "example.com/gpu": "1"},
        initContainers=[{"name": "init", "image": "i", "resources": {"requests": {"cpu": "1"}}}],
    )
    # max(app containers 250m, init container 1000m) + 250m of overhead; only checked resources count.
    assert pod_requests(p) == {"cpu": 1250, "memory": 120 * 1024**2}


def test_overhead_counts_for_the_new_pod_and_the_running_ones() -> None:
    admit = PredicateAdmitHandler(lambda: NODE)
    assert admit(pod("fits", cpu="1500m"), [pod("vm", overhead={"cpu": "500m"})]) is None
    rejection = admit(
        pod("new", cpu="1", overhead={"cpu": "600m"}), [pod("vm", cpu="1", overhead={"cpu": "500m"})]
    )
    assert rejection is not None and rejection.reason == "OutOfcpu"
    assert (
        rejection.message
        == "Node didn't have enough resource: cpu, requested: 1600, used: 1500, capacity: 2000"
    )
    # Overhead alone (no container requests) is still a request.
    memory = admit(pod("m", overhead={"memory": "2Gi"}), [])
    assert memory is not None and memory.reason == "OutOfmemory"


def test_standalone_admission_refuses_only_a_runtime_class() -> None:
    assert admit_standalone(pod("plain"), []) is None
    rejection = admit_standalone(pod("vm", runtimeClassName="gvisor"), [])
    assert (
        rejection is not None
        and rejection.reason == RUNTIME_CLASS_NOT_SUPPORTED == "RuntimeClassNotSupported"
    )
    assert rejection.message == (
        'spec.runtimeClassName "gvisor" cannot be resolved: this kubelet runs without an API server, '
        "and RuntimeClasses (node.k8s.io/v1) come from one"
    )


async def test_standalone_node_rejects_a_pod_naming_a_runtime_class(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kubelet_trio.kubelet")
    async with open_sim_node() as node:
        vm, plain = await node.apply(
            {
                "metadata": {"name": "vm"},
                "spec": {
                    "runtimeClassName": "kata",
                    "containers": [{"name": "app", "image": "registry.sim/a:1"}],
                },
            },
            {
                "metadata": {"name": "plain"},
                "spec": {"containers": [{"name": "app", "image": "registry.sim/a:1"}]},
            },
        )
        with trio.fail_after(30):
            status = await node.wait_for_phase(vm, "Failed")
            await node.wait_for_phase(plain, "Running")
        assert status.reason == "RuntimeClassNotSupported"
        assert status.message == (
            'Pod was rejected: spec.runtimeClassName "kata" cannot be resolved: this kubelet runs without an '
            "API server, and RuntimeClasses (node.k8s.io/v1) come from one"
        )
        # Never started: the runtime has only the other pod's sandbox.
        sandboxes = await node.sim.list_pod_sandbox(pb.PodSandboxFilter())
        assert [s.metadata.name for s in sandboxes if s.metadata] == ["plain"]
        await trio.sleep(60)
        assert node.status(vm).phase == "Failed"  # type: ignore[union-attr]
    lines = [(r, f"{r.getMessage()} {format_fields(r)}") for r in caplog.records]
    rejected = [(r, line) for r, line in lines if line.startswith("pod rejected pod=default/vm ")]
    assert len(rejected) == 1 and rejected[0][0].levelno == logging.WARNING
    assert "reason=RuntimeClassNotSupported" in rejected[0][1]
