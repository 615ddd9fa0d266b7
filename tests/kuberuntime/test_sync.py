"""SyncPod on SimRuntime under a MockClock: status → sync → status → sync …, with exact Trio times."""

from __future__ import annotations

import attrs
import pytest
import trio
from trio.testing import MockClock

from kubelet_trio.container.runtime import PodSyncResult
from kubelet_trio.container.types import ContainerState
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.kuberuntime import NODE_LABEL, hash_container
from kubelet_trio.kuberuntime.labels import (
    CONTAINER_HASH_ANNOTATION,
    CONTAINER_NAME_LABEL,
    CONTAINER_RESTART_COUNT_ANNOTATION,
    CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION,
    CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION,
    POD_NAME_LABEL,
    POD_NAMESPACE_LABEL,
    POD_TERMINATION_GRACE_PERIOD_ANNOTATION,
    POD_UID_LABEL,
)
from tests.kuberuntime.conftest import IMAGE, MISSING_IMAGE, NODE, Env, EnvFactory, app, make_pod, spec_of


def started(result: PodSyncResult) -> list[str]:
    return [s.target for s in result.steps if s.action == "StartContainer" and not s.error]


def start_errors(result: PodSyncResult) -> dict[str, tuple[str, str]]:
    return {s.target: (s.error, s.message) for s in result.steps if s.action == "StartContainer" and s.error}


async def test_an_image_found_present_is_inspected_once_per_start(
    make_env: EnvFactory, autojump_clock: MockClock
) -> None:
    """The ImageStatus that found the image also names its user; after a pull, the one that reads the
    image's size for the Pulled event (Go's puller) does."""
    pulled = await make_env()
    assert started(await pulled.sync(make_pod([app()], scripts={"app": "run"}))) == ["app"]
    image = await pulled.sim.image_status(pb.ImageSpec(image=IMAGE))
    assert image is not None
    assert pulled.sim.image_status_calls == [IMAGE, IMAGE, IMAGE]

    present = await make_env(preloaded_images=[IMAGE])
    pod = make_pod([app(), app("side")], scripts={"app": "run", "side": "run"})
    assert started(await present.sync(pod)) == ["app", "side"]
    assert present.sim.image_status_calls == [IMAGE, IMAGE]
    assert all(c.image_ref for c in (await present.status(pod)).container_statuses)


async def test_creates_sandbox_and_containers_with_labels_annotations_and_log_paths(
    env: Env, autojump_clock: MockClock
) -> None:
    pod = make_pod([app()], scripts={"app": "run"}, labels={"tier": "web"})
    result = await env.sync(pod)
    assert result.ok
    assert [s.action for s in result.steps] == ["CreatePodSandbox", "StartContainer"]

    [sandbox] = await env.sandboxes()
    assert sandbox.metadata == pb.PodSandboxMetadata(name="web", namespace="default", uid="uid-1", attempt=0)
    assert sandbox.labels == {
        "tier": "web",
        POD_NAME_LABEL: "web",
        POD_NAMESPACE_LABEL: "default",
        POD_UID_LABEL: "uid-1",
        NODE_LABEL: NODE,
    }
    assert sandbox.annotations["sim.kubelet-trio.io/app"] == "run"

    [container] = await env.containers()
    assert container.metadata == pb.ContainerMetadata(name="app", attempt=0)
    assert container.labels == {
        POD_NAME_LABEL: "web",
        POD_NAMESPACE_LABEL: "default",
        POD_UID_LABEL: "uid-1",
        CONTAINER_NAME_LABEL: "app",
        NODE_LABEL: NODE,
    }
    spec = spec_of(pod)
    assert container.annotations == {
        CONTAINER_HASH_ANNOTATION: hash_container(spec),
        CONTAINER_RESTART_COUNT_ANNOTATION: "0",
        CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION: "/dev/termination-log",
        CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION: "File",
        POD_TERMINATION_GRACE_PERIOD_ANNOTATION: "30",
    }
    log_dir = env.logs / "default_web_uid-1"
    assert container.log_path == str(log_dir / "app" / "0.log")
    assert (log_dir / "app" / "0.log").exists()

    status = await env.status(pod)
    [sb] = status.sandbox_statuses
    assert sb.ready and sb.attempt == 0 and status.ips == (sb.ip,)
    [cs] = status.container_statuses
    assert (cs.state, cs.restart_count, cs.hash) == (ContainerState.RUNNING, 0, hash_container(spec))
    assert cs.container_id == f"containerd://{cs.id}"

    assert (await env.sync(pod)).steps == ()  # converged: nothing to do
    assert env.event_reasons() == ["Pulling", "Pulled", "Created", "Started"]
    assert env.mgr.reasons(pod.uid) == {}


