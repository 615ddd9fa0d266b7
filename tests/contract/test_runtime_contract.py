"""The runtime contract: the same tests against SimRuntime, SimRuntime over a socket, and containerd.

Real-clock tests (containerd runs real processes); each wait carries its own deadline.
"""

from __future__ import annotations

import re

import pytest
import trio

from kubelet_trio.cri import errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from tests.contract.targets import (
    EXEC_SCRIPTED,
    EXIT_0,
    EXIT_3_AFTER_1S,
    FOREVER,
    IGNORES_SIGTERM,
    TEST_LABEL,
    Target,
    eventually_status,
    exited,
    running,
)

CRI_LOG_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)) (stdout|stderr) ([FP]) (.*)$"
)


async def test_version_and_status(target: Target) -> None:
    version = await target.runtime.version()
    assert version.runtime_api_version == "v1"
    assert version.runtime_name
    status = await target.runtime.status()
    assert status.status is not None
    conditions = {c.type: c.status for c in status.status.conditions}
    assert conditions["RuntimeReady"] is True


async def test_sandbox_lifecycle(target: Target) -> None:
    rt = target.runtime
    sandbox_id, config = await target.new_sandbox(labels={"app": "web"})
    assert re.fullmatch(r"[0-9a-f]{64}", sandbox_id)

    status = (await rt.pod_sandbox_status(sandbox_id)).status
    assert status is not None
    assert status.state is pb.PodSandboxState.SANDBOX_READY
    assert status.metadata == config.metadata
    assert status.labels["app"] == "web"
    assert status.annotations["contract"] == "yes"
    assert status.created_at > 0
    assert status.network is not None and status.network.ip

    listed = await rt.list_pod_sandbox(pb.PodSandboxFilter(id=sandbox_id))
    assert [s.id for s in listed] == [sandbox_id]
    assert listed[0].state is pb.PodSandboxState.SANDBOX_READY

    await rt.stop_pod_sandbox(sandbox_id)
    await rt.stop_pod_sandbox(sandbox_id)  # idempotent
    status = (await rt.pod_sandbox_status(sandbox_id)).status
    assert status is not None and status.state is pb.PodSandboxState.SANDBOX_NOTREADY
    not_ready = pb.PodSandboxFilter(
        state=pb.PodSandboxStateValue(state=pb.PodSandboxState.SANDBOX_NOTREADY),
        label_selector={TEST_LABEL: "1"},
    )
    assert sandbox_id in [s.id for s in await rt.list_pod_sandbox(not_ready)]

    await rt.remove_pod_sandbox(sandbox_id)
    await rt.remove_pod_sandbox(sandbox_id)  # removing what is gone succeeds
    assert await rt.list_pod_sandbox(pb.PodSandboxFilter(id=sandbox_id)) == []
    with pytest.raises(errors.NotFoundError):
        await rt.pod_sandbox_status(sandbox_id)


async def test_sandbox_name_is_reserved_per_attempt(target: Target) -> None:
    sandbox_id, config = await target.new_sandbox()
    meta = config.metadata
    assert meta is not None
    with pytest.raises(errors.CriError, match="reserved"):
        await target.new_sandbox(name=meta.name, uid=meta.uid, attempt=0)
    second, _second_config = await target.new_sandbox(name=meta.name, uid=meta.uid, attempt=1)
    status = (await target.runtime.pod_sandbox_status(second)).status
    assert status is not None and status.metadata is not None
    assert status.metadata.attempt == 1
    assert second != sandbox_id


async def test_container_exit_code_reason_and_logs(target: Target) -> None:
    rt = target.runtime
    sandbox_id, config = await target.new_sandbox({"app": EXIT_3_AFTER_1S})
    cid = await target.new_container(sandbox_id, config, "app", EXIT_3_AFTER_1S, attempt=2)

    status = await eventually_status(rt, cid, exited)
    assert status.exit_code == 3
    assert status.reason == "Error"
    assert status.metadata is not None
    assert (status.metadata.name, status.metadata.attempt) == ("app", 2)
    assert 0 < status.created_at <= status.started_at < status.finished_at
    assert status.finished_at - status.started_at >= 1_000_000_000
    assert status.labels[TEST_LABEL] == "1"
    assert status.annotations["container"] == "app"
    assert status.image is not None and status.image.image
    assert status.image_ref
    assert status.log_path == f"{config.log_directory}/app/2.log"

    lines = (await trio.Path(status.log_path).read_text()).splitlines()
    parsed = [CRI_LOG_LINE.match(line) for line in lines]
    assert all(parsed), lines
    assert [(m.group(4), m.group(5), m.group(6)) for m in parsed if m] == [
        ("stdout", "F", "hello"),
        ("stdout", "F", "world"),
    ]


