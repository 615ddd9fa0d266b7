"""Image GC on the simulated runtime under MockClock: LRU order, thresholds, minimum age, images in use,
the sandbox image and pinned images, events, policy validation."""

from __future__ import annotations

import json
import os
from pathlib import Path

import attrs
import pytest
import trio
from trio.testing import MockClock

from kubelet_trio.clock import WallClock
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.fsio import run_inline
from kubelet_trio.images import (
    FixedCapacityImageFs,
    FsStats,
    ImageGCError,
    ImageGCManager,
    ImageGCPolicy,
    StatvfsImageFs,
)
from kubelet_trio.images.gc import FREE_DISK_SPACE_FAILED, IMAGE_GC_FAILED, INVALID_DISK_CAPACITY
from kubelet_trio.sim.runtime import SimRuntime

REFS = [f"registry.test/app-{i}:1" for i in range(10)]


@attrs.define(eq=False, kw_only=True)
class RecordingSim(SimRuntime):
    """Records the order images are removed in; reports a sandbox image and pinned images."""

    sandbox_image: str = ""
    pinned: frozenset[str] = frozenset()
    removed: list[str] = attrs.Factory(list)

    async def remove_image(self, image: pb.ImageSpec) -> None:
        self.removed.append(image.image)
        await super().remove_image(image)

    async def status(self, verbose: bool = False) -> pb.StatusResponse:
        response = await super().status(verbose)
        if verbose and self.sandbox_image:
            response.info["config"] = json.dumps({"sandboxImage": self.sandbox_image})
        return response

    async def list_images(self, filter: pb.ImageFilter | None = None) -> list[pb.Image]:
        images = await super().list_images(filter)
        for image in images:
            image.pinned = bool(set(image.repo_tags) & self.pinned)
        return images


def make_sim(**kwargs: object) -> RecordingSim:
    return RecordingSim(clock=WallClock(), run_sync=run_inline, preloaded_images=REFS, **kwargs)  # type: ignore[arg-type]


async def image_id(sim: SimRuntime, ref: str) -> str:
    found = await sim.image_status(pb.ImageSpec(image=ref))
    assert found is not None
    return found.id


async def sizes(sim: SimRuntime) -> dict[str, int]:
    return {image.id: image.size for image in await sim.list_images()}


async def use_image(sim: SimRuntime, ref: str, name: str) -> str:
    """A sandbox with one running container of ``ref``; returns the sandbox id."""
    meta = pb.PodSandboxMetadata(name=name, namespace="default", uid=f"uid-{name}")
    sandbox_config = pb.PodSandboxConfig(metadata=meta)
    sandbox = await sim.run_pod_sandbox(sandbox_config)
    container = await sim.create_container(
        sandbox,
        pb.ContainerConfig(metadata=pb.ContainerMetadata(name="c"), image=pb.ImageSpec(image=ref)),
        sandbox_config,
    )
    await sim.start_container(container)
    return sandbox


async def stop_using(sim: SimRuntime, sandbox: str) -> None:
    await sim.stop_pod_sandbox(sandbox)
    await sim.remove_pod_sandbox(sandbox)


async def used_bytes(sim: SimRuntime) -> int:
    info = await sim.image_fs_info()
    value = info.image_filesystems[0].used_bytes
    assert value is not None
    return value.value


async def test_unused_images_go_least_recently_used_first(
    autojump_clock: MockClock, nursery: trio.Nursery
) -> None:
    sim = make_sim()
    gc = ImageGCManager(sim, FixedCapacityImageFs(sim, 10**12), ImageGCPolicy(min_age=0))
    await nursery.start(gc.run)  # detection at t=0: the preloaded images count as detected long ago
    ids = [await image_id(sim, ref) for ref in REFS]
    b = await use_image(sim, REFS[1], "b")  # used 10 s..50 s: last seen in use by the detection at 30 s
    await trio.sleep(10)
    await trio.sleep(40)
    await stop_using(sim, b)
    a = await use_image(sim, REFS[0], "a")  # used from 50 s: seen at 60 s
    await trio.sleep(15)
    await stop_using(sim, a)
    await sim.pull_image(pb.ImageSpec(image="registry.test/late:1"))  # detected at 90 s
    late = await image_id(sim, "registry.test/late:1")
    keep = await use_image(sim, REFS[2], "keep")  # in use throughout
    await trio.sleep(40)
    records = gc.records()
    assert records[ids[1]][1] == 30.0 and records[ids[0]][1] == 60.0 and records[late][0] == 90.0

    expected = [*ids[3:], late, ids[1], ids[0]]  # never used (oldest first), then by last use
    image_sizes = await sizes(sim)
    freed = await gc.delete_unused_images()
    assert sim.removed == expected
    assert freed == sum(image_sizes[i] for i in expected)
    assert [image.id for image in await sim.list_images()] == [ids[2]]
    await stop_using(sim, keep)