async def test_crash_loop_backoff_schedule(env: Env, autojump_clock: MockClock) -> None:
    pod = make_pod([app()], scripts={"app": "exit 1 after 1s"})
    starts: list[float] = []
    finishes: list[float] = []
    messages: list[str] = []
    while len(starts) < 9:
        result = await env.sync(pod)
        if started(result):
            starts.append(trio.current_time())
            newest = (await env.status(pod)).find("app")
            assert newest is not None and newest.restart_count == len(starts) - 1
        for error, message in start_errors(result).values():
            assert error == "CrashLoopBackOff"
            messages.append(message)
        until = result.earliest_backoff()
        if until is None:
            await trio.sleep(1)  # the container runs for exactly 1 s
            exited = (await env.status(pod)).find("app")
            assert exited is not None and exited.state is ContainerState.EXITED
            finishes.append(env.clock.to_trio(exited.finished_at))
        else:
            await trio.sleep_until(until)

    delays = [start - finish for start, finish in zip(starts[1:], finishes, strict=False)]
    assert delays == [0, 10, 20, 40, 80, 160, 300, 300]  # exact: the loop wakes at each expiry
    assert starts == [0, 1, 12, 33, 74, 155, 316, 617, 918]
    assert messages[:3] == [
        "back-off 10s restarting failed container=app pod=web_default(uid-1)",
        "back-off 20s restarting failed container=app pod=web_default(uid-1)",
        "back-off 40s restarting failed container=app pod=web_default(uid-1)",
    ]
    assert messages[-1] == "back-off 5m0s restarting failed container=app pod=web_default(uid-1)"
    assert "BackOff" in env.event_reasons()
    # The last start cleared the waiting reason; a sync in backoff sets it.
    assert env.mgr.reasons(pod.uid) == {}
    await trio.sleep(1)
    await env.sync(pod)
    assert env.mgr.reasons(pod.uid)["app"] == (
        "CrashLoopBackOff",
        "back-off 5m0s restarting failed container=app pod=web_default(uid-1)",
    )
    logs = sorted(p.name for p in (env.logs / "default_web_uid-1" / "app").iterdir())
    assert logs == sorted(f"{n}.log" for n in range(9))


async def test_crash_loop_backoff_resets_after_ten_minutes_running(
    env: Env, autojump_clock: MockClock
) -> None:
    pod = make_pod([app()], scripts={"app": "run"})

    async def crash_and_sync() -> PodSyncResult:
        current = (await env.status(pod)).find("app")
        assert current is not None
        env.sim.crash_container(current.id, 1)
        return await env.sync(pod)

    assert started(await env.sync(pod)) == ["app"]
    await trio.sleep(1)
    assert started(await crash_and_sync()) == ["app"]  # first crash: restarted at once
    await trio.sleep(1)
    result = await crash_and_sync()
    assert result.earliest_backoff() == pytest.approx(2 + 10)
    await trio.sleep_until(12)
    assert started(await env.sync(pod)) == ["app"]
    await trio.sleep(1)
    result = await crash_and_sync()
    assert result.earliest_backoff() == pytest.approx(13 + 20)
    await trio.sleep_until(33)
    assert started(await env.sync(pod)) == ["app"]

    await trio.sleep(11 * 60)  # runs for 11 minutes: the backoff entry expires
    assert started(await crash_and_sync()) == ["app"]  # restarted at once again
    await trio.sleep(1)
    result = await crash_and_sync()
    assert start_errors(result)["app"][1].startswith("back-off 10s ")
    assert result.earliest_backoff() == pytest.approx(trio.current_time() + 10)


