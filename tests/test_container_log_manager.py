"""Container log rotation on the simulated runtime under MockClock: the schedule, the files kept, the
runtime's reopen, and recovery from failures (Go: container_log_manager_test.go)."""

from __future__ import annotations

import gzip
import logging
import os
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from kubelet_trio.clock import WallClock
from kubelet_trio.container_log_manager import ContainerLogManager, LogRotatePolicy, rotated_name
from kubelet_trio.cri import errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.fsio import run_inline
from kubelet_trio.kuberuntime.logs_reader import LogOptions, read_text
from kubelet_trio.logs import format_fields
from kubelet_trio.sim.runtime import SimRuntime
from tests.sim.pods import IMAGE, WALL_START_NS, Pods

INTERVAL = 10.0
LINE = "x" * 200  # ~250 bytes a record: 10 records a round is more than the 1000-byte limit


@attrs.define(eq=False, kw_only=True)
class CountingSim(SimRuntime):
    """Records ``(trio time, container id)`` of ContainerStatus and ReopenContainerLog calls; a reopen
    can be made to fail."""

    statuses: list[tuple[float, str]] = attrs.field(factory=list, init=False)
    listings: int = attrs.field(default=0, init=False)
    reopens: list[tuple[float, str]] = attrs.field(factory=list, init=False)
    reopen_fails: bool = False

    async def container_status(self, container_id: str, verbose: bool = False) -> pb.ContainerStatusResponse:
        self.statuses.append((trio.current_time(), container_id))
        return await super().container_status(container_id, verbose)

    async def list_containers(self, filter: pb.ContainerFilter | None = None) -> list[pb.Container]:
        self.listings += 1
        return await super().list_containers(filter)

    async def reopen_container_log(self, container_id: str) -> None:
        self.reopens.append((trio.current_time(), container_id))
        if self.reopen_fails:
            raise errors.CriCallError("ReopenContainerLog", "container is not running")
        await super().reopen_container_log(container_id)


@attrs.define
class Setup:
    sim: CountingSim
    clock: WallClock
    container_id: str
    log: Path
    start: float

    def files(self) -> list[str]:
        return sorted(os.listdir(self.log.parent))

    def rotated(self, at: float) -> str:
        """The name a rotation at Trio time ``at`` gives."""
        wall_ns = self.clock.base_wall_ns + round((at - self.clock.base_trio) * 1e9)
        return os.path.basename(rotated_name(str(self.log), wall_ns))


@pytest.fixture
async def setup(tmp_path: Path) -> Setup:
    clock = WallClock(base_wall_ns=WALL_START_NS)
    sim = CountingSim(clock=clock, run_sync=run_inline, preloaded_images=[IMAGE])
    pods = Pods(sim, tmp_path / "logs")
    sandbox_id, config = await pods.sandbox({"app": 'print "started"; run'})
    container_id = await pods.container(sandbox_id, config, "app")
    log = Path(config.log_directory) / "app" / "0.log"
    return Setup(sim, clock, container_id, log, trio.current_time())


async def chatter(setup: Setup, count: int, *, every: float = 1.0) -> None:
    """The container prints ``line <i>`` every second, half a second off the rotation rounds."""
    await trio.sleep(0.5)
    for i in range(count):
        await setup.sim.write_log(setup.container_id, f"line {i} {LINE}\n")
        await trio.sleep(every)


def manager(setup: Setup, *, max_size: int = 1000, max_files: int = 3) -> ContainerLogManager:
    return ContainerLogManager(
        runtime=setup.sim,
        policy=LogRotatePolicy(max_size, max_files),
        monitor_interval=INTERVAL,
        clock=setup.clock,
        run_sync=run_inline,
    )


def printed(setup: Setup) -> list[str]:
    """What the kept files hold, oldest first, as the reader serves it."""
    text = read_text(str(setup.log), LogOptions()).decode()
    return [line.split(" ", 2)[1] if line.startswith("line ") else line for line in text.splitlines()]


async def test_rotation_schedule_and_files_kept(autojump_clock: trio.testing.MockClock, setup: Setup) -> None:
    async with trio.open_nursery() as nursery:
        await nursery.start(manager(setup).run)
        nursery.start_soon(chatter, setup, 45)
        seen: list[list[str]] = []
        for round_ in range(5):
            await trio.sleep_until(setup.start + round_ * INTERVAL + 0.25)
            seen.append(setup.files())
        t10, t20, t30, t40 = (setup.rotated(setup.start + k * INTERVAL) for k in (1, 2, 3, 4))
        assert seen == [
            ["0.log"],  # round 0: 9 bytes, nothing to do
            ["0.log", t10],  # round 1: rotated, newest kept uncompressed
            ["0.log", t10 + ".gz", t20],  # round 2: the older one compressed
            ["0.log", t20 + ".gz", t30],  # round 3: 3 files at most, the oldest removed
            ["0.log", t30 + ".gz", t40],
        ]
        # a reopen per rotation, at the rounds; the log path asked for once
        assert setup.sim.reopens == [(setup.start + k * INTERVAL, setup.container_id) for k in (1, 2, 3, 4)]
        assert setup.sim.statuses == [(setup.start, setup.container_id)]
        # nothing lost between the files: lines 20-39 are in the kept files, in order
        assert printed(setup) == [str(i) for i in range(20, 40)]
        with gzip.open(setup.log.parent / (t30 + ".gz")) as f:
            assert f.read().decode().count("\n") == 10
        nursery.cancel_scope.cancel()


