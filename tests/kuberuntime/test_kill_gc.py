"""kill_pod grace periods and ordering; container GC and orphan collection."""

from __future__ import annotations

import attrs
import pytest
import trio
from trio.testing import MockClock

from kubelet_trio.container.types import ContainerState
from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.kuberuntime import running_pod_from_status
from tests.kuberuntime.conftest import Env, EnvFactory, app, make_pod


@pytest.mark.parametrize(
    ("tgps", "deletion_grace", "override", "expected"),
    [
        (30, None, None, 30),
        (0, None, None, 2),  # clamped to the 2 s minimum
        (30, 1, None, 2),  # deletionGracePeriodSeconds wins, then the clamp
        (30, 10, None, 10),
        (30, None, 7, 7),  # the override wins
        (30, 10, 0, 2),
    ],
)
async def test_kill_pod_grace_period(
    env: Env,
    autojump_clock: MockClock,
    tgps: int,
    deletion_grace: int | None,
    override: int | None,
    expected: int,
) -> None:
    pod = make_pod([app("a"), app("b")], scripts={"a": "run", "b": "run"}, terminationGracePeriodSeconds=tgps)
    await env.sync(pod)
    if deletion_grace is not None:
        assert pod.metadata is not None
        pod = attrs.evolve(
            pod, metadata=attrs.evolve(pod.metadata, deletion_grace_period_seconds=deletion_grace)
        )
    status = await env.status(pod)
    result = await env.mgr.kill_pod(pod, running_pod_from_status(status), override)
    assert result.ok
    assert sorted((s.action, s.target) for s in result.steps) == [
        ("KillContainer", "a"),
        ("KillContainer", "b"),
        ("KillPodSandbox", status.sandbox_statuses[0].id),
    ]
    assert sorted(timeout for _, _, timeout in env.sim.stop_calls) == [expected, expected]
    after = await env.status(pod)
    assert all(c.state is ContainerState.EXITED for c in after.container_statuses)
    assert not after.sandbox_statuses[0].ready
    assert env.event_reasons().count("Killing") == 2


async def test_kill_pod_stops_containers_in_parallel(env: Env, autojump_clock: MockClock) -> None:
    pod = make_pod(
        [app("a"), app("b")],
        scripts={"a": "ignore-sigterm", "b": "ignore-sigterm"},
        terminationGracePeriodSeconds=10,
    )
    await env.sync(pod)
    status = await env.status(pod)
    await env.mgr.kill_pod(pod, running_pod_from_status(status))
    assert trio.current_time() == pytest.approx(10)  # not 20
    exit_codes = {c.name: c.exit_code for c in (await env.status(pod)).container_statuses}
    assert exit_codes == {"a": 137, "b": 137}


async def test_kill_pod_stops_sidecars_after_regular_containers(env: Env, autojump_clock: MockClock) -> None:
    pod = make_pod(
        [app("main")],
        init_containers=[app("log", restartPolicy="Always"), app("proxy", restartPolicy="Always")],
        scripts={"log": "run", "proxy": "run", "main": "ignore-sigterm; exit 0 after 5s"},
        terminationGracePeriodSeconds=15,
    )
    for _ in range(3):
        await env.sync(pod)
    status = await env.status(pod)
    assert {c.name for c in status.running_containers} == {"log", "proxy", "main"}
    await env.mgr.kill_pod(pod, running_pod_from_status(status))
    names = {c.id: c.name for c in status.container_statuses}
    calls = [(t, names[cid], timeout) for t, cid, timeout in env.sim.stop_calls]
    # main ignores SIGTERM and exits on its own at 5 s; then proxy (the later sidecar) is stopped with
    # the grace left, and log only after proxy is gone.
    assert calls == [(0, "main", 15), (5, "proxy", 10), (5, "log", 10)]


async def test_kill_pod_without_pod_uses_container_annotations(env: Env, autojump_clock: MockClock) -> None:
    pod = make_pod([app()], scripts={"app": "run"}, terminationGracePeriodSeconds=12)
    await env.sync(pod)
    [runtime_pod] = await env.mgr.get_pods(all=False)
    result = await env.mgr.kill_pod(None, runtime_pod)
    assert result.ok
    assert [timeout for _, _, timeout in env.sim.stop_calls] == [12]
    assert "Killing" not in env.event_reasons()  # no pod object to attach events to