async def test_on_failure_restarts_only_failed_containers(env: Env, autojump_clock: MockClock) -> None:
    pod = make_pod(
        [app("ok"), app("bad")],
        scripts={"ok": "exit 0 after 1s", "bad": "exit 1 after 1s"},
        restartPolicy="OnFailure",
    )
    assert started(await env.sync(pod)) == ["ok", "bad"]
    await trio.sleep(1)
    result = await env.sync(pod)
    assert started(result) == ["bad"]
    assert [s.action for s in result.steps] == ["StartContainer"]
    assert len(await env.containers("ok")) == 1


async def test_on_failure_exit_zero_is_not_restarted_and_pod_is_killed(
    env: Env, autojump_clock: MockClock
) -> None:
    pod = make_pod([app()], scripts={"app": "exit 0 after 1s"}, restartPolicy="OnFailure")
    await env.sync(pod)
    await trio.sleep(1)
    result = await env.sync(pod)
    assert started(result) == []
    assert [s.action for s in result.steps] == ["KillPodSandbox"]
    for _ in range(3):  # the stopped sandbox is not recreated for a finished pod
        await trio.sleep(5)
        result = await env.sync(pod)
        assert {s.action for s in result.steps} == {"KillPodSandbox"}
    assert len(await env.containers()) == 1
    [sandbox] = await env.sandboxes()
    assert sandbox.state is pb.PodSandboxState.SANDBOX_NOTREADY


async def test_never_exit_one_is_not_restarted(env: Env, autojump_clock: MockClock) -> None:
    pod = make_pod([app()], scripts={"app": "exit 1 after 1s"}, restartPolicy="Never")
    await env.sync(pod)
    await trio.sleep(1)
    for _ in range(3):
        result = await env.sync(pod)
        assert started(result) == [] and result.ok
        await trio.sleep(30)
    assert len(await env.containers()) == 1
    assert len(await env.sandboxes()) == 1
    status = await env.status(pod)
    [cs] = status.container_statuses
    assert (cs.state, cs.exit_code) == (ContainerState.EXITED, 1)


async def test_restart_count_continues_from_log_directory(env: Env, autojump_clock: MockClock) -> None:
    log_dir = env.logs / "default_web_uid-1" / "app"
    log_dir.mkdir(parents=True)
    (log_dir / "3.log").write_text("")
    (log_dir / "1.log.20240101-000000").write_text("")
    pod = make_pod([app()], scripts={"app": "run"})
    await env.sync(pod)
    [container] = await env.containers()
    assert container.metadata is not None and container.metadata.attempt == 4
    assert container.log_path.endswith("/app/4.log")


async def test_init_containers_run_in_order(env: Env, autojump_clock: MockClock) -> None:
    pod = make_pod(
        [app("main")],
        init_containers=[app("init1"), app("init2")],
        scripts={"init1": "exit 0 after 1s", "init2": "exit 0 after 2s", "main": "run"},
    )
    starts: list[tuple[float, str]] = []
    while trio.current_time() <= 4:
        result = await env.sync(pod)
        assert result.ok
        starts += [(trio.current_time(), name) for name in started(result)]
        await trio.sleep(0.5)
    assert starts == [(0, "init1"), (1, "init2"), (3, "main")]
    status = await env.status(pod)
    main = status.find("main")
    assert main is not None and main.state is ContainerState.RUNNING


