"""The probe state machine on SimRuntime under an autojump MockClock, through a whole node.

Timeline conventions: a pod applied at t = 0 starts its container at t = 0; the PLEG relist at t = 1
puts the running container into the pod's status; probe workers (no start jitter) tick every
``periodSeconds`` from t = 0 and find the container on their first tick after t = 1.
"""

from __future__ import annotations

import datetime as dt

import pytest
import trio
import trio.testing

from kubelet_trio.testing.pods import container_status, is_running
from tests.prober.nodes import bare_id, condition, container, exec_probe, open_probe_node, pod_manifest


def wall_seconds(node_clock: object, trio_time: float) -> float:
    base_ns = node_clock.base_wall_ns  # type: ignore[attr-defined]
    return base_ns / 1e9 + (trio_time - node_clock.base_trio)  # type: ignore[attr-defined]


def parse(value: str | None) -> float:
    assert value is not None
    return dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp()


def at(node_clock: object, value: str | None, trio_time: float) -> bool:
    """An API timestamp (whole seconds) shows the wall time of ``trio_time``."""
    return 0 <= wall_seconds(node_clock, trio_time) - parse(value) < 1


async def test_liveness_failures_at_threshold_restart_the_container(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_probe_node() as env:
        node, sim = env.node, env.sim
        probe = exec_probe("cat", "/tmp/healthy", periodSeconds=10, initialDelaySeconds=5)
        (pod,) = await node.apply(
            pod_manifest(
                "live",
                [container(livenessProbe=probe)],
                scripts={"app": 'run; exec cat /tmp/healthy -> 0 "ok"'},
            )
        )
        first = await node.wait_for(pod, is_running)
        first_id = bare_id(first)
        await trio.sleep_until(15)
        sim.set_exec_result(first_id, ["cat", "/tmp/healthy"], 1, stderr=b"cat: can't open '/tmp/healthy'\n")
        status = await node.wait_for(pod, lambda s: is_running(s) and container_status(s).restart_count == 1)
        assert trio.current_time() == 40  # restarted at 40 and reported by that sync, not a relist later
        assert [t for t, cid, _ in sim.execs if cid == first_id] == [10, 20, 30, 40]
        unhealthy = env.events.reasons("Unhealthy")
        assert unhealthy == [
            (t, "Liveness probe failed: cat: can't open '/tmp/healthy'\n") for t in (20, 30, 40)
        ]
        assert (40, "Container app failed liveness probe, will be restarted") in env.events.reasons("Killing")
        assert [(t, timeout) for t, cid, timeout in sim.stops if cid == first_id] == [(40, 30)]
        app = container_status(status)
        assert app.last_state.terminated.exit_code == 143
        assert app.last_state.terminated.reason == "Error"
        assert app.last_state.terminated.container_id == f"containerd://{first_id}"
        assert at(node.kubelet.clock, app.state.running.started_at, 40)
        # The new container answers the scripted "ok": probed again, never restarted again.
        await trio.sleep(100)
        final = node.status(pod)
        assert final is not None and container_status(final).restart_count == 1 and is_running(final)
        second_id = bare_id(final)
        assert [t for t, cid, _ in sim.execs if cid == second_id][:3] == [50, 60, 70]


async def test_initial_delay_and_period(autojump_clock: trio.testing.MockClock) -> None:
    async with open_probe_node() as env:
        probe = exec_probe("true", periodSeconds=10, initialDelaySeconds=25)
        (pod,) = await env.node.apply(pod_manifest("delay", [container(livenessProbe=probe)]))
        await env.node.wait_for(pod, is_running)
        await trio.sleep_until(75)
        assert env.sim.exec_times("true") == [30, 40, 50, 60, 70]


async def test_startup_probe_gates_readiness_and_liveness(autojump_clock: trio.testing.MockClock) -> None:
    async with open_probe_node() as env:
        node, sim = env.node, env.sim
        (pod,) = await node.apply(
            pod_manifest(
                "slow-start",
                [
                    container(
                        startupProbe=exec_probe("started?", periodSeconds=5, failureThreshold=10),
                        readinessProbe=exec_probe("ready?", periodSeconds=5),
                        livenessProbe=exec_probe("live?", periodSeconds=5),
                    )
                ],
                scripts={"app": "run; exec started? -> 1; exec ready? -> 0; exec live? -> 0"},
            )
        )
        status = await node.wait_for(pod, is_running)
        await trio.sleep_until(12)
        status = node.status(pod)
        assert status is not None
        app = container_status(status)
        assert (app.started, app.ready) == (False, False)
        assert condition(status, "Ready").status == "False"
        assert condition(status, "ContainersReady").reason == "ContainersNotReady"
        assert sim.exec_times("ready?") == [] and sim.exec_times("live?") == []
        sim.set_exec_result(bare_id(status), ["started?"], 0)
        status = await node.wait_for(pod, lambda s: bool(container_status(s).ready))
        assert trio.current_time() == 15
        assert container_status(status).started is True
        assert condition(status, "Ready").status == "True"
        assert at(node.kubelet.clock, condition(status, "Ready").last_transition_time, 15)
        await trio.sleep_until(31)
        assert sim.exec_times("started?") == [5, 10, 15]  # a started container's startup probe idles
        assert sim.exec_times("live?") == [20, 25, 30]
        assert sim.exec_times("ready?")[0] == 15  # asked for at once when the container started


async def test_startup_probe_failure_kills_the_container(autojump_clock: trio.testing.MockClock) -> None:
    async with open_probe_node() as env:
        probe = exec_probe("started?", periodSeconds=5, failureThreshold=2)
        (pod,) = await env.node.apply(
            pod_manifest(
                "never-starts", [container(startupProbe=probe)], scripts={"app": "run; exec started? -> 1"}
            )
        )
        status = await env.node.wait_for(
            pod, lambda s: container_status(s).restart_count == 1 and is_running(s)
        )
        assert trio.current_time() == 10  # killed and restarted at 10, reported by that sync
        assert container_status(status).started is False
        assert env.events.reasons("Unhealthy")[:2] == [
            (5, "Startup probe failed: "),
            (10, "Startup probe failed: "),
        ]
        assert (10, "Container app failed startup probe, will be restarted") in env.events.reasons("Killing")


async def test_readiness_flapping_sets_conditions_without_restarts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_probe_node() as env:
        node, sim = env.node, env.sim
        probe = exec_probe("ready?", periodSeconds=5, failureThreshold=2, successThreshold=2)
        (pod,) = await node.apply(
            pod_manifest(
                "flappy", [container(readinessProbe=probe)], scripts={"app": "run; exec ready? -> 0"}
            )
        )
        status = await node.wait_for(pod, lambda s: bool(container_status(s).ready))
        became_ready = trio.current_time()
        assert became_ready <= 5
        container_id = bare_id(status)

        await trio.sleep_until(12)
        sim.set_exec_result(container_id, ["ready?"], 1, stdout=b"not yet")
        status = await node.wait_for(pod, lambda s: not container_status(s).ready)
        assert trio.current_time() == 20  # failures at the ticks of 15 and 20
        ready, containers_ready = condition(status, "Ready"), condition(status, "ContainersReady")
        assert (ready.status, ready.reason) == ("False", "ContainersNotReady")
        assert containers_ready.message == "containers with unready status: [app]"
        assert at(node.kubelet.clock, ready.last_transition_time, 20)
        assert status.phase == "Running"
        failures = [t for t, m in env.events.reasons("Unhealthy") if m == "Readiness probe failed: not yet"]
        assert failures[:2] == [15, 20]  # then one more at 20: not ready, so it is probed again at once

        await trio.sleep_until(32)
        sim.set_exec_result(container_id, ["ready?"], 0)
        status = await node.wait_for(pod, lambda s: bool(container_status(s).ready))
        assert trio.current_time() == 40  # two successes: the ticks of 35 and 40
        assert at(node.kubelet.clock, condition(status, "Ready").last_transition_time, 40)
        assert condition(status, "ContainersReady").status == "True"
        app = container_status(status)
        assert app.restart_count == 0 and bare_id(status) == container_id


async def test_probe_workers_end_with_their_container(autojump_clock: trio.testing.MockClock) -> None:
    async with open_probe_node() as env:
        node = env.node
        probes = {
            "readinessProbe": exec_probe("true", periodSeconds=5),
            "livenessProbe": exec_probe("true", periodSeconds=5),
        }
        job, server = await node.apply(
            pod_manifest(
                "job", [container(**probes)], scripts={"app": "exit 0 after 22s"}, restartPolicy="Never"
            ),
            pod_manifest("server", [container(**probes)]),
        )
        manager = node.kubelet._probe_manager
        await node.wait_for(job, is_running)
        await node.wait_for(server, is_running)
        assert len(manager.workers(job.uid)) == 2 and len(manager.workers(server.uid)) == 2
        await node.wait_for_phase(job, "Succeeded")
        await trio.sleep(10)
        assert manager.workers(job.uid) == []
        assert not [key for key in manager.results if key[1] == bare_id(node.status(job))]

        await node.delete(server, grace_period_seconds=5)
        await node.wait_terminated(server)
        assert manager.workers(server.uid) == []
        assert manager.workers() == []


async def test_liveness_kill_uses_the_probe_grace_period(autojump_clock: trio.testing.MockClock) -> None:
    async with open_probe_node() as env:
        probe = exec_probe("live?", periodSeconds=10, terminationGracePeriodSeconds=4)
        (pod,) = await env.node.apply(
            pod_manifest(
                "stubborn",
                [container(livenessProbe=probe)],
                scripts={"app": "ignore-sigterm; exec live? -> 1"},
            )
        )
        status = await env.node.wait_for(
            pod, lambda s: container_status(s).restart_count == 1 and is_running(s)
        )
        first_id = container_status(status).last_state.terminated.container_id.partition("://")[2]
        assert [(t, timeout) for t, cid, timeout in env.sim.stops if cid == first_id] == [(30, 4)]
        last = container_status(status).last_state.terminated
        assert last.exit_code == 137  # SIGTERM ignored: SIGKILL after the probe's 4 s, not the pod's 30
        assert at(env.node.kubelet.clock, last.finished_at, 34)


async def test_liveness_kill_under_never_fails_only_that_pod(autojump_clock: trio.testing.MockClock) -> None:
    async with open_probe_node() as env:
        probe = exec_probe("live?", periodSeconds=10)
        bad, good = await env.node.apply(
            pod_manifest(
                "doomed",
                [container(livenessProbe=probe)],
                scripts={"app": "run; exec live? -> 1"},
                restartPolicy="Never",
            ),
            pod_manifest("neighbour", [container(livenessProbe=exec_probe("true"))]),
        )
        status = await env.node.wait_for_phase(bad, "Failed")
        app = container_status(status)
        assert (app.state.terminated.exit_code, app.state.terminated.reason) == (143, "Error")
        assert app.restart_count == 0
        # Go kills the whole pod here (nothing left to run), with the pod's grace period.
        assert [timeout for _, cid, timeout in env.sim.stops if cid == bare_id(status)] == [30]
        await trio.sleep(60)
        neighbour = env.node.status(good)
        assert (
            neighbour is not None and is_running(neighbour) and container_status(neighbour).restart_count == 0
        )
        assert neighbour.phase == "Running"


async def test_deleted_pod_is_not_restarted_by_liveness(autojump_clock: trio.testing.MockClock) -> None:
    async with open_probe_node() as env:
        probe = exec_probe("live?", periodSeconds=1, failureThreshold=1)
        (pod,) = await env.node.apply(
            pod_manifest(
                "quiet", [container(livenessProbe=probe)], scripts={"app": "ignore-sigterm; exec live? -> 0"}
            ),
        )
        status = await env.node.wait_for(pod, is_running)
        env.sim.set_exec_result(bare_id(status), ["live?"], 1)
        await env.node.delete(pod, grace_period_seconds=10)
        deleted_at = trio.current_time()
        await env.node.wait_terminated(pod)
        assert env.node.kubelet._probe_manager.workers(pod.uid) == []
        killing = [t for t, m in env.events.reasons("Killing") if "liveness" in m]
        assert killing == []  # liveness stopped when termination began
        assert [timeout for _, _, timeout in env.sim.stops] == [10]
        assert trio.current_time() - deleted_at <= 12


async def test_readiness_stops_exec_into_a_container_the_kubelet_stopped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``quick`` exits on SIGTERM at once, ``slow`` holds the kill for its 10 s grace period: until then
    the status still shows ``quick`` running, yet its readiness probe no longer execs into it."""
    async with open_probe_node() as env:
        node, sim = env.node, env.sim
        probe = exec_probe("ready?", periodSeconds=1)
        (pod,) = await node.apply(
            pod_manifest(
                "pair",
                [container("quick", readinessProbe=probe), container("slow")],
                scripts={"quick": "run; exec ready? -> 0", "slow": "ignore-sigterm"},
            )
        )
        status = await node.wait_for(pod, lambda s: bool(container_status(s, "quick").ready))
        quick = bare_id(status, "quick")
        await trio.sleep_until(10.5)
        await node.delete(pod, grace_period_seconds=10)
        await node.wait_terminated(pod)
        (stopped_at,) = [t for t, cid, _ in sim.stops if cid == quick]
        probed = [t for t, cid, _ in sim.execs if cid == quick]
        assert probed[-1] <= stopped_at and len(probed) >= 10
        assert trio.current_time() - stopped_at >= 10  # the kill waited for "slow" meanwhile
        errored = [m for _, m in env.events.reasons("Unhealthy", "pair") if "errored" in m]
        assert errored == []


async def test_readiness_checks_a_started_container_before_the_status_shows_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """ContainerStatus answers 1 s late (a loaded runtime): the readiness probe does not wait for the
    inspection after the start, so the status that first shows the container running shows it ready."""
    async with open_probe_node(inspect_delay=1.0) as env:
        probe = exec_probe("ready?", periodSeconds=10)
        (pod,) = await env.node.apply(
            pod_manifest("eager", [container(readinessProbe=probe)], scripts={"app": "run; exec ready? -> 0"})
        )
        status = await env.node.wait_for(pod, lambda s: bool(container_status(s).ready))
        assert trio.current_time() == 1  # the inspection's answer
        assert env.sim.exec_times("ready?") == [0]  # right after StartContainer returned
        assert at(env.node.kubelet.clock, condition(status, "Ready").last_transition_time, 1)
        await trio.sleep_until(25)
        assert env.sim.exec_times("ready?") == [0, 10, 20]  # then the worker's own ticker


async def test_a_status_generated_while_the_readiness_exec_runs_does_not_exec_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The exec takes 2 s (a loaded runtime); the status generated meanwhile shows the container running
    and not ready, which asks for a readiness probe at once: the one under way answers it."""
    async with open_probe_node() as env:
        probe = exec_probe("ready?", periodSeconds=10, timeoutSeconds=5)
        (pod,) = await env.node.apply(
            pod_manifest(
                "slow-exec",
                [container(readinessProbe=probe)],
                scripts={"app": "run; exec ready? -> 0 after 2s"},
            )
        )
        running = await env.node.wait_for(pod, is_running)
        assert trio.current_time() == 0 and not container_status(running).ready
        with trio.fail_after(30):
            await env.node.wait_for(pod, lambda s: bool(container_status(s).ready))
        assert trio.current_time() == 2
        await trio.sleep_until(25)
        assert env.sim.exec_times("ready?") == [0, 10, 20]


async def test_the_readiness_probes_of_a_started_container_run_a_period_apart_from_its_start(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The image pull takes 0.5 s, so the container starts between two ticks of the worker's ticker (which
    counts from the pod's arrival): the probe at the start is followed by one a whole period later, not
    by the old ticker's next tick half a period later."""
    async with open_probe_node(pull_delay=0.5) as env:
        probe = exec_probe("ready?", periodSeconds=2)
        (pod,) = await env.node.apply(
            pod_manifest("late", [container(readinessProbe=probe)], scripts={"app": "run; exec ready? -> 0"})
        )
        with trio.fail_after(30):
            await env.node.wait_for(pod, lambda s: bool(container_status(s).ready))
        assert trio.current_time() == 0.5
        await trio.sleep_until(7)
        assert env.sim.exec_times("ready?") == [0.5, 2.5, 4.5, 6.5]


async def test_a_slow_exec_probe_holds_its_slot_one_second_at_most(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """One exec probe at a time on this node: a readiness probe that takes 5 s (its timeout is 10 s) lets
    the next pod's probe run after a second, not after the five."""
    async with open_probe_node() as env:
        env.node.kubelet._probe_manager.exec_slots.limit = 1
        slow = exec_probe("slow?", periodSeconds=10, timeoutSeconds=10)
        quick = exec_probe("quick?", periodSeconds=10)
        (slow_pod,) = await env.node.apply(
            pod_manifest(
                "slow", [container(readinessProbe=slow)], scripts={"app": "run; exec slow? -> 0 after 5s"}
            )
        )
        await trio.sleep(0.5)
        (quick_pod,) = await env.node.apply(
            pod_manifest("quick", [container(readinessProbe=quick)], scripts={"app": "run; exec quick? -> 0"})
        )
        with trio.fail_after(30):
            await env.node.wait_for(quick_pod, lambda s: bool(container_status(s).ready))
            await env.node.wait_for(slow_pod, lambda s: bool(container_status(s).ready))
        assert env.sim.exec_times("slow?") == [0]
        assert env.sim.exec_times("quick?") == [1.0]


async def test_the_probe_of_a_container_not_yet_ready_goes_before_those_of_ready_ones(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """One exec probe at a time, kept busy by two ready pods whose probes take 0.6 s each second: the
    first probe of a new pod's container runs as soon as the one under way ends."""
    async with open_probe_node() as env:
        env.node.kubelet._probe_manager.exec_slots.limit = 1
        busy = exec_probe("busy?", periodSeconds=1, timeoutSeconds=5)
        for name in ("busy-a", "busy-b"):
            await env.node.apply(
                pod_manifest(
                    name, [container(readinessProbe=busy)], scripts={"app": "run; exec busy? -> 0 after 0.6s"}
                )
            )
        await trio.sleep_until(20.1)
        (pod,) = await env.node.apply(
            pod_manifest(
                "new", [container(readinessProbe=exec_probe("new?"))], scripts={"app": "run; exec new? -> 0"}
            )
        )
        with trio.fail_after(30):
            await env.node.wait_for(pod, lambda s: bool(container_status(s).ready))
        busy_starts = env.sim.exec_times("busy?")
        (started,) = env.sim.exec_times("new?")
        under_way = max(t for t in busy_starts if t <= 20.1)
        assert started == pytest.approx(under_way + 0.6)
        assert len([t for t in busy_starts if 20.1 <= t < started]) == 0  # it had to wait behind none
