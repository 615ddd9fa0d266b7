"""SimRuntime under a MockClock: exact timestamps, containerd-like semantics, scripted behaviour."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import trio
import trio.testing

from kubelet_trio.cri import errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.sim.runtime import IMAGE_FS_MOUNTPOINT, SimRuntime
from kubelet_trio.sim.script import ScriptError
from tests.sim.pods import Pods

SECOND = 10**9
RUNNING = pb.ContainerState.CONTAINER_RUNNING
EXITED = pb.ContainerState.CONTAINER_EXITED
CREATED = pb.ContainerState.CONTAINER_CREATED
READY = pb.PodSandboxState.SANDBOX_READY
NOTREADY = pb.PodSandboxState.SANDBOX_NOTREADY


async def test_implements_the_runtime_protocol(sim: SimRuntime) -> None:
    assert isinstance(sim, Runtime)


def test_constructed_outside_trio_then_used_inside() -> None:
    sim = SimRuntime(preloaded_images=["busybox"], wall_clock_start_ns=5 * SECOND)

    async def main() -> list[int]:
        stamps = []
        for _ in range(2):
            await trio.sleep(3)
            stamps.append((await sim.image_fs_info()).image_filesystems[0].timestamp)
        return stamps

    # The Trio origin is taken on first use: the wall base maps to that moment.
    assert trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0)) == [5 * SECOND, 8 * SECOND]


# --- containers and time ------------------------------------------------------------------------


async def test_scripted_exit_has_exact_timestamps(autojump_clock: object, pods: Pods) -> None:
    sandbox_id, config = await pods.sandbox({"app": 'print "hi"; exit 3 after 2s'})
    await trio.sleep(0.5)
    cid = await pods.container(sandbox_id, config, "app")
    status = await pods.status(cid)
    assert status.state is RUNNING
    assert status.started_at == status.created_at  # started right after creation, no time passed

    await trio.sleep(1.999)
    assert (await pods.status(cid)).state is RUNNING
    await trio.sleep(0.001)
    status = await pods.status(cid)
    assert status.state is EXITED
    assert status.finished_at - status.started_at == 2 * SECOND
    assert (status.exit_code, status.reason, status.message) == (3, "Error", "")


async def test_timestamps_follow_trio_time_from_the_wall_base(
    autojump_clock: object, pods: Pods, wall_start_ns: int
) -> None:
    await trio.sleep(10)
    sandbox_id, _ = await pods.sandbox()
    status = (await pods.sim.pod_sandbox_status(sandbox_id)).status
    assert status is not None
    assert status.created_at == wall_start_ns + 10 * SECOND


async def test_exit_zero_is_completed_at_once(autojump_clock: object, pods: Pods) -> None:
    sandbox_id, config = await pods.sandbox({"job": "exit 0"})
    cid = await pods.container(sandbox_id, config, "job")
    status = await pods.status(cid)
    assert (status.state, status.exit_code, status.reason) == (EXITED, 0, "Completed")
    assert status.finished_at == status.started_at


async def test_created_container_status(autojump_clock: object, pods: Pods) -> None:
    sandbox_id, config = await pods.sandbox(labels={"app": "web"})
    cid = await pods.container(sandbox_id, config, "app", attempt=2, labels={"tier": "front"}, start=False)
    assert re.fullmatch(r"[0-9a-f]{64}", cid)
    status = await pods.status(cid)
    assert status.id == cid
    assert status.state is CREATED
    assert (status.started_at, status.finished_at, status.exit_code, status.reason) == (0, 0, 0, "")
    assert status.metadata == pb.ContainerMetadata(name="app", attempt=2)
    assert status.labels == {"tier": "front"}
    assert status.annotations == {"container": "app"}
    assert status.mounts == [pb.Mount(container_path="/data", host_path="/srv/data")]
    assert status.log_path == f"{config.log_directory}/app/2.log"
    assert Path(status.log_path).is_absolute()
    # Like containerd: the image's tag and repo digest while it is present.
    assert status.image == pb.ImageSpec(image=pods.image)
    assert re.fullmatch(r"registry\.sim/kubelet-trio/busybox@sha256:[0-9a-f]{64}", status.image_ref)
    assert not await trio.Path(status.log_path).exists()  # the log file appears when the container starts


async def test_start_only_from_created(autojump_clock: object, pods: Pods) -> None:
    sandbox_id, config = await pods.sandbox()
    cid = await pods.container(sandbox_id, config, "app")
    with pytest.raises(errors.CriCallError, match="container is in CONTAINER_RUNNING state"):
        await pods.sim.start_container(cid)
    with pytest.raises(errors.NotFoundError):
        await pods.sim.start_container("f" * 64)


async def test_start_in_a_stopped_sandbox_is_a_start_error(autojump_clock: object, pods: Pods) -> None:
    sandbox_id, config = await pods.sandbox()
    cid = await pods.container(sandbox_id, config, "app", start=False)
    await pods.sim.stop_pod_sandbox(sandbox_id)
    with pytest.raises(errors.CriCallError, match=f'sandbox container "{sandbox_id}" is not running'):
        await pods.sim.start_container(cid)
    status = await pods.status(cid)
    assert (status.state, status.exit_code, status.reason) == (EXITED, 128, "StartError")
    assert "is not running" in status.message


# --- stop ---------------------------------------------------------------------------------------


async def test_stop_sends_sigterm_and_the_container_exits_143(autojump_clock: object, pods: Pods) -> None:
    sandbox_id, config = await pods.sandbox()
    cid = await pods.container(sandbox_id, config, "app")
    await trio.sleep(1)
    before = trio.current_time()
    await pods.sim.stop_container(cid, 30)
    assert trio.current_time() == before
    status = await pods.status(cid)
    assert (status.state, status.exit_code, status.reason) == (EXITED, 143, "Error")
    assert status.finished_at - status.started_at == SECOND


async def test_stop_with_ignored_sigterm_waits_exactly_the_timeout(
    autojump_clock: object, pods: Pods
) -> None:
    sandbox_id, config = await pods.sandbox({"app": "ignore-sigterm"})
    cid = await pods.container(sandbox_id, config, "app")
    started = (await pods.status(cid)).started_at
    before = trio.current_time()
    await pods.sim.stop_container(cid, 7)
    assert trio.current_time() - before == 7
    status = await pods.status(cid)
    assert (status.state, status.exit_code, status.reason) == (EXITED, 137, "Error")
    assert status.finished_at - started == 7 * SECOND


async def test_stop_with_timeout_zero_kills_at_once(autojump_clock: object, pods: Pods) -> None:
    sandbox_id, config = await pods.sandbox({"app": "ignore-sigterm"})
    cid = await pods.container(sandbox_id, config, "app")
    before = trio.current_time()
    await pods.sim.stop_container(cid, 0)
    assert trio.current_time() == before
    assert (await pods.status(cid)).exit_code == 137


async def test_stop_returns_when_the_scripted_exit_comes_first(autojump_clock: object, pods: Pods) -> None:
    sandbox_id, config = await pods.sandbox({"app": "ignore-sigterm; exit 0 after 5s"})
    cid = await pods.container(sandbox_id, config, "app")
    await trio.sleep(1)
    before = trio.current_time()
    await pods.sim.stop_container(cid, 30)
    assert trio.current_time() - before == 4
    status = await pods.status(cid)
    assert (status.exit_code, status.reason) == (0, "Completed")
    assert status.finished_at - status.started_at == 5 * SECOND


async def test_stop_in_progress_ends_when_the_sandbox_is_stopped(autojump_clock: object, pods: Pods) -> None:
    sandbox_id, config = await pods.sandbox({"app": "ignore-sigterm"})
    cid = await pods.container(sandbox_id, config, "app")
    before = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pods.sim.stop_container, cid, 30)
        await trio.sleep(2)
        await pods.sim.stop_pod_sandbox(sandbox_id)
    assert trio.current_time() - before == 2
    assert (await pods.status(cid)).exit_code == 137


async def test_stop_is_cancellable(autojump_clock: object, pods: Pods) -> None:
    sandbox_id, config = await pods.sandbox({"app": "ignore-sigterm"})
    cid = await pods.container(sandbox_id, config, "app")
    with trio.move_on_after(3):
        await pods.sim.stop_container(cid, 30)
    assert (await pods.status(cid)).state is RUNNING


async def test_stop_of_created_exited_or_unknown(autojump_clock: object, pods: Pods) -> None:
    sandbox_id, config = await pods.sandbox({"done": "exit 1"})
    created = await pods.container(sandbox_id, config, "app", start=False)
    done = await pods.container(sandbox_id, config, "done")
    await pods.sim.stop_container(created, 10)
    await pods.sim.stop_container(done, 10)
    assert (await pods.status(created)).state is CREATED
    assert (await pods.status(done)).exit_code == 1
    with pytest.raises(errors.NotFoundError, match="an error occurred when try to find container"):
        await pods.sim.stop_container("f" * 64, 10)


# --- remove -------------------------------------------------------------------------------------


async def test_remove_container(autojump_clock: object, pods: Pods) -> None:
    sandbox_id, config = await pods.sandbox()
    cid = await pods.container(sandbox_id, config, "app")
    await pods.sim.remove_container(cid)  # running: killed, then removed
    with pytest.raises(errors.NotFoundError):
        await pods.sim.container_status(cid)
    await pods.sim.remove_container(cid)  # idempotent
    assert await pods.sim.list_containers() == []


# --- logs ---------------------------------------------------------------------------------------


async def test_log_file_in_cri_format(autojump_clock: object, pods: Pods) -> None:
    sandbox_id, config = await pods.sandbox({"app": 'print "hello" "wor ld"; stderr "oops"; print done'})
    await trio.sleep(1.5)
    cid = await pods.container(sandbox_id, config, "app", attempt=1)
    status = await pods.status(cid)
    assert status.log_path == f"{config.log_directory}/app/1.log"
    text = await trio.Path(status.log_path).read_text()
    # WALL_START_NS (…20.123456Z) + 1.5 s; trailing zeros trimmed like Go's RFC3339Nano.
    stamp = "2023-11-14T22:13:21.623456Z"
    assert text == (
        f"{stamp} stdout F hello\n{stamp} stdout F wor ld\n{stamp} stderr F oops\n{stamp} stdout F done\n"
    )


async def test_log_file_is_created_empty(autojump_clock: object, pods: Pods) -> None:
    sandbox_id, config = await pods.sandbox()
    cid = await pods.container(sandbox_id, config, "app")
    assert await trio.Path((await pods.status(cid)).log_path).read_text() == ""


async def test_no_log_file_without_a_log_directory(
    autojump_clock: object, pods: Pods, tmp_path: Path
) -> None:
    sandbox_id, config = await pods.sandbox({"app": "print x"}, log_directory="")
    cid = await pods.container(sandbox_id, config, "app")
    assert (await pods.status(cid)).log_path == ""
    assert not await trio.Path(tmp_path / "logs").exists()


# --- exec ---------------------------------------------------------------------------------------


async def test_exec_sync_scripted_and_builtin(autojump_clock: object, pods: Pods) -> None:
    script = 'exec cat /tmp/ready -> 0 "ok"; exec sh -c "exit 4" -> 4; exec slow -> 2 "late" after 3s'
    sandbox_id, config = await pods.sandbox({"app": script})
    cid = await pods.container(sandbox_id, config, "app")
    exec_sync = pods.sim.exec_sync

    assert await exec_sync(cid, ["cat", "/tmp/ready"], 1) == pb.ExecSyncResponse(stdout=b"ok", exit_code=0)
    assert (await exec_sync(cid, ["sh", "-c", "exit 4"])).exit_code == 4
    assert (await exec_sync(cid, ["true"])).exit_code == 0
    assert (await exec_sync(cid, ["false"])).exit_code == 1
    assert await exec_sync(cid, ["echo", "probe-ok"]) == pb.ExecSyncResponse(stdout=b"probe-ok\n")
    unknown = await exec_sync(cid, ["frobnicate", "/"])
    assert (unknown.exit_code, unknown.stderr) == (126, b"sim: no scripted result for exec frobnicate /\n")

    before = trio.current_time()
    assert await exec_sync(cid, ["slow"], 5) == pb.ExecSyncResponse(stdout=b"late", exit_code=2)
    assert trio.current_time() - before == 3


async def test_exec_sync_timeout(autojump_clock: object, pods: Pods) -> None:
    sandbox_id, config = await pods.sandbox({"app": "exec hang -> 0 after 1h"})
    cid = await pods.container(sandbox_id, config, "app")
    before = trio.current_time()
    with pytest.raises(errors.DeadlineExceededError, match="timeout 2s exceeded: context deadline exceeded"):
        await pods.sim.exec_sync(cid, ["hang"], 2)
    assert trio.current_time() - before == 2
    # timeout 0 means no limit: it answers when the script says.
    await pods.sim.exec_sync(cid, ["hang"], 0)
    assert trio.current_time() - before == 2 + 3600


async def test_exec_sync_needs_a_running_container(autojump_clock: object, pods: Pods) -> None:
    sandbox_id, config = await pods.sandbox()
    cid = await pods.container(sandbox_id, config, "app", start=False)
    with pytest.raises(errors.CriCallError, match="container is in CONTAINER_CREATED state"):
        await pods.sim.exec_sync(cid, ["true"])
    await pods.sim.start_container(cid)
    await pods.sim.stop_container(cid, 0)
    with pytest.raises(errors.CriCallError, match="container is in CONTAINER_EXITED state"):
        await pods.sim.exec_sync(cid, ["true"])
    with pytest.raises(errors.NotFoundError):
        await pods.sim.exec_sync("f" * 64, ["true"])


# --- sandboxes ----------------------------------------------------------------------------------


async def test_sandbox_lifecycle(autojump_clock: object, pods: Pods) -> None:
    sim = pods.sim
    sandbox_id, config = await pods.sandbox({"app": "run"}, labels={"app": "web"})
    assert re.fullmatch(r"[0-9a-f]{64}", sandbox_id)
    status = (await sim.pod_sandbox_status(sandbox_id)).status
    assert status is not None
    assert (status.id, status.state, status.metadata) == (sandbox_id, READY, config.metadata)
    assert status.labels == {"app": "web"}
    assert status.annotations == dict(config.annotations)
    assert status.network == pb.PodSandboxNetworkStatus(ip="10.88.0.2")

    running = await pods.container(sandbox_id, config, "app")
    created = await pods.container(sandbox_id, config, "later", start=False)
    await trio.sleep(1)
    await sim.stop_pod_sandbox(sandbox_id)
    await sim.stop_pod_sandbox(sandbox_id)  # idempotent
    status = (await sim.pod_sandbox_status(sandbox_id)).status
    assert status is not None
    assert status.state is NOTREADY
    assert status.network == pb.PodSandboxNetworkStatus(ip="")  # network torn down, like containerd
    stopped = await pods.status(running)
    assert (stopped.state, stopped.exit_code, stopped.reason) == (EXITED, 137, "Error")
    assert (await pods.status(created)).state is CREATED
    with pytest.raises(errors.NotFoundError, match="no running task found"):  # containerd's answer
        await pods.container(sandbox_id, config, "late")

    await sim.remove_pod_sandbox(sandbox_id)
    await sim.remove_pod_sandbox(sandbox_id)
    assert await sim.list_pod_sandbox() == []
    assert await sim.list_containers() == []
    with pytest.raises(errors.NotFoundError, match="an error occurred when try to find sandbox"):
        await sim.pod_sandbox_status(sandbox_id)
    with pytest.raises(errors.NotFoundError):
        await sim.stop_pod_sandbox(sandbox_id)


async def test_remove_ready_sandbox_kills_and_removes_its_containers(
    autojump_clock: object, pods: Pods
) -> None:
    sandbox_id, config = await pods.sandbox({"app": "ignore-sigterm"})
    cid = await pods.container(sandbox_id, config, "app")
    await pods.sim.remove_pod_sandbox(sandbox_id)
    with pytest.raises(errors.NotFoundError):
        await pods.sim.container_status(cid)


async def test_pod_ips(autojump_clock: object, pods: Pods) -> None:
    first, _ = await pods.sandbox()
    second, _ = await pods.sandbox()
    host, _ = await pods.sandbox(host_network=True)

    async def ip(sandbox_id: str) -> str:
        status = (await pods.sim.pod_sandbox_status(sandbox_id)).status
        assert status is not None and status.network is not None
        return status.network.ip

    assert (await ip(first), await ip(second), await ip(host)) == ("10.88.0.2", "10.88.0.3", "")
    host_status = (await pods.sim.pod_sandbox_status(host)).status
    assert host_status is not None and host_status.linux is not None
    assert host_status.linux.namespaces == pb.Namespace(
        options=pb.NamespaceOption(network=pb.NamespaceMode.NODE)
    )

    await pods.sim.update_runtime_config(
        pb.RuntimeConfig(network_config=pb.NetworkConfig(pod_cidr="10.1.2.0/24"))
    )
    third, _ = await pods.sandbox()
    assert await ip(third) == "10.1.2.2"


async def test_node_ip_for_host_network(autojump_clock: object, tmp_path: Path) -> None:
    pods = Pods(SimRuntime(node_ip="192.0.2.10", pod_cidr="172.16.0.0/24"), tmp_path)
    host, _ = await pods.sandbox(host_network=True)
    pod, _ = await pods.sandbox()
    statuses = [(await pods.sim.pod_sandbox_status(s)).status for s in (host, pod)]
    assert [s.network.ip for s in statuses if s and s.network] == ["192.0.2.10", "172.16.0.2"]


async def test_sandbox_name_is_reserved(autojump_clock: object, pods: Pods) -> None:
    first, _ = await pods.sandbox(name="web", uid="u1")
    with pytest.raises(errors.CriCallError) as info:
        await pods.sandbox(name="web", uid="u1")
    assert str(info.value) == (
        f'RunPodSandbox: failed to reserve sandbox name "web_default_u1_0": '
        f'name "web_default_u1_0" is reserved for "{first}"'
    )
    await pods.sim.stop_pod_sandbox(first)
    with pytest.raises(errors.CriCallError, match="is reserved"):  # still, while it exists
        await pods.sandbox(name="web", uid="u1")
    second, _ = await pods.sandbox(name="web", uid="u1", attempt=1)
    await pods.sim.remove_pod_sandbox(first)
    again, _ = await pods.sandbox(name="web", uid="u1")
    assert len({first, second, again}) == 3


async def test_container_name_is_reserved(autojump_clock: object, pods: Pods) -> None:
    sandbox_id, config = await pods.sandbox(name="web", uid="u1")
    cid = await pods.container(sandbox_id, config, "app")
    with pytest.raises(errors.CriCallError) as info:
        await pods.container(sandbox_id, config, "app")
    assert str(info.value) == (
        f'CreateContainer: failed to reserve container name "app_web_default_u1_0": '
        f'name "app_web_default_u1_0" is reserved for "{cid}"'
    )
    await pods.container(sandbox_id, config, "app", attempt=1)
    await pods.sim.remove_container(cid)
    await pods.container(sandbox_id, config, "app")


async def test_kill_sandbox_process(autojump_clock: object, pods: Pods) -> None:
    sandbox_id, config = await pods.sandbox()
    cid = await pods.container(sandbox_id, config, "app")
    pods.sim.kill_sandbox_process(sandbox_id[:12])
    status = (await pods.sim.pod_sandbox_status(sandbox_id)).status
    assert status is not None and status.network is not None
    assert status.state is NOTREADY
    assert status.network.ip == "10.88.0.2"  # the network stays until StopPodSandbox
    container = await pods.status(cid)
    assert (container.state, container.exit_code, container.reason) == (EXITED, 137, "Error")
    with pytest.raises(errors.NotFoundError):
        pods.sim.kill_sandbox_process("f" * 64)


async def test_crash_container(autojump_clock: object, pods: Pods) -> None:
    sandbox_id, config = await pods.sandbox()
    cid = await pods.container(sandbox_id, config, "app")
    await trio.sleep(4)
    pods.sim.crash_container(cid, 2)
    status = await pods.status(cid)
    assert (status.state, status.exit_code, status.reason) == (EXITED, 2, "Error")
    assert status.finished_at - status.started_at == 4 * SECOND
    with pytest.raises(errors.CriCallError, match="CONTAINER_EXITED"):
        pods.sim.crash_container(cid, 1)


# --- behaviour selection --------------------------------------------------------------------------


async def test_behaviour_precedence(autojump_clock: object, tmp_path: Path) -> None:
    sim = SimRuntime(
        image_behaviours={
            "registry.sim/app:1": "exit 1",
            "registry.sim/app": "exit 2",  # any tag of that repository
            "busybox": "exit 3",  # = docker.io/library/busybox:latest
        },
        preloaded_images=["registry.sim/app:1", "registry.sim/app:2", "busybox", "registry.sim/other:1"],
    )
    pods = Pods(sim, tmp_path)
    sandbox_id, config = await pods.sandbox({"annotated": "exit 9"})

    async def exit_code(name: str, image: str) -> int:
        return (await pods.status(await pods.container(sandbox_id, config, name, image=image))).exit_code

    assert await exit_code("annotated", "registry.sim/app:1") == 9  # the annotation wins
    assert await exit_code("exact", "registry.sim/app:1") == 1
    assert await exit_code("repo", "registry.sim/app:2") == 2
    assert await exit_code("normalized", "docker.io/library/busybox:latest") == 3
    other = await pods.container(sandbox_id, config, "default", image="registry.sim/other:1")
    assert (await pods.status(other)).state is RUNNING  # no script: run

    # The Go kubelet creates containers by image id: the image's own references still select.
    image = await sim.image_status(pb.ImageSpec(image="registry.sim/app:1"))
    assert image is not None
    assert await exit_code("by-id", image.id) == 1


async def test_bad_scripts(autojump_clock: object, pods: Pods) -> None:
    sandbox_id, config = await pods.sandbox({"app": "exit 1; explode"})
    with pytest.raises(errors.InvalidArgumentError, match=r"sim\.kubelet-trio\.io/app: clause 2 'explode'"):
        await pods.container(sandbox_id, config, "app")
    with pytest.raises(ScriptError, match="behaviour for image 'x': clause 1"):
        SimRuntime(image_behaviours={"x": "exit soon"})


# --- images -------------------------------------------------------------------------------------


async def test_pull_delay_and_image_records(autojump_clock: object) -> None:
    sim = SimRuntime(pull_delay=2.5, pull_delays={"registry.sim/big": 60})
    spec = pb.ImageSpec(image="registry.sim/small:1")
    assert await sim.image_status(spec) is None
    before = trio.current_time()
    ref = await sim.pull_image(spec)
    assert trio.current_time() - before == 2.5
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", ref)
    await sim.pull_image(spec)  # already present: no wait
    assert trio.current_time() - before == 2.5
    await sim.pull_image(pb.ImageSpec(image="registry.sim/big:7"))
    assert trio.current_time() - before == 62.5

    image = await sim.image_status(spec)
    assert image is not None
    assert (image.id, image.repo_tags) == (ref, ["registry.sim/small:1"])
    assert image.size > 0
    assert re.fullmatch(r"registry\.sim/small@sha256:[0-9a-f]{64}", image.repo_digests[0])
    assert await sim.image_status(pb.ImageSpec(image=ref)) == image  # by id
    assert [i.repo_tags for i in await sim.list_images()] == [
        ["registry.sim/small:1"],
        ["registry.sim/big:7"],
    ]
    assert await sim.list_images(pb.ImageFilter(image=spec)) == [image]
    fs = (await sim.image_fs_info()).image_filesystems[0]
    assert fs.used_bytes is not None and fs.used_bytes.value == sum(i.size for i in await sim.list_images())

    await sim.remove_image(spec)
    await sim.remove_image(spec)  # removing a missing image succeeds
    assert await sim.image_status(spec) is None


async def test_image_fs_names_the_configured_directory() -> None:
    assert (await SimRuntime().image_fs_info()).image_filesystems[0].fs_id.mountpoint == IMAGE_FS_MOUNTPOINT
    sim = SimRuntime(image_fs_mountpoint="/srv/images")
    assert (await sim.image_fs_info()).image_filesystems[0].fs_id.mountpoint == "/srv/images"


async def test_pull_is_cancellable(autojump_clock: object) -> None:
    sim = SimRuntime(pull_delay=10)
    with trio.move_on_after(1):
        await sim.pull_image(pb.ImageSpec(image="registry.sim/small:1"))
    assert await sim.list_images() == []


async def test_missing_images(autojump_clock: object, pods: Pods) -> None:
    sim = SimRuntime(pull_failures={"registry.sim/private": "unexpected status code 401 Unauthorized"})
    with pytest.raises(errors.NotFoundError) as info:
        await sim.pull_image(pb.ImageSpec(image="sim.invalid/x:1"))
    assert info.value.message == (
        'failed to pull and unpack image "sim.invalid/x:1": failed to resolve reference '
        '"sim.invalid/x:1": sim.invalid/x:1: not found'
    )
    with pytest.raises(
        errors.CriCallError, match=re.escape('image "registry.sim/private:3": unexpected status code 401')
    ):
        await sim.pull_image(pb.ImageSpec(image="registry.sim/private:3"))

    sandbox_id, config = await pods.sandbox()
    with pytest.raises(
        errors.NotFoundError, match=re.escape('failed to resolve image "registry.sim/never:1": not found')
    ):
        await pods.container(sandbox_id, config, "app", image="registry.sim/never:1")


async def test_pull_failure_saying_not_found_is_not_found(autojump_clock: object) -> None:
    sim = SimRuntime(pull_failures={"registry.sim/gone:1": "registry.sim/gone:1: not found"})
    with pytest.raises(errors.NotFoundError):
        await sim.pull_image(pb.ImageSpec(image="registry.sim/gone:1"))


# --- lists and filters --------------------------------------------------------------------------


async def test_list_filters(autojump_clock: object, pods: Pods) -> None:
    sim = pods.sim
    sb1, cfg1 = await pods.sandbox({"b": "exit 0"}, labels={"app": "one"})
    await trio.sleep(1)
    sb2, cfg2 = await pods.sandbox(labels={"app": "two"})
    a1 = await pods.container(sb1, cfg1, "a", labels={"tier": "front"})
    b1 = await pods.container(sb1, cfg1, "b", labels={"tier": "back"})
    a2 = await pods.container(sb2, cfg2, "a", labels={"tier": "front", "x": "y"})
    c2 = await pods.container(sb2, cfg2, "c", start=False)

    async def ids(f: pb.ContainerFilter | None = None) -> list[str]:
        return [c.id for c in await sim.list_containers(f)]

    assert await ids() == [a1, b1, a2, c2]  # by created_at
    assert await ids(pb.ContainerFilter(id=a2)) == [a2]
    assert await ids(pb.ContainerFilter(id=a2[:8])) == [a2]  # a unique prefix, like containerd
    assert await ids(pb.ContainerFilter(pod_sandbox_id=sb1)) == [a1, b1]
    assert await ids(pb.ContainerFilter(pod_sandbox_id=sb1[:8])) == [a1, b1]
    running = pb.ContainerStateValue(state=RUNNING)
    assert await ids(pb.ContainerFilter(state=running)) == [a1, a2]
    assert await ids(pb.ContainerFilter(state=pb.ContainerStateValue(state=EXITED))) == [b1]
    assert await ids(pb.ContainerFilter(state=pb.ContainerStateValue(state=CREATED))) == [c2]
    assert await ids(pb.ContainerFilter(label_selector={"tier": "front"})) == [a1, a2]
    assert await ids(pb.ContainerFilter(label_selector={"tier": "front", "x": "y"})) == [a2]
    assert await ids(pb.ContainerFilter(pod_sandbox_id=sb2, state=running)) == [a2]
    assert await ids(pb.ContainerFilter(id="0" * 64)) == []

    listed = (await sim.list_containers(pb.ContainerFilter(id=a2)))[0]
    image = await sim.image_status(pb.ImageSpec(image=pods.image))
    assert image is not None
    assert listed == pb.Container(
        id=a2,
        pod_sandbox_id=sb2,
        metadata=pb.ContainerMetadata(name="a"),
        image=pb.ImageSpec(image=pods.image),
        image_ref=image.id,
        state=RUNNING,
        created_at=listed.created_at,
        labels={"tier": "front", "x": "y"},
        annotations={"container": "a"},
    )

    async def sandboxes(f: pb.PodSandboxFilter | None = None) -> list[str]:
        return [s.id for s in await sim.list_pod_sandbox(f)]

    await sim.stop_pod_sandbox(sb2)
    assert await sandboxes() == [sb1, sb2]
    assert await sandboxes(pb.PodSandboxFilter(id=sb2[:6])) == [sb2]
    assert await sandboxes(pb.PodSandboxFilter(state=pb.PodSandboxStateValue(state=NOTREADY))) == [sb2]
    assert await sandboxes(pb.PodSandboxFilter(state=pb.PodSandboxStateValue(state=READY))) == [sb1]
    assert await sandboxes(pb.PodSandboxFilter(label_selector={"app": "one"})) == [sb1]
    first = (await sim.list_pod_sandbox())[0]
    assert (first.metadata, first.labels, first.state) == (cfg1.metadata, {"app": "one"}, READY)


async def test_ids_by_prefix_and_ambiguity(autojump_clock: object, pods: Pods) -> None:
    ids = [(await pods.sandbox())[0] for _ in range(17)]  # 17 ids: two share a first hex digit
    assert (await pods.sim.pod_sandbox_status(ids[0][:10])).status.id == ids[0]  # type: ignore[union-attr]
    shared = next(i[0] for i in ids if sum(j[0] == i[0] for j in ids) > 1)
    with pytest.raises(errors.CriCallError, match="Multiple IDs found with provided prefix"):
        await pods.sim.pod_sandbox_status(shared)


def test_ids_are_reproducible_with_a_seed() -> None:
    async def first_id() -> str:
        return await SimRuntime(id_seed=42).run_pod_sandbox(
            pb.PodSandboxConfig(metadata=pb.PodSandboxMetadata(name="a", namespace="b", uid="c"))
        )

    assert trio.run(first_id) == trio.run(first_id)


# --- version, status, stats -----------------------------------------------------------------------


async def test_version_and_status(sim: SimRuntime) -> None:
    version = await sim.version()
    assert (version.runtime_name, version.runtime_api_version) == ("kubelet-trio-sim", "v1")
    assert version.version and version.runtime_version
    status = (await sim.status()).status
    assert status is not None
    assert {c.type: c.status for c in status.conditions} == {"RuntimeReady": True, "NetworkReady": True}
    await sim.update_runtime_config(pb.RuntimeConfig())


async def test_container_stats(autojump_clock: object, pods: Pods, wall_start_ns: int) -> None:
    sandbox_id, config = await pods.sandbox({"done": "exit 0"})
    cid = await pods.container(sandbox_id, config, "app", labels={"k": "v"})
    done = await pods.container(sandbox_id, config, "done")
    await trio.sleep(5)
    stats = await pods.sim.container_stats(cid)
    assert stats.attributes == pb.ContainerAttributes(
        id=cid, metadata=pb.ContainerMetadata(name="app"), labels={"k": "v"}, annotations={"container": "app"}
    )
    zero = pb.UInt64Value(value=0)
    assert stats.cpu == pb.CpuUsage(
        timestamp=wall_start_ns + 5 * SECOND, usage_core_nano_seconds=zero, usage_nano_cores=zero
    )
    assert stats.memory is not None and stats.memory.working_set_bytes == zero
    assert stats.writable_layer is not None and stats.writable_layer.used_bytes == zero

    listed = await pods.sim.list_container_stats()
    assert [s.attributes.id for s in listed if s.attributes] == [cid, done]
    assert listed[1].cpu is None and listed[1].memory is None  # not running: no usage, like containerd
    only = await pods.sim.list_container_stats(pb.ContainerStatsFilter(label_selector={"k": "v"}))
    assert [s.attributes.id for s in only if s.attributes] == [cid]
    with pytest.raises(errors.NotFoundError):
        await pods.sim.container_stats("f" * 64)


# --- what some images' own programs do ---------------------------------------------------------


async def _pulled(sim: SimRuntime, *refs: str) -> None:
    for ref in refs:
        await sim.pull_image(pb.ImageSpec(image=ref))


async def test_nginx_writes_its_pid_file_and_shows_in_the_host_pid_namespace(
    sim: SimRuntime, pods: Pods
) -> None:
    nginx = "registry.k8s.io/e2e-test-images/nginx:1.14-4"
    await _pulled(sim, nginx)
    config = pods.sandbox_config()
    assert config.linux is not None
    config.linux.security_context = pb.LinuxSandboxSecurityContext(
        namespace_options=pb.NamespaceOption(pid=pb.NamespaceMode.NODE)
    )
    sandbox_id = await sim.run_pod_sandbox(config)
    server = await pods.container(sandbox_id, config, "nginx", image=nginx)
    shell = await pods.container(sandbox_id, config, "shell")

    pid_file = await sim.exec_sync(
        server, ["sh", "-c", "while [ ! -f /var/run/nginx.pid ]; do sleep 1; done"]
    )
    assert pid_file.exit_code == 0
    pid = (await sim.exec_sync(server, ["cat", "/var/run/nginx.pid"])).stdout.decode().strip()
    seen = await sim.exec_sync(shell, ["pidof", "nginx", "||", "true"])
    assert pid in seen.stdout.decode().split()


async def test_httpd_logs_its_start_up(sim: SimRuntime, pods: Pods) -> None:
    sim.run_commands = True  # as sim-cri serves
    httpd = "registry.k8s.io/e2e-test-images/httpd:2.4.39-4"
    await _pulled(sim, httpd)
    sandbox_id, config = await pods.sandbox()
    cid = await pods.container(sandbox_id, config, "httpd", image=httpd)
    log = await trio.Path((await pods.status(cid)).log_path).read_text()
    assert " stderr F AH00558: httpd: Could not reliably determine" in log
    assert "configured -- resuming normal operations" in log
    assert sim.listening_ports(sandbox_id) == {80}


@pytest.mark.parametrize(("no_new_privs", "euid"), [(True, 1000), (False, 0)])
async def test_set_uid_program_runs_as_root_unless_no_new_privs(
    sim: SimRuntime, pods: Pods, no_new_privs: bool, euid: int
) -> None:
    sim.run_commands = True  # as sim-cri serves
    nnp = "registry.k8s.io/e2e-test-images/nonewprivs:1.3"
    await _pulled(sim, nnp)
    sandbox_id, sandbox_config = await pods.sandbox()
    config = pb.ContainerConfig(
        metadata=pb.ContainerMetadata(name="nnp"),
        image=pb.ImageSpec(image=nnp),
        log_path="nnp.log",
        linux=pb.LinuxContainerConfig(
            security_context=pb.LinuxContainerSecurityContext(
                no_new_privs=no_new_privs, run_as_user=pb.Int64Value(value=1000)
            )
        ),
    )
    cid = await sim.create_container(sandbox_id, config, sandbox_config)
    await sim.start_container(cid)
    status = await pods.status(cid)
    assert (status.state, status.exit_code) == (EXITED, 0)
    assert (await trio.Path(status.log_path).read_text()).endswith(f" stdout F Effective uid: {euid}\n")


async def test_an_embedded_sim_runs_an_unscripted_command_until_stopped(
    sim: SimRuntime, pods: Pods, autojump_clock: trio.testing.MockClock
) -> None:
    """Harnesses rely on it: a pod's command decides nothing unless a script does (or ``run_commands``)."""
    sandbox_id, sandbox_config = await pods.sandbox()
    config = pb.ContainerConfig(
        metadata=pb.ContainerMetadata(name="once"),
        image=pb.ImageSpec(image=pods.image),
        command=["sh", "-c", "echo once; exit 3"],
        log_path="once.log",
    )
    cid = await sim.create_container(sandbox_id, config, sandbox_config)
    await sim.start_container(cid)
    await trio.sleep(3600)
    assert (await pods.status(cid)).state is pb.ContainerState.CONTAINER_RUNNING
    sim.run_commands = True  # as sim-cri serves: the command runs, prints and exits 3
    config.metadata = pb.ContainerMetadata(name="once", attempt=1)
    cid = await sim.create_container(sandbox_id, config, sandbox_config)
    await sim.start_container(cid)
    status = await pods.status(cid)
    assert (status.state, status.exit_code) == (pb.ContainerState.CONTAINER_EXITED, 3)
