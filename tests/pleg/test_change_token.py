"""Relists skipped while a simulated runtime reports no change, with the node behaving exactly as with a
full listing every second (exits, restarts, crashes seen at the same virtual times)."""

from __future__ import annotations

import trio
import trio.testing

from kubelet_trio.clock import WallClock
from kubelet_trio.fsio import run_inline
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.sim.tracking import ChangeTrackingSimRuntime
from kubelet_trio.testing.node import open_sim_node
from kubelet_trio.testing.pods import container_status, is_running, pod_manifest


def _restarts_and_times(sim_type: type[SimRuntime]) -> tuple[list[float], int]:
    """Virtual times at which a crash-looping container's restarts are seen; skipped relists."""

    async def main() -> tuple[list[float], int]:
        clock = WallClock()
        sim = sim_type(clock=clock, run_sync=run_inline, id_seed=1)
        seen: list[float] = []
        async with open_sim_node("n", sim=sim, clock=clock) as node:
            start = trio.current_time()
            [pod] = await node.apply(pod_manifest("crasher", {"app": "exit 3 after 2s"}))
            for count in range(1, 4):
                await node.wait_for(pod, lambda s, c=count: (container_status(s).restart_count or 0) >= c)
                seen.append(trio.current_time() - start)
            return seen, node.kubelet._pleg.skipped_relists

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_scripted_exits_are_seen_at_the_same_times_as_with_full_relists() -> None:
    full, no_skips = _restarts_and_times(SimRuntime)
    tracked, skips = _restarts_and_times(ChangeTrackingSimRuntime)
    assert no_skips == 0
    assert tracked == full
    assert skips > 10  # the back-off waits (10 s, 20 s) relist nothing new


async def test_an_idle_node_lists_nothing_and_a_crash_is_seen_within_a_relist_period(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = WallClock()
    sim = ChangeTrackingSimRuntime(clock=clock, run_sync=run_inline)
    async with open_sim_node("n", sim=sim, clock=clock) as node:
        [pod] = await node.apply(pod_manifest("web", {"app": "run"}))
        await node.wait_for(pod, is_running)
        pleg = node.kubelet._pleg
        await trio.sleep(5)  # settle
        skipped = pleg.skipped_relists
        await trio.sleep(60)
        assert pleg.skipped_relists - skipped >= 59  # one relist a second, none listing
        assert pleg.healthy() == (True, "")
        [container_id] = [c.id for p in pleg.pods() for c in p.containers]
        sim.crash_container(container_id, 137)
        crashed_at = trio.current_time()
        await node.wait_for(pod, lambda s: (container_status(s).restart_count or 0) >= 1)
        # seen by the next relist (1 s), restarted after the 10 s back-off
        assert trio.current_time() - crashed_at <= 1 + 10 + 1