async def fill_to(sim: SimRuntime, percent_used: float) -> int:
    """The capacity at which the sim's images fill ``percent_used`` of the image filesystem."""
    return int(await used_bytes(sim) * 100 / percent_used)


async def test_over_the_high_threshold_frees_down_to_the_low_one(autojump_clock: MockClock) -> None:
    sim = make_sim()
    capacity = await fill_to(sim, 95.0)
    fs = FixedCapacityImageFs(sim, capacity)
    gc = ImageGCManager(sim, fs, ImageGCPolicy(high_threshold_percent=85, low_threshold_percent=80))
    await gc._detect_images(float("-inf"))
    before = await fs.image_fs_stats()
    to_free = capacity * 20 // 100 - before.available
    await gc.garbage_collect()
    after = await fs.image_fs_stats()
    assert 100 - after.available * 100 // after.capacity <= 80  # Go's usage percent
    freed = before.available and after.available - before.available
    assert freed >= to_free
    # it stops as soon as enough is freed: without the last image removed it would not be enough
    last = (await sizes(make_sim()))[sim.removed[-1]]
    assert freed - last < to_free
    assert 1 <= len(sim.removed) < len(REFS)


async def test_below_the_high_threshold_nothing_is_removed(autojump_clock: MockClock) -> None:
    sim = make_sim()
    fs = FixedCapacityImageFs(sim, await fill_to(sim, 83.5))
    policy = ImageGCPolicy(high_threshold_percent=85, low_threshold_percent=80, min_age=0)
    gc = ImageGCManager(sim, fs, policy)
    await gc.garbage_collect()
    assert sim.removed == []
    # Go's integer percentage rounds the free share down: 84.5 % used counts as 85 %, the threshold
    fs.capacity = await fill_to(sim, 84.5)
    await gc.garbage_collect()
    assert sim.removed != []


async def test_images_younger_than_the_minimum_age_stay(
    autojump_clock: MockClock, nursery: trio.Nursery
) -> None:
    sim = RecordingSim(clock=WallClock(), run_sync=run_inline)
    gc = ImageGCManager(sim, FixedCapacityImageFs(sim, 1), ImageGCPolicy(min_age=120.0), gc_period=300.0)
    await nursery.start(gc.run)
    await sim.pull_image(pb.ImageSpec(image="registry.test/new:1"))
    new = await image_id(sim, "registry.test/new:1")
    await trio.sleep(31)
    detected = gc.records()[new][0]
    assert detected in (0.0, 30.0)  # by the collection at 0 s or the detection at 30 s
    await trio.sleep(detected + 119.5 - trio.current_time())
    assert await gc.delete_unused_images() == 0  # 119.5 s old
    await trio.sleep(0.5)
    assert await gc.delete_unused_images() > 0
    assert sim.removed == [new]


async def test_periodic_collection_removes_once_old_enough(
    autojump_clock: MockClock, nursery: trio.Nursery
) -> None:
    sim = RecordingSim(clock=WallClock(), run_sync=run_inline)
    await sim.pull_image(pb.ImageSpec(image="registry.test/x:1"))
    x = await image_id(sim, "registry.test/x:1")
    events: list[tuple[float, str]] = []
    gc = ImageGCManager(
        sim,
        FixedCapacityImageFs(sim, 1),  # always full
        ImageGCPolicy(min_age=120.0),
        events=lambda _type, reason, _message: events.append((trio.current_time(), reason)),
    )
    await nursery.start(gc.run)
    await trio.sleep(1)
    assert sim.removed == [x]  # present at the first detection: old enough for the collection at 0 s
    await sim.pull_image(pb.ImageSpec(image="registry.test/y:1"))  # at 1 s, detected at 30 s
    y = await image_id(sim, "registry.test/y:1")
    await trio.sleep(298)
    assert sim.removed == [x]
    await trio.sleep(2)  # the collection at 300 s: y is 270 s old
    assert sim.removed == [x, y]
    assert events == []  # each time enough was freed