async def test_output_before_the_reopen_stays_in_the_rotated_file(
    autojump_clock: trio.testing.MockClock, setup: Setup
) -> None:
    """The runtime writes to the file it holds open until it reopens: a write between the rename and
    the reopen lands in the rotated file (the simulated runtime behaves like containerd here)."""
    await setup.sim.write_log(setup.container_id, f"{LINE * 5}\n")
    rotated = rotated_name(str(setup.log), setup.clock.wall_ns())
    os.rename(setup.log, rotated)
    await setup.sim.write_log(setup.container_id, "after the rename\n")
    await setup.sim.reopen_container_log(setup.container_id)
    await setup.sim.write_log(setup.container_id, "after the reopen\n")
    assert (await trio.Path(rotated).read_text()).endswith(" stdout F after the rename\n")
    assert setup.log.read_text().endswith(" stdout F after the reopen\n")
    assert setup.log.read_text().count("\n") == 1


async def test_a_missing_log_is_reopened(autojump_clock: trio.testing.MockClock, setup: Setup) -> None:
    async with trio.open_nursery() as nursery:
        await nursery.start(manager(setup).run)
        await trio.sleep(5)
        setup.log.unlink()
        await setup.sim.write_log(setup.container_id, "lost\n")  # the runtime's file is gone
        await trio.sleep(INTERVAL)
        assert setup.sim.reopens == [(setup.start + INTERVAL, setup.container_id)]
        await setup.sim.write_log(setup.container_id, "found\n")
        assert read_text(str(setup.log), LogOptions()) == b"found\n"
        nursery.cancel_scope.cancel()


async def test_a_refused_reopen_undoes_the_rename(
    autojump_clock: trio.testing.MockClock, setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    setup.sim.reopen_fails = True
    await setup.sim.write_log(setup.container_id, f"{LINE * 5}\n")
    before = setup.log.read_bytes()
    with caplog.at_level(logging.WARNING, logger="kubelet_trio.container_log_manager"):
        await manager(setup).rotate_logs()
    assert setup.files() == ["0.log"] and setup.log.read_bytes() == before
    assert [f"{r.getMessage()} {format_fields(r)}" for r in caplog.records] == [
        f"failed to rotate container log container={setup.container_id} path={setup.log} "
        'error="ReopenContainerLog: container is not running"'
    ]
    setup.sim.reopen_fails = False
    await manager(setup).rotate_logs()  # the next round rotates
    assert setup.files() == ["0.log", setup.rotated(trio.current_time())]


async def test_leftovers_go_and_a_taken_name_postpones(
    autojump_clock: trio.testing.MockClock, setup: Setup
) -> None:
    await setup.sim.write_log(setup.container_id, f"{LINE * 5}\n")
    directory = setup.log.parent
    (directory / "0.log.20200101-000000.gz.tmp").write_text("half a gzip")
    (directory / "0.log.20200101-000000").write_text("compressed already")
    with gzip.open(directory / "0.log.20200101-000000.gz", "wb") as f:
        f.write(b"compressed already")
    taken = setup.rotated(trio.current_time())
    (directory / taken).write_text("someone else's\n")
    await manager(setup).rotate_logs()
    # leftovers gone, the oldest file too (3 at most); the name of this second is taken (a rotation a
    # moment ago): nothing is renamed over it
    assert setup.files() == ["0.log", taken + ".gz"]
    assert setup.sim.reopens == []
    await trio.sleep(1)
    await manager(setup).rotate_logs()
    assert setup.files() == ["0.log", taken + ".gz", setup.rotated(trio.current_time())]


async def test_a_negative_size_turns_rotation_off(
    autojump_clock: trio.testing.MockClock, setup: Setup
) -> None:
    await setup.sim.write_log(setup.container_id, f"{LINE * 50}\n")
    with trio.fail_after(1):
        await manager(setup, max_size=-1).run()  # returns at once
    assert setup.files() == ["0.log"] and setup.sim.statuses == []


async def test_exited_containers_are_not_rotated(
    autojump_clock: trio.testing.MockClock, setup: Setup
) -> None:
    await setup.sim.write_log(setup.container_id, f"{LINE * 50}\n")
    setup.sim.crash_container(setup.container_id, 1)
    await manager(setup).rotate_logs()
    assert setup.files() == ["0.log"] and setup.sim.statuses == []


def test_policy_needs_two_files() -> None:
    with pytest.raises(ValueError, match="containerLogMaxFiles must be at least 2, got 1"):
        LogRotatePolicy(max_files=1)


async def test_an_unreadable_log_is_logged_and_the_round_goes_on(
    autojump_clock: trio.testing.MockClock, setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    directory = setup.log.parent
    for name in os.listdir(directory):
        os.remove(directory / name)
    directory.rmdir()
    directory.write_text("a file where the log directory was")
    with caplog.at_level(logging.WARNING, logger="kubelet_trio.container_log_manager"):
        await manager(setup).rotate_logs()
    assert [f"{r.getMessage()} {format_fields(r)}" for r in caplog.records] == [
        f"failed to rotate container log container={setup.container_id} path={setup.log} "
        f"error=\"[Errno 20] Not a directory: '{setup.log}'\""
    ]


async def test_running_containers_from_the_kubelet_need_no_listing(
    autojump_clock: trio.testing.MockClock, setup: Setup
) -> None:
    await setup.sim.write_log(setup.container_id, f"{LINE * 5}\n")
    running: list[str] = []
    rotator = attrs.evolve(manager(setup), running_containers=lambda: running)
    await rotator.rotate_logs()
    assert setup.files() == ["0.log"]  # not running as far as the kubelet knows
    running.append(setup.container_id)
    await rotator.rotate_logs()
    assert setup.files() == ["0.log", setup.rotated(trio.current_time())]
    assert setup.sim.listings == 0