async def test_failing_init_container_under_never_kills_the_pod(env: Env, autojump_clock: MockClock) -> None:
    pod = make_pod(
        [app("main")],
        init_containers=[app("init")],
        scripts={"init": "exit 1 after 1s", "main": "run"},
        restartPolicy="Never",
    )
    assert started(await env.sync(pod)) == ["init"]
    await trio.sleep(1)
    result = await env.sync(pod)
    assert [s.action for s in result.steps] == ["KillPodSandbox"]
    for _ in range(3):
        await trio.sleep(10)
        result = await env.sync(pod)
        assert started(result) == []
    assert await env.containers("main") == []
    [sandbox] = await env.sandboxes()
    assert sandbox.state is pb.PodSandboxState.SANDBOX_NOTREADY


async def test_failing_init_container_is_retried_with_backoff(env: Env, autojump_clock: MockClock) -> None:
    pod = make_pod(
        [app("main")], init_containers=[app("init")], scripts={"init": "exit 1 after 1s", "main": "run"}
    )
    assert started(await env.sync(pod)) == ["init"]
    await trio.sleep(1)
    assert started(await env.sync(pod)) == ["init"]  # first failure: at once
    await trio.sleep(1)
    result = await env.sync(pod)
    assert start_errors(result) == {
        "init": ("CrashLoopBackOff", "back-off 10s restarting failed container=init pod=web_default(uid-1)")
    }
    assert result.earliest_backoff() == pytest.approx(12)
    # Only the newest exited instance of an init container is kept.
    await trio.sleep_until(12)
    assert started(await env.sync(pod)) == ["init"]
    assert len(await env.containers("init")) == 2  # the running one and the newest exited one
    assert await env.containers("main") == []


async def test_sidecars_start_before_next_init_and_keep_running(env: Env, autojump_clock: MockClock) -> None:
    pod = make_pod(
        [app("main")],
        init_containers=[app("proxy", restartPolicy="Always"), app("setup")],
        scripts={"proxy": "run", "setup": "exit 0 after 1s", "main": "run"},
        restartPolicy="Never",
    )
    assert started(await env.sync(pod)) == ["proxy"]
    assert started(await env.sync(pod)) == ["setup"]  # the sidecar is started: next init container
    assert started(await env.sync(pod)) == []  # setup is running
    await trio.sleep(1)
    assert started(await env.sync(pod)) == ["main"]
    status = await env.status(pod)
    assert {c.name: c.state for c in status.container_statuses if c.state is ContainerState.RUNNING} == {
        "proxy": ContainerState.RUNNING,
        "main": ContainerState.RUNNING,
    }
    # An exited sidecar is restarted even under restartPolicy Never.
    proxy = status.find("proxy")
    assert proxy is not None
    env.sim.crash_container(proxy.id, 2)
    assert started(await env.sync(pod)) == ["proxy"]
    restarted = (await env.status(pod)).find("proxy")
    assert restarted is not None and restarted.restart_count == 1
    assert started(await env.sync(pod)) == []


async def test_sandbox_killed_recreates_sandbox_and_all_containers(
    env: Env, autojump_clock: MockClock
) -> None:
    pod = make_pod(
        [app("a"), app("b")],
        init_containers=[app("init")],
        scripts={"init": "exit 0", "a": "run", "b": "run"},
    )
    await env.sync(pod)
    await env.sync(pod)
    status = await env.status(pod)
    assert {c.name for c in status.running_containers} == {"a", "b"}
    old_sandbox = status.sandbox_statuses[0]

    await trio.sleep(5)
    env.sim.kill_sandbox_process(old_sandbox.id)
    result = await env.sync(pod)
    assert [s.action for s in result.steps] == ["KillPodSandbox", "CreatePodSandbox", "StartContainer"]
    assert started(result) == ["init"]  # init containers run again in the new sandbox
    assert "SandboxChanged" in env.event_reasons()
    result = await env.sync(pod)
    assert started(result) == ["a", "b"]

    status = await env.status(pod)
    new_sandbox = status.sandbox_statuses[0]
    assert new_sandbox.id != old_sandbox.id and new_sandbox.attempt == 1 and new_sandbox.ready
    assert [s.attempt for s in status.sandbox_statuses] == [1, 0]
    for name in ("a", "b"):
        current = status.find(name)
        assert current is not None and current.state is ContainerState.RUNNING
        assert current.restart_count == 1
    running_ids = {c.id for c in status.running_containers}
    assert {c.pod_sandbox_id for c in await env.sim.list_containers() if c.id in running_ids} == {
        new_sandbox.id
    }
    # The old init instance was purged.
    assert len(await env.containers("init")) == 1


