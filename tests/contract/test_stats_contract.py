"""The container stats contract: what the stats provider reads from ListContainerStats."""

from __future__ import annotations

from kubelet_trio.cri.gen.runtime import v1 as pb
from tests.contract.targets import EXIT_0, FOREVER, TEST_LABEL, Target, eventually_status, exited, running


async def test_container_stats_of_running_and_exited_containers(target: Target) -> None:
    rt = target.runtime
    sandbox_id, config = await target.new_sandbox({"app": FOREVER, "job": EXIT_0})
    app = await target.new_container(sandbox_id, config, "app", FOREVER)
    job = await target.new_container(sandbox_id, config, "job", EXIT_0)
    await eventually_status(rt, app, running)
    await eventually_status(rt, job, exited)

    listed = await rt.list_container_stats(pb.ContainerStatsFilter(pod_sandbox_id=sandbox_id))
    by_id = {s.attributes.id: s for s in listed if s.attributes is not None}
    assert set(by_id) == {app, job}
    running_stats, exited_stats = by_id[app], by_id[job]
    assert running_stats.attributes is not None and running_stats.attributes.metadata is not None
    assert running_stats.attributes.metadata.name == "app"
    assert running_stats.attributes.labels[TEST_LABEL] == "1"
    assert running_stats.cpu is not None and running_stats.cpu.usage_core_nano_seconds is not None
    assert running_stats.cpu.timestamp > 0
    assert running_stats.memory is not None and running_stats.memory.working_set_bytes is not None
    assert running_stats.writable_layer is not None and running_stats.writable_layer.used_bytes is not None
    # An exited container has no cgroup to read: no CPU or memory, still its writable layer.
    assert exited_stats.cpu is None or exited_stats.cpu.usage_core_nano_seconds is None
    assert exited_stats.memory is None or exited_stats.memory.working_set_bytes is None
    assert exited_stats.writable_layer is not None

    one = await rt.list_container_stats(pb.ContainerStatsFilter(id=app))
    assert [s.attributes.id for s in one if s.attributes] == [app]
    labelled = await rt.list_container_stats(pb.ContainerStatsFilter(label_selector={"nope": "x"}))
    assert labelled == []
