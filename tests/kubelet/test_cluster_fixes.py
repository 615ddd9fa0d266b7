"""Node-level scenarios (SimRuntime, MockClock) for what a real cluster showed: an active deadline lowered
on a running pod, a finished pod's podIP, ephemeral containers added to a running pod, and the downward
API's defaults for unset limits."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import attrs
import trio
import trio.testing

from kubelet_trio.api import Pod, PodStatus
from kubelet_trio.clock import WallClock
from kubelet_trio.cm.allocatable import node_allocatable, read_node_capacity
from kubelet_trio.fsio import run_inline
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.testing.node import SimNode, open_sim_node
from kubelet_trio.testing.pods import ExitZeroOnTerm, container_status, is_running, pod_manifest

DEADLINE = ("Failed", "DeadlineExceeded", "Pod was active on the node longer than the specified deadline")


@attrs.define
class StatusLog:
    """Every status the node set for one pod, with the Trio time it appeared."""

    entries: list[tuple[float, PodStatus]] = attrs.Factory(list)

    def phases(self) -> list[tuple[float, str | None, str | None, str | None]]:
        return [(t, s.phase, s.reason, s.message) for t, s in self.entries]


@contextlib.asynccontextmanager
async def recording(node: SimNode, pod: Pod) -> AsyncIterator[StatusLog]:
    log = StatusLog()

    async def follow() -> None:
        manager = node.kubelet._status_manager
        seen = None
        while True:
            status = manager.get(pod.uid)
            if status is not None and status is not seen:
                log.entries.append((trio.current_time(), status))
                seen = status
            await manager.version.wait_transition()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(follow)
        yield log
        nursery.cancel_scope.cancel()


# --- activeDeadlineSeconds lowered on a running pod ------------------------------------------------


async def _lower_deadline(node: SimNode) -> tuple[Pod, float, StatusLog]:
    """Run a pod with a one-hour deadline for 20 s, lower the deadline to 5 s, wait until it is done."""
    manifest = pod_manifest("deadline", {"app": "run"}, activeDeadlineSeconds=3600, grace=30)
    (pod,) = await node.apply(manifest)
    async with recording(node, pod) as log:
        await node.wait_for(pod, lambda s: is_running(s, "app"))
        await trio.sleep(20)
        lowered_at = trio.current_time()
        manifest["spec"]["activeDeadlineSeconds"] = 5  # the PATCH of a running pod
        await node.apply(manifest)
        await node.wait_terminated(pod)
    return pod, lowered_at, log


def _check_deadline(node: SimNode, pod: Pod, lowered_at: float, log: StatusLog, exit_code: int) -> None:
    terminal = [entry for entry in log.phases() if entry[1] not in ("Pending", "Running")]
    # The sync the update triggers sees the deadline long passed; from then on every status is Failed
    # with the deadline's reason and message.
    assert terminal[0][0] == lowered_at
    assert [entry[1:] for entry in terminal] == [DEADLINE] * len(terminal)
    final = node.status(pod)
    assert final is not None
    app = container_status(final, "app")
    assert app.state.terminated is not None and app.state.terminated.exit_code == exit_code


async def test_lowered_deadline_fails_the_pod_with_its_reason(autojump_clock: trio.testing.MockClock) -> None:
    async with open_sim_node() as node:
        pod, lowered_at, log = await _lower_deadline(node)
        _check_deadline(node, pod, lowered_at, log, exit_code=143)  # stopped by SIGTERM


async def test_lowered_deadline_reason_survives_a_clean_exit_on_sigterm(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = WallClock()
    async with open_sim_node(sim=ExitZeroOnTerm(clock=clock, run_sync=run_inline), clock=clock) as node:
        pod, lowered_at, log = await _lower_deadline(node)
        _check_deadline(node, pod, lowered_at, log, exit_code=0)


# --- a finished pod keeps its podIP -----------------------------------------------------------------


async def test_pod_ip_stays_when_the_pod_finishes(autojump_clock: trio.testing.MockClock) -> None:
    async with open_sim_node() as node:
        (pod,) = await node.apply(pod_manifest("job", {"app": "exit 0 after 5s"}, restart_policy="Never"))
        async with recording(node, pod) as log:
            await node.wait_for_phase(pod, "Succeeded")
            await node.wait_terminated(pod)
            await trio.sleep(30)  # housekeeping and status syncs after the end
        first = next((i for i, (_, s) in enumerate(log.entries) if s.pod_ip), None)
        assert first is not None, log.phases()
        ip = log.entries[first][1].pod_ip
        after = [s for _, s in log.entries[first:]]  # by position: several statuses share a moment
        assert [(s.pod_ip, [p.ip for p in s.pod_ips or ()]) for s in after] == [(ip, [ip])] * len(after)
        final = node.status(pod)
        assert final is not None and (final.phase, final.pod_ip) == ("Succeeded", ip)


# --- ephemeral containers ---------------------------------------------------------------------------


def ephemeral(status: PodStatus, name: str) -> Any:
    for c in status.ephemeral_container_statuses or ():
        if c.name == name:
            return c
    return None


async def test_ephemeral_container_starts_in_a_running_pod(autojump_clock: trio.testing.MockClock) -> None:
    async with open_sim_node() as node:
        manifest = pod_manifest("web", {"app": "run"})
        manifest["metadata"]["annotations"]["sim.kubelet-trio.io/debugger"] = "exit 0 after 10s"
        (pod,) = await node.apply(manifest)
        before = container_status(await node.wait_for(pod, lambda s: is_running(s, "app")), "app")
        await trio.sleep(5)
        added_at = trio.current_time()
        manifest["spec"]["ephemeralContainers"] = [
            {"name": "debugger", "image": "registry.sim/busybox:1.36", "targetContainerName": "app"}
        ]
        await node.apply(manifest)  # what the ephemeralcontainers subresource does to the pod

        status = await node.wait_for(
            pod, lambda s: (e := ephemeral(s, "debugger")) is not None and e.state.running is not None
        )
        # Started and reported by the sync the update triggers.
        assert trio.current_time() == added_at
        debugger = ephemeral(status, "debugger")
        assert (debugger.ready, debugger.restart_count, debugger.started) == (False, 0, None)
        app = container_status(status, "app")
        assert (app.container_id, app.restart_count) == (before.container_id, 0)  # not restarted

        status = await node.wait_for(
            pod, lambda s: (e := ephemeral(s, "debugger")) is not None and e.state.terminated is not None
        )
        done = ephemeral(status, "debugger")
        assert (done.state.terminated.exit_code, done.state.terminated.reason) == (0, "Completed")
        await trio.sleep(120)  # restartPolicy Always: a regular container would have restarted by now
        status = node.status(pod)
        assert status is not None and status.phase == "Running"
        assert ephemeral(status, "debugger").restart_count == 0
        names = [c.labels.get("io.kubernetes.container.name") for c in await node.sim.list_containers()]
        assert sorted(names) == ["app", "debugger"]


# --- downward API defaults --------------------------------------------------------------------------


async def test_unset_limits_read_as_node_allocatable(autojump_clock: trio.testing.MockClock) -> None:
    async with open_sim_node() as node:
        env = [
            {"name": "MEMORY_LIMIT", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}},
            {"name": "CPU_LIMIT", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
        ]
        manifest = pod_manifest("downward", {"app": "run"})
        manifest["spec"]["containers"][0]["env"] = env
        (pod,) = await node.apply(manifest)
        app = container_status(await node.wait_for(pod, lambda s: is_running(s, "app")), "app")
        assert isinstance(node.sim, SimRuntime)
        config = node.sim.container_config(app.container_id.partition("://")[2])
        envs = {kv.key: kv.value for kv in config.envs}
        capacity = read_node_capacity(node.kubelet.config.root_dir)
        assert node.kubelet.allocatable == node_allocatable(capacity)
        assert envs["MEMORY_LIMIT"] == str(capacity.memory - 100 * 2**20)  # less memory.available 100Mi
        assert envs["CPU_LIMIT"] == str(capacity.milli_cpu // 1000)