async def test_sandbox_stopped_through_cri_is_recreated(env: Env, autojump_clock: MockClock) -> None:
    pod = make_pod([app()], scripts={"app": "run"})
    await env.sync(pod)
    status = await env.status(pod)
    await env.sim.stop_pod_sandbox(status.sandbox_statuses[0].id)
    result = await env.sync(pod)
    assert started(result) == ["app"]
    status = await env.status(pod)
    assert status.sandbox_statuses[0].attempt == 1
    current = status.find("app")
    assert current is not None and current.restart_count == 1


async def test_image_change_kills_and_recreates_container(env: Env, autojump_clock: MockClock) -> None:
    pod = make_pod([app()], scripts={"app": "run"}, restartPolicy="Never")
    await env.sync(pod)
    old = (await env.status(pod)).find("app")
    assert old is not None
    spec = pod.spec
    assert spec is not None and spec.containers is not None
    new_image = "registry.sim/kubelet-trio/app:2"
    updated = attrs.evolve(
        pod, spec=attrs.evolve(spec, containers=(attrs.evolve(spec.containers[0], image=new_image),))
    )
    result = await env.sync(updated)
    assert [(s.action, s.target, s.error) for s in result.steps] == [
        ("KillContainer", "app", ""),
        ("StartContainer", "app", ""),
    ]
    assert ("uid-1", "Normal", "Killing", "Container app definition changed, will be restarted") in env.events
    status = await env.status(updated)
    new = status.find("app")
    assert new is not None and new.id != old.id
    assert (new.state, new.restart_count) == (ContainerState.RUNNING, 1)
    assert new.hash == hash_container(spec_of(updated))
    [old_cri, new_cri] = await env.containers("app")
    assert new_cri.image == pb.ImageSpec(image=new_image)  # the runtime reports the tag
    assert old_cri.state is pb.ContainerState.CONTAINER_EXITED
    assert (await env.sync(updated)).steps == ()


async def test_image_pull_error_then_backoff(env: Env, autojump_clock: MockClock) -> None:
    pod = make_pod([app(image=MISSING_IMAGE)])
    timeline: list[tuple[float, str, float | None]] = []
    last_failure = ""
    for t in (0, 5, 10, 20, 30, 50, 70):
        await trio.sleep_until(t)
        result = await env.sync(pod)
        [step] = [s for s in result.steps if s.action == "StartContainer"]
        timeline.append((t, step.error, step.backoff_until))
        if step.error == "ErrImagePull":
            assert "not found" in step.message and MISSING_IMAGE in step.message
            last_failure = step.message
        else:
            # Go >= 1.32: the back-off message carries the last pull error; the BackOff event does not
            assert step.message == f'Back-off pulling image "{MISSING_IMAGE}": ErrImagePull: {last_failure}'
    assert timeline == [
        (0, "ErrImagePull", 10),
        (5, "ImagePullBackOff", 10),
        (10, "ErrImagePull", 30),
        (20, "ImagePullBackOff", 30),
        (30, "ErrImagePull", 70),
        (50, "ImagePullBackOff", 70),
        (70, "ErrImagePull", 150),
    ]
    assert env.event_reasons().count("Pulling") == 4
    assert ("uid-1", "Normal", "BackOff", f'Back-off pulling image "{MISSING_IMAGE}"') in env.events
    assert env.mgr.reasons(pod.uid)["app"][0] == "ErrImagePull"
    assert await env.containers() == []


