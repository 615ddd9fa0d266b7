"""Actuating a resize: the pod cgroup grows before its containers and shrinks after them (Go
``doPodResizeAction``), and the resize decisions of ``compute_pod_actions``."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from kubelet_trio.api import Pod, Quantity, default_pod
from kubelet_trio.api.container import ResourceRequirements
from kubelet_trio.clock import WallClock
from kubelet_trio.cm.helpers import ResourceConfig, resource_config_for_pod
from kubelet_trio.container.hash import hash_container
from kubelet_trio.container.types import ContainerState, ContainerStatus, PodStatus, SandboxStatus
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.kuberuntime import KubeRuntimeManager
from kubelet_trio.kuberuntime.actions import compute_pod_actions


def pod(cpu: str, limit_cpu: str, *, policy: str = "NotRequired") -> Pod:
    body = {
        "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "i",
                    "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": limit_cpu}},
                    "resizePolicy": [{"resourceName": "cpu", "restartPolicy": policy}],
                }
            ]
        },
    }
    return default_pod(Pod.from_dict(body))


STATUS = PodStatus(
    uid="u1",
    name="web",
    namespace="default",
    container_statuses=(
        ContainerStatus(
            id="c1",
            name="app",
            state=ContainerState.RUNNING,
            hash=hash_container(pod("1", "1").spec.containers[0]),
        ),  # type: ignore[union-attr,index]
    ),
    sandbox_statuses=(SandboxStatus(id="s1", attempt=0, ready=True, ip="10.0.0.2"),),
)


def actuated(cpu: str, limit: str) -> ResourceRequirements:
    return ResourceRequirements(requests={"cpu": Quantity(cpu)}, limits={"cpu": Quantity(limit)})


def test_not_required_updates_in_place() -> None:
    actions = compute_pod_actions(pod("300m", "400m"), STATUS, actuated=lambda name: actuated("100m", "200m"))
    assert not actions.containers_to_kill and not actions.containers_to_start
    (update,) = actions.containers_to_update["cpu"]
    assert (update.container_id, update.desired.cpu_limit, update.current.cpu_limit) == ("c1", 400, 200)


def test_restart_container_restarts_it() -> None:
    actions = compute_pod_actions(
        pod("300m", "400m", policy="RestartContainer"), STATUS, actuated=lambda name: actuated("100m", "200m")
    )
    assert actions.containers_to_kill["c1"].message == "Container app resize requires restart"
    assert actions.containers_to_start == (0,)
    assert actions.update_pod_resources and not actions.containers_to_update
    assert not actions.kill_pod


@attrs.define
class Log:
    calls: list[tuple[str, Any]] = attrs.Factory(list)


@attrs.define
class FakeCgroups:
    log: Log

    def resource_config(self, pod: Pod) -> ResourceConfig:
        return resource_config_for_pod(pod, enforce_cpu_limits=True)

    async def set_pod_cgroup_config(self, pod: Pod, config: ResourceConfig) -> None:
        self.log.calls.append(("cgroup", (config.cpu_quota, config.cpu_shares)))


@attrs.define
class FakeRuntime:
    log: Log

    async def update_container_resources(self, container_id: str, linux: pb.LinuxContainerResources) -> None:
        self.log.calls.append(("container", (linux.cpu_quota, linux.cpu_shares)))


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (
            ("100m", "200m"),
            ("300m", "400m"),
            [("cgroup", (40000, None)), ("cgroup", (None, 307)), ("container", (40000, 307))],
        ),
        (
            ("300m", "400m"),
            ("100m", "200m"),
            [("container", (20000, 102)), ("cgroup", (None, 102)), ("cgroup", (20000, None))],
        ),
    ],
)
async def test_pod_cgroup_grows_first_and_shrinks_last(
    before: tuple[str, str], after: tuple[str, str], expected: list[tuple[str, Any]]
) -> None:
    log = Log()
    manager = KubeRuntimeManager(
        FakeRuntime(log),  # type: ignore[arg-type]
        node_name="n",
        clock=WallClock(),
        pod_cgroups=FakeCgroups(log),
    )
    manager.actuated.set_container("u1", "app", actuated(*before))
    resized = pod(*after)
    actions = manager.compute_pod_actions(resized, STATUS)
    step = await manager._do_pod_resize(resized, STATUS, actions)
    assert not step.error, step.message
    assert log.calls == expected
    assert manager.actuated.get_container("u1", "app") == actuated(*after)
    assert not manager.is_pod_resize_in_progress(resized, STATUS)
