"""The supervisor's schedule under MockClock, with a stand-in for containerd (a shell that exits): restarts
after 1, 2, 4, 8, 16 and 30 s (capped), a fresh count after a long run, a clear error when the first start
fails, and the child stopped when the supervisor is cancelled."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
import trio
import trio.testing

from kubelet_trio.containerd import ManagedContainerd, PodNetwork, RestartBackoff
from kubelet_trio.fsio import run_inline


class StandIn(ManagedContainerd):
    """No network claim or containerd config: just the process supervision."""

    def _prepare(self) -> PodNetwork:
        self.workdir.mkdir(parents=True, exist_ok=True)
        return PodNetwork("kt-00000000", "198.18.0.0/24", os.getpid(), self.workdir / "claims")


def stand_in(tmp_path: Path, script: str, *, ready: bool = True, **kwargs: object) -> StandIn:
    return StandIn(
        tmp_path / "containerd",
        argv=["sh", "-c", script],
        ready_check=lambda socket: ready,
        run_sync=run_inline,
        **kwargs,  # type: ignore[arg-type]
    )


def test_backoff_doubles_to_a_cap() -> None:
    backoff = RestartBackoff()
    assert [backoff.delay(n) for n in range(7)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


def gated(tmp_path: Path, code: int, **kwargs: object) -> tuple[StandIn, Path]:
    """A stand-in that exits with ``code`` once the test creates the gate file: it can never exit before
    the supervisor has seen it ready, however loaded the machine (a timed exit could)."""
    gate = tmp_path / "exit-now"
    script = f"while [ ! -e {gate} ]; do sleep 0.01; done; rm -f {gate}; exit {code}"
    return stand_in(tmp_path, script, **kwargs), gate


async def ready_times(managed: StandIn, gate: Path, count: int) -> list[float]:
    """When each of the next ``count`` runs of ``managed`` was ready; each is let exit once seen."""
    seen: list[float] = []
    while len(seen) < count:
        await managed.ready.wait_value(True)
        seen.append(trio.current_time())
        gate.touch()  # noqa: ASYNC240 (an empty file; a thread would let the mock clock jump)
        await managed.ready.wait_value(False)
    return seen


async def test_a_crashing_containerd_is_restarted_with_backoff(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    managed, gate = gated(tmp_path, 5)
    async with trio.open_nursery() as nursery:
        await nursery.start(managed.run)
        starts = await ready_times(managed, gate, 7)  # the first start, then six restarts
        nursery.cancel_scope.cancel()
    assert [b - a for a, b in itertools.pairwise(starts)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0]
    assert managed.restarts == 6


async def test_the_count_starts_again_after_a_long_run(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    managed, gate = gated(tmp_path, 1, backoff=RestartBackoff(reset_after=0.0))
    async with trio.open_nursery() as nursery:
        await nursery.start(managed.run)
        seen = await ready_times(managed, gate, 4)
        nursery.cancel_scope.cancel()
    # every run counts as long (reset_after 0): each restart waits the first delay again
    assert [b - a for a, b in itertools.pairwise(seen)] == [1.0, 1.0, 1.0]


async def test_a_first_start_that_fails_names_the_log(tmp_path: Path) -> None:
    managed = stand_in(tmp_path, "echo no config >&2; exit 3", ready=False)
    with pytest.raises(
        RuntimeError, match=r"managed containerd exited with 3 before it was ready; see .*containerd.log"
    ):
        await managed.run()
    assert managed.layout.log.read_text() == "no config\n"


async def test_cancelling_the_supervisor_stops_the_child(tmp_path: Path) -> None:
    managed = stand_in(tmp_path, "exec sleep 1000", stop_grace=5.0)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(managed.run)
            pid = managed.pid.value
            assert pid is not None and os.path.exists(f"/proc/{pid}")  # noqa: ASYNC240
            nursery.cancel_scope.cancel()
    assert managed.pid.value is None and managed.ready.value is False
    assert not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().split()[2]  # noqa: ASYNC230,ASYNC240,SIM115