async def test_never_pull_policy_with_absent_image(make_env: EnvFactory, autojump_clock: MockClock) -> None:
    env = await make_env()
    pod = make_pod([app(imagePullPolicy="Never")])
    result = await env.sync(pod)
    assert start_errors(result) == {
        "app": ("ErrImageNeverPull", f'Container image "{IMAGE}" is not present with pull policy of Never')
    }
    assert "Pulling" not in env.event_reasons()

    preloaded = await make_env(preloaded_images=[IMAGE])
    result = await preloaded.sync(pod)
    assert started(result) == ["app"]
    assert (
        "uid-1",
        "Normal",
        "Pulled",
        f'Container image "{IMAGE}" already present on machine',
    ) in preloaded.events


async def test_invalid_image_name(env: Env, autojump_clock: MockClock) -> None:
    pod = make_pod([app(image="registry.sim/UPPER/case:1")])
    result = await env.sync(pod)
    assert start_errors(result)["app"][0] == "InvalidImageName"


async def test_app_container_failure_does_not_abort_the_others(env: Env, autojump_clock: MockClock) -> None:
    pod = make_pod([app("broken", image=MISSING_IMAGE), app("fine")], scripts={"fine": "run"})
    result = await env.sync(pod)
    assert start_errors(result)["broken"][0] == "ErrImagePull"
    assert started(result) == ["fine"]


async def test_slow_pull_is_cancelled_by_the_callers_scope(
    make_env: EnvFactory, autojump_clock: MockClock
) -> None:
    env = await make_env(pull_delay=30)
    pod = make_pod([app()], scripts={"app": "run"})
    status = await env.status(pod)
    pulling = trio.Event()
    env.mgr.images.events = lambda p, t, reason, m: pulling.set() if reason == "Pulling" else None

    async def cancel_after_pull_started(scope: trio.CancelScope) -> None:
        await pulling.wait()
        await trio.sleep(5)
        scope.cancel()

    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(cancel_after_pull_started, scope)
            await env.mgr.sync_pod(pod, status)
    assert scope.cancelled_caught
    assert trio.current_time() == pytest.approx(5)
    assert await env.sim.image_status(pb.ImageSpec(image=IMAGE)) is None
    assert await env.containers() == []
    # A cancelled pull is not a failure: the next sync pulls again without backoff.
    result = await env.sync(pod)
    assert started(result) == ["app"]
    assert trio.current_time() == pytest.approx(35)


async def test_two_nodes_sharing_a_runtime_do_not_see_each_other(
    make_env: EnvFactory, autojump_clock: MockClock
) -> None:
    env = await make_env()
    other = attrs.evolve(env.mgr, node_name="node-b")  # same runtime, another node
    pod_a = make_pod([app()], scripts={"app": "run"}, uid="uid-a")
    pod_b = make_pod([app()], scripts={"app": "run"}, uid="uid-b")
    await env.mgr.sync_pod(pod_a, await env.mgr.get_pod_status(pod_a.uid, pod_a.name, pod_a.namespace))
    await other.sync_pod(pod_b, await other.get_pod_status(pod_b.uid, pod_b.name, pod_b.namespace))
    assert [p.uid for p in await env.mgr.get_pods()] == ["uid-a"]
    assert [p.uid for p in await other.get_pods()] == ["uid-b"]
    assert (await env.mgr.get_pod_status("uid-b", "web", "default")).container_statuses == ()
    [runtime_pod] = await env.mgr.get_pods(all=False)
    assert (runtime_pod.name, runtime_pod.namespace) == ("web", "default")
    assert [c.name for c in runtime_pod.containers] == ["app"]
    assert len(runtime_pod.sandboxes) == 1