async def test_exit_zero_is_completed(target: Target) -> None:
    sandbox_id, config = await target.new_sandbox({"job": EXIT_0})
    cid = await target.new_container(sandbox_id, config, "job", EXIT_0)
    status = await eventually_status(target.runtime, cid, exited)
    assert (status.exit_code, status.reason) == (0, "Completed")


async def test_created_then_started(target: Target) -> None:
    rt = target.runtime
    sandbox_id, config = await target.new_sandbox({"app": FOREVER})
    cid = await target.new_container(sandbox_id, config, "app", FOREVER, start=False)
    status = (await rt.container_status(cid)).status
    assert status is not None
    assert status.state is pb.ContainerState.CONTAINER_CREATED
    assert status.started_at == 0
    await rt.start_container(cid)
    status = await eventually_status(rt, cid, running)
    assert status.started_at >= status.created_at
    with pytest.raises(errors.CriError):
        await rt.start_container(cid)  # only a created container can start


async def test_list_filters(target: Target) -> None:
    rt = target.runtime
    sb1, cfg1 = await target.new_sandbox({"a": FOREVER, "b": EXIT_0})
    sb2, cfg2 = await target.new_sandbox({"a": FOREVER})
    a1 = await target.new_container(sb1, cfg1, "a", FOREVER, labels={"tier": "front"})
    b1 = await target.new_container(sb1, cfg1, "b", EXIT_0, labels={"tier": "back"})
    a2 = await target.new_container(sb2, cfg2, "a", FOREVER, labels={"tier": "front"})
    await eventually_status(rt, b1, exited)
    await eventually_status(rt, a1, running)
    await eventually_status(rt, a2, running)

    def ids(containers: list[pb.Container]) -> set[str]:
        return {c.id for c in containers}

    ours = pb.ContainerFilter(label_selector={TEST_LABEL: "1"})
    assert ids(await rt.list_containers(ours)) >= {a1, b1, a2}
    assert ids(await rt.list_containers(pb.ContainerFilter(id=a2))) == {a2}
    assert ids(await rt.list_containers(pb.ContainerFilter(pod_sandbox_id=sb1))) == {a1, b1}
    running_filter = pb.ContainerFilter(
        pod_sandbox_id=sb1, state=pb.ContainerStateValue(state=pb.ContainerState.CONTAINER_RUNNING)
    )
    assert ids(await rt.list_containers(running_filter)) == {a1}
    exited_filter = pb.ContainerFilter(
        state=pb.ContainerStateValue(state=pb.ContainerState.CONTAINER_EXITED),
        label_selector={TEST_LABEL: "1"},
    )
    assert b1 in ids(await rt.list_containers(exited_filter))
    assert a1 not in ids(await rt.list_containers(exited_filter))
    front = pb.ContainerFilter(label_selector={"tier": "front", TEST_LABEL: "1"})
    assert ids(await rt.list_containers(front)) == {a1, a2}

    listed = {c.id: c for c in await rt.list_containers(pb.ContainerFilter(pod_sandbox_id=sb2))}
    assert listed[a2].pod_sandbox_id == sb2
    assert listed[a2].metadata is not None and listed[a2].metadata.name == "a"
    assert listed[a2].labels["tier"] == "front"
    assert listed[a2].state is pb.ContainerState.CONTAINER_RUNNING

    sandboxes = await rt.list_pod_sandbox(pb.PodSandboxFilter(label_selector={TEST_LABEL: "1"}))
    assert {sb1, sb2} <= {s.id for s in sandboxes}


async def test_exec_sync(target: Target) -> None:
    rt = target.runtime
    sandbox_id, config = await target.new_sandbox({"app": EXEC_SCRIPTED})
    cid = await target.new_container(sandbox_id, config, "app", EXEC_SCRIPTED)
    await eventually_status(rt, cid, running)

    echoed = await rt.exec_sync(cid, ["echo", "probe-ok"], timeout_seconds=10)
    assert (echoed.exit_code, echoed.stdout) == (0, b"probe-ok\n")
    failed = await rt.exec_sync(cid, ["sh", "-c", "exit 4"], timeout_seconds=10)
    assert failed.exit_code == 4

    await rt.stop_container(cid, 0)
    with pytest.raises(errors.CriError):
        await rt.exec_sync(cid, ["echo", "x"], timeout_seconds=5)