async def test_images_in_use_the_sandbox_image_and_pinned_images_stay(autojump_clock: MockClock) -> None:
    sim = make_sim(sandbox_image=REFS[0], pinned=frozenset({REFS[1]}))
    gc = ImageGCManager(sim, FixedCapacityImageFs(sim, 1), ImageGCPolicy(min_age=0), keep=(REFS[2],))
    sandbox = await use_image(sim, REFS[3], "busy")
    await sim.stop_pod_sandbox(sandbox)  # an exited container still holds its image
    await gc.delete_unused_images()
    left = {tag for image in await sim.list_images() for tag in image.repo_tags}
    assert left == {REFS[0], REFS[1], REFS[2], REFS[3]}
    assert len(sim.removed) == len(REFS) - 4


async def test_not_enough_to_free_is_an_event_and_repeated_failures_another(
    autojump_clock: MockClock,
) -> None:
    sim = make_sim()
    events: list[tuple[str, str, str]] = []
    gc = ImageGCManager(
        sim,
        FixedCapacityImageFs(sim, 1000),
        ImageGCPolicy(min_age=3600.0),
        events=lambda *event: events.append(event),
    )
    await gc._detect_images(0.0)  # all young
    assert not await gc.garbage_collect_once()
    assert events == [
        (
            "Warning",
            FREE_DISK_SPACE_FAILED,
            "Failed to garbage collect required amount of images. Attempted to free 200 bytes, "
            "but only found 0 bytes eligible to free.",
        )
    ]
    assert not await gc.garbage_collect_once()
    assert [reason for _, reason, _ in events] == [
        FREE_DISK_SPACE_FAILED,
        FREE_DISK_SPACE_FAILED,
        IMAGE_GC_FAILED,
    ]
    assert sim.removed == []


async def test_zero_capacity_is_invalid(autojump_clock: MockClock) -> None:
    class Empty:
        async def image_fs_stats(self) -> FsStats:
            return FsStats(0, 0, "/var/lib/containerd")

    events: list[str] = []
    gc = ImageGCManager(make_sim(), Empty(), events=lambda _t, reason, _m: events.append(reason))
    with pytest.raises(ImageGCError, match="invalid capacity 0"):
        await gc.garbage_collect()
    assert events == [INVALID_DISK_CAPACITY]


@pytest.mark.parametrize(
    ("high", "low", "message"),
    [
        (101, 80, "imageGCHighThresholdPercent: 101"),
        (85, -1, "imageGCLowThresholdPercent: -1"),
        (70, 80, r"imageGCLowThresholdPercent \(80\) must not be greater"),
    ],
)
def test_policy_validation_names_the_setting(high: int, low: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ImageGCPolicy(high_threshold_percent=high, low_threshold_percent=low)


async def test_high_threshold_100_disables_collection(
    autojump_clock: MockClock, nursery: trio.Nursery
) -> None:
    sim = make_sim()
    gc = ImageGCManager(
        sim, FixedCapacityImageFs(sim, 1), ImageGCPolicy(high_threshold_percent=100, min_age=0)
    )
    await nursery.start(gc.run)
    await trio.sleep(3600)
    assert sim.removed == []


async def test_an_image_filesystem_not_on_this_machine_is_not_collected_for(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The simulated runtime's ImageFsInfo names a mountpoint that does not exist here: nothing to
    measure, so no collection, no event, one info line (not an error every period)."""
    sim = make_sim()
    events: list[str] = []
    gc = ImageGCManager(
        sim, StatvfsImageFs(sim, run_inline), ImageGCPolicy(min_age=0), events=lambda *e: events.append(e[1])
    )
    caplog.set_level("INFO", logger="kubelet_trio.images.gc")
    for _ in range(3):
        assert await gc.garbage_collect_once()
    assert sim.removed == [] and events == []
    assert [r.getMessage() for r in caplog.records] == [
        "image filesystem not visible, no disk-usage image collection"
    ]


async def test_statvfs_measures_the_mountpoint_the_runtime_names(
    autojump_clock: MockClock, tmp_path: Path
) -> None:
    class HereSim(RecordingSim):
        async def image_fs_info(self) -> pb.ImageFsInfoResponse:
            usage = pb.FilesystemUsage(fs_id=pb.FilesystemIdentifier(mountpoint=str(tmp_path)))
            return pb.ImageFsInfoResponse(image_filesystems=[usage])

    stats = await StatvfsImageFs(HereSim(clock=WallClock(), run_sync=run_inline), run_inline).image_fs_stats()
    st = os.statvfs(tmp_path)
    assert (stats.capacity, stats.mountpoint) == (st.f_blocks * st.f_frsize, str(tmp_path))
    assert 0 < stats.available <= stats.capacity