async def test_remove_dead_containers_keeps_newest_dead_per_name(env: Env, autojump_clock: MockClock) -> None:
    pod = make_pod([app("crash"), app("steady")], scripts={"crash": "exit 1 after 1s", "steady": "run"})
    while True:
        result = await env.sync(pod)
        until = result.earliest_backoff()
        await trio.sleep_until(until if until is not None else trio.current_time() + 1)
        status = await env.status(pod)
        crash = status.instances("crash")
        if len(crash) == 4 and crash[0].state is ContainerState.EXITED:
            break
    assert len(crash) == 4 and all(c.state is ContainerState.EXITED for c in crash)
    log_dir = env.logs / "default_web_uid-1" / "crash"
    assert len(list(log_dir.iterdir())) == 4

    removed = await env.mgr.remove_dead_containers(status)
    assert removed == [c.id for c in crash[1:]]
    after = await env.status(pod)
    assert [c.id for c in after.instances("crash")] == [crash[0].id]
    assert len(after.instances("steady")) == 1
    assert [p.name for p in log_dir.iterdir()] == [f"{crash[0].restart_count}.log"]
    # The kept instance still drives the restart count and the backoff.
    await trio.sleep_until(1000)
    assert [(s.action, s.target, s.error) for s in (await env.sync(pod)).steps] == [
        ("StartContainer", "crash", "")
    ]
    restarted = (await env.status(pod)).find("crash")
    assert restarted is not None and restarted.restart_count == crash[0].restart_count + 1


async def test_remove_dead_containers_of_a_removable_pod_removes_every_one(
    env: Env, autojump_clock: MockClock
) -> None:
    pod = make_pod([app("crash"), app("steady")], scripts={"crash": "exit 1 after 1s", "steady": "run"})
    while len((status := await env.status(pod)).instances("crash")) < 2 or any(
        c.state is not ContainerState.EXITED for c in status.instances("crash")
    ):
        result = await env.sync(pod)
        until = result.earliest_backoff()
        await trio.sleep_until(until if until is not None else trio.current_time() + 1)
    crash = status.instances("crash")

    removed = await env.mgr.remove_dead_containers(status, remove_all=True)
    assert removed == [c.id for c in crash]
    after = await env.status(pod)
    assert after.instances("crash") == []
    assert [c.state for c in after.instances("steady")] == [ContainerState.RUNNING]  # running ones stay
    assert list((env.logs / "default_web_uid-1" / "crash").iterdir()) == []


async def test_collect_orphans(make_env: EnvFactory, autojump_clock: MockClock) -> None:
    env = await make_env()
    other = attrs.evolve(env.mgr, node_name="node-b")
    gone = make_pod([app()], scripts={"app": "run"}, name="gone", uid="uid-gone")
    running = make_pod([app()], scripts={"app": "run"}, name="running", uid="uid-running")
    wanted = make_pod(
        [app()], scripts={"app": "exit 0"}, name="wanted", uid="uid-wanted", restartPolicy="Never"
    )
    foreign = make_pod(
        [app()], scripts={"app": "exit 0"}, name="foreign", uid="uid-foreign", restartPolicy="Never"
    )
    for pod in (gone, running, wanted):
        await env.sync(pod)
    await other.sync_pod(foreign, await other.get_pod_status(foreign.uid, foreign.name, foreign.namespace))
    await env.sync(wanted)  # exited: the pod is killed, but it is still desired
    status = await env.status(gone)
    await env.mgr.kill_pod(gone, running_pod_from_status(status))
    gone_logs = env.logs / "default_gone_uid-gone"
    assert gone_logs.is_dir()

    collected = await env.mgr.collect_orphans({wanted.uid})
    assert collected == [gone.uid]
    assert not gone_logs.exists()
    assert {p.uid for p in await env.mgr.get_pods()} == {running.uid, wanted.uid}
    assert [p.uid for p in await other.get_pods()] == [foreign.uid]  # another node's pod is untouched
    # The running orphan is left for the kill path; once killed it is collected too.
    [runtime_running] = [p for p in await env.mgr.get_pods() if p.uid == running.uid]
    await env.mgr.kill_pod(None, runtime_running)
    assert await env.mgr.collect_orphans({wanted.uid}) == [running.uid]
    assert (
        await env.sim.list_containers(
            pb.ContainerFilter(label_selector={"io.kubernetes.pod.uid": running.uid})
        )
        == []
    )


async def test_a_dead_container_removed_meanwhile_counts_as_removed(
    env: Env, autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Two removals of one pod's dead containers can run at once (a container's death and the pod's
    end): the one whose RemoveContainer finds the container gone has nothing left to do."""
    pod = make_pod([app("crash")], scripts={"crash": "exit 1 after 1s"})
    while len((status := await env.status(pod)).instances("crash")) < 2 or any(
        c.state is not ContainerState.EXITED for c in status.instances("crash")
    ):
        result = await env.sync(pod)
        until = result.earliest_backoff()
        await trio.sleep_until(until if until is not None else trio.current_time() + 1)
    sim_type = type(env.sim)
    remove = sim_type.remove_container

    async def removed_meanwhile(self: object, container_id: str) -> None:
        await remove(self, container_id)  # type: ignore[arg-type]
        raise cri_errors.NotFoundError("RemoveContainer", f"container {container_id!r}: not found")

    monkeypatch.setattr(sim_type, "remove_container", removed_meanwhile)
    removed = await env.mgr.remove_dead_containers(status, remove_all=True)
    assert removed == [c.id for c in status.instances("crash")]
    assert (await env.status(pod)).instances("crash") == []
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