async def test_pull_image_and_missing_image(target: Target) -> None:
    rt = target.runtime
    ref = await rt.pull_image(pb.ImageSpec(image=target.image))
    assert ref
    image = await rt.image_status(pb.ImageSpec(image=target.image))
    assert image is not None
    assert image.id
    assert target.image in image.repo_tags
    assert any(target.image in img.repo_tags for img in await rt.list_images())

    assert await rt.image_status(pb.ImageSpec(image=target.missing_image)) is None
    with pytest.raises(errors.NotFoundError) as info:
        await rt.pull_image(pb.ImageSpec(image=target.missing_image))
    assert target.missing_image in str(info.value)
    assert "not found" in str(info.value)


async def test_stop_container_sigterm_is_honoured(target: Target) -> None:
    rt = target.runtime
    sandbox_id, config = await target.new_sandbox({"app": FOREVER})
    cid = await target.new_container(sandbox_id, config, "app", FOREVER)
    await eventually_status(rt, cid, running)
    with trio.fail_after(20):
        await rt.stop_container(cid, 30)
    status = (await rt.container_status(cid)).status
    assert status is not None
    assert status.state is pb.ContainerState.CONTAINER_EXITED
    assert status.exit_code == 143  # 128 + SIGTERM: the process handled it and exited
    await rt.stop_container(cid, 30)  # stopping an exited container is a no-op


async def test_stop_container_kills_after_timeout(target: Target) -> None:
    rt = target.runtime
    sandbox_id, config = await target.new_sandbox({"app": IGNORES_SIGTERM})
    cid = await target.new_container(sandbox_id, config, "app", IGNORES_SIGTERM)
    await eventually_status(rt, cid, running)
    started = trio.current_time()
    await rt.stop_container(cid, 2)
    elapsed = trio.current_time() - started
    status = (await rt.container_status(cid)).status
    assert status is not None
    # the grace period was honoured before SIGKILL (the status says how it ended if not)
    assert elapsed >= 2.0, (elapsed, status.exit_code, status.reason, status.message)
    assert (status.state, status.exit_code) == (pb.ContainerState.CONTAINER_EXITED, 137)


async def test_remove_running_container_and_sandbox(target: Target) -> None:
    rt = target.runtime
    sandbox_id, config = await target.new_sandbox({"a": FOREVER, "b": FOREVER})
    a = await target.new_container(sandbox_id, config, "a", FOREVER)
    b = await target.new_container(sandbox_id, config, "b", FOREVER)
    await eventually_status(rt, a, running)

    await rt.remove_container(a)  # CRI: a running container is forcibly removed
    with pytest.raises(errors.NotFoundError):
        await rt.container_status(a)
    await rt.remove_container(a)  # and removing it again succeeds

    await rt.remove_pod_sandbox(sandbox_id)  # CRI: running containers are terminated and removed
    with pytest.raises(errors.NotFoundError):
        await rt.container_status(b)
    assert await rt.list_containers(pb.ContainerFilter(pod_sandbox_id=sandbox_id)) == []


async def test_stopping_sandbox_stops_its_containers(target: Target) -> None:
    rt = target.runtime
    sandbox_id, config = await target.new_sandbox({"app": FOREVER})
    cid = await target.new_container(sandbox_id, config, "app", FOREVER)
    await eventually_status(rt, cid, running)
    await rt.stop_pod_sandbox(sandbox_id)
    status = await eventually_status(rt, cid, exited)
    assert status.finished_at >= status.started_at
    with pytest.raises(errors.CriError):
        await target.new_container(sandbox_id, config, "late", FOREVER)


async def test_not_found_errors(target: Target) -> None:
    rt = target.runtime
    missing = "f" * 64
    with pytest.raises(errors.NotFoundError):
        await rt.container_status(missing)
    with pytest.raises(errors.NotFoundError):
        await rt.stop_container(missing, 1)
    with pytest.raises(errors.NotFoundError):
        await rt.pod_sandbox_status(missing)
    await rt.remove_container(missing)
    await rt.remove_pod_sandbox(missing)
