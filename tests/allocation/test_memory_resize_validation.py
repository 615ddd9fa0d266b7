"""The memory-limit check before a resize (Go ``validateMemoryResizeAction``), against a runtime that, as
containerd 1.6 does, has no stats for a container whose task is gone."""

from __future__ import annotations

from typing import Any

import pytest

from kubelet_trio.api import Pod
from kubelet_trio.container.types import ContainerState, ContainerStatus, PodStatus
from kubelet_trio.cri import errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.kuberuntime.resize import ResizeError, validate_memory_resize

MI = 1024 * 1024


class Runtime:
    """Stats by container id; a killed container's raise as containerd's do."""

    def __init__(self, usage: dict[str, int], gone: set[str]) -> None:
        self.usage = usage
        self.gone = gone

    async def container_stats(self, container_id: str) -> pb.ContainerStats:
        if container_id in self.gone:
            raise errors.CriCallError("ContainerStats", "unexpected metrics response: []")
        return pb.ContainerStats(memory=pb.MemoryUsage(usage_bytes=pb.UInt64Value(self.usage[container_id])))


POD = Pod.from_dict({"metadata": {"name": "db", "uid": "u1"}, "spec": {"containers": [{"name": "app"}]}})
STATUS = PodStatus(
    uid="u1",
    container_statuses=(
        ContainerStatus(id="c-app", name="app", state=ContainerState.RUNNING),
        ContainerStatus(id="c-side", name="side", state=ContainerState.RUNNING),
    ),
)


async def check(runtime: Any, desired_pod_memory: int, killed: set[str]) -> None:
    await validate_memory_resize(runtime, POD, STATUS, 128 * MI, desired_pod_memory, (), True, killed=killed)


async def test_a_container_restarted_for_its_resize_is_not_asked_for_its_usage() -> None:
    """RestartContainer for memory, pod limit decreasing: the container was stopped earlier in this sync,
    so only the others' usage counts (asking containerd for the stopped one's failed the resize)."""
    runtime = Runtime({"c-side": 20 * MI}, gone={"c-app"})
    await check(runtime, 96 * MI, killed={"c-app"})
    with pytest.raises(errors.CriCallError):  # the old behaviour: every container of the old status
        await check(runtime, 96 * MI, killed=set())


async def test_the_pod_limit_still_may_not_go_below_the_usage_of_the_containers_that_stay() -> None:
    runtime = Runtime({"c-side": 100 * MI}, gone={"c-app"})
    with pytest.raises(
        ResizeError, match=r"pod memory limit \(100663296\) below current usage \(104857600\)"
    ):
        await check(runtime, 96 * MI, killed={"c-app"})
