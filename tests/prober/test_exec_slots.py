"""The bound on exec probes in the runtime at once (``prober/slots.py``), under an autojump MockClock."""

from __future__ import annotations

import subprocess
import sys

import pytest
import trio
import trio.testing

from kubelet_trio.prober.slots import HOLD_LIMIT, URGENT_HEAD_START, ExecSlots


class Log:
    def __init__(self) -> None:
        self.started: list[tuple[float, str]] = []

    async def run(self, slots: ExecSlots, name: str, urgent: bool, seconds: float) -> None:
        async with slots.slot(urgent):
            self.started.append((trio.current_time(), name))
            await trio.sleep(seconds)


async def start_at(
    nursery: trio.Nursery, at: float, log: Log, slots: ExecSlots, *spec: tuple[str, bool, float]
) -> None:
    async def later() -> None:
        await trio.sleep_until(at)
        for name, urgent, seconds in spec:
            nursery.start_soon(log.run, slots, name, urgent, seconds)
            await trio.testing.wait_all_tasks_blocked()

    nursery.start_soon(later)


async def test_at_most_limit_at_once_the_rest_in_order_of_arrival(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slots, log = ExecSlots(2), Log()
    async with trio.open_nursery() as nursery:
        await start_at(nursery, 0, log, slots, *[(name, False, 0.25) for name in "abcde"])
        await trio.sleep(0.1)
        assert (slots.in_use(), slots.waiting()) == (2, 3)
    assert log.started == [(0, "a"), (0, "b"), (0.25, "c"), (0.25, "d"), (0.5, "e")]
    assert (slots.in_use(), slots.waiting()) == (0, 0)


async def test_an_urgent_probe_overtakes_those_that_came_less_than_its_head_start_before(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slots, log = ExecSlots(1), Log()
    async with trio.open_nursery() as nursery:
        await start_at(nursery, 0, log, slots, ("busy", False, 0.5), ("ready-1", False, 0.5))
        await start_at(nursery, 0.1, log, slots, ("ready-2", False, 0.5), ("starting", True, 0.5))
    assert [name for _, name in log.started] == ["busy", "starting", "ready-1", "ready-2"]


async def test_no_probe_waits_for_ever_behind_urgent_ones(autojump_clock: trio.testing.MockClock) -> None:
    """Urgent probes keep coming, each just before the slot is free: the one that is not urgent runs once
    those arriving have come more than the head start after it, not after them all."""
    slots, log = ExecSlots(1), Log()
    async with trio.open_nursery() as nursery:
        await start_at(nursery, 0, log, slots, ("first", True, 0.25), ("ready", False, 0.25))
        for i in range(80):
            await start_at(nursery, 0.2 + i * 0.25, log, slots, (f"u{i}", True, 0.25))
    (ran_at,) = [t for t, name in log.started if name == "ready"]
    assert URGENT_HEAD_START < ran_at <= URGENT_HEAD_START + 0.25
    assert len(log.started) == 82 and log.started[-1][0] == 81 * 0.25  # none lost, none idle


async def test_a_slow_exec_gives_its_slot_back_after_the_hold_limit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slots, log = ExecSlots(1), Log()
    async with trio.open_nursery() as nursery:
        await start_at(
            nursery, 0, log, slots, ("slow", False, 30), ("next", False, 0.1), ("after", False, 0.1)
        )
    assert log.started == [(0, "slow"), (HOLD_LIMIT, "next"), (HOLD_LIMIT + 0.1, "after")]


async def test_a_cancelled_waiter_takes_no_slot_and_holds_up_no_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slots, log = ExecSlots(1), Log()
    cancelled = trio.CancelScope()

    async def gives_up() -> None:
        with cancelled:
            await log.run(slots, "gave-up", True, 0.1)

    async with trio.open_nursery() as nursery:
        await start_at(nursery, 0, log, slots, ("holder", False, 30))
        await trio.sleep(0.05)
        nursery.start_soon(gives_up)
        await start_at(nursery, 0.1, log, slots, ("patient", False, 0.1))
        await trio.sleep(0.1)
        assert slots.waiting() == 2
        cancelled.cancel()
    assert log.started == [
        (0, "holder"),
        (HOLD_LIMIT, "patient"),
    ]  # the next in line now waits for the expiry


async def test_a_probe_cancelled_while_it_runs_gives_its_slot_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slots, log = ExecSlots(1), Log()
    async with trio.open_nursery() as nursery:
        with trio.move_on_after(0.1):
            await log.run(slots, "cancelled", False, 0.5)
        assert slots.in_use() == 0
        await start_at(nursery, 0.2, log, slots, ("next", False, 0.1))
    assert log.started == [(0, "cancelled"), (0.2, "next")]


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="limit"):
        ExecSlots(0)


def test_the_default_is_two_per_cpu_this_process_may_run_on() -> None:
    """Pinned to one CPU (as a container's cpuset pins a kubelet), two slots, whatever the host has."""
    code = (
        "import os; os.sched_setaffinity(0, {0});"
        " from kubelet_trio.prober.slots import ExecSlots; print(ExecSlots().limit)"
    )
    answer = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert answer.stdout.strip() == "2"
