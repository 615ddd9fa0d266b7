"""How many image pulls run at once and how often they may start (Go: ``images/puller.go``,
``throttledImageService``): ``serializeImagePulls``, ``maxParallelImagePulls``, ``registryPullQPS`` /
``registryBurst``. Times are Trio times under the autojump clock; every pull of the simulated runtime takes
``PULL`` seconds."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from trio.testing import MockClock

from kubelet_trio.api import PodStatus
from kubelet_trio.clock import WallClock
from kubelet_trio.fsio import run_inline
from kubelet_trio.kuberuntime import KubeRuntimeManager
from kubelet_trio.kuberuntime.images import (
    ERR_IMAGE_PULL,
    ERR_IMAGE_PULL_BACKOFF,
    PULL_QPS_EXCEEDED,
    ImageError,
    ImageManager,
)
from kubelet_trio.sim import SimRuntime
from kubelet_trio.testing.node import open_sim_node
from tests.kuberuntime.conftest import WALL_START_NS, app, make_pod, spec_of

PULL = 10.0

Events = list[tuple[str, str, str]]


def images(count: int) -> list[str]:
    return [f"registry.sim/team/app-{index}:1" for index in range(count)]


def sim() -> SimRuntime:
    return SimRuntime(wall_clock_start_ns=WALL_START_NS, id_seed=7, pull_delay=PULL)


def manager(runtime: SimRuntime, events: Events | None = None, **limits: object) -> ImageManager:
    def record(pod: object, type_: str, reason: str, message: str) -> None:
        if events is not None:
            events.append((type_, reason, message))

    return ImageManager(runtime, events=record, **limits)  # type: ignore[arg-type]


async def pull_all(images_manager: ImageManager, refs: list[str]) -> dict[str, float | str]:
    """Ensure each image for a pod of its own, all at once; image -> the Trio time it was there, or the
    reason of its ImageError."""
    started = trio.current_time()
    done: dict[str, float | str] = {}

    async def ensure(index: int, image: str) -> None:
        pod = make_pod([app(image=image)], name=f"p{index}", uid=f"uid-{index}")
        try:
            await images_manager.ensure_image_exists(pod, spec_of(pod))
        except ImageError as err:
            done[image] = err.reason
        else:
            done[image] = trio.current_time() - started

    async with trio.open_nursery() as nursery:
        for index, image in enumerate(refs):
            nursery.start_soon(ensure, index, image)
    return done


async def test_serialized_pulls_run_one_at_a_time(autojump_clock: MockClock) -> None:
    refs = images(3)
    done = await pull_all(manager(sim()), refs)
    assert sorted(done.values()) == [PULL, 2 * PULL, 3 * PULL]


async def test_parallel_pulls_run_at_most_max_at_once(autojump_clock: MockClock) -> None:
    refs = images(5)
    done = await pull_all(manager(sim(), serialize_pulls=False, max_parallel_pulls=2), refs)
    assert sorted(done.values()) == [PULL, PULL, 2 * PULL, 2 * PULL, 3 * PULL]


async def test_parallel_pulls_without_a_max_all_run_at_once(autojump_clock: MockClock) -> None:
    refs = images(5)
    done = await pull_all(manager(sim(), serialize_pulls=False), refs)
    assert list(done.values()) == [PULL] * 5


async def test_the_waiting_is_counted_in_the_pulled_event(autojump_clock: MockClock) -> None:
    events: Events = []
    await pull_all(manager(sim(), events), images(2))
    pulled = sorted(
        message.split(" in ", 1)[1].split(".")[0] for _, reason, message in events if reason == "Pulled"
    )
    assert pulled == ["10s (10s including waiting)", "10s (20s including waiting)"]


async def test_pulls_beyond_the_burst_fail_at_once_with_gos_error(autojump_clock: MockClock) -> None:
    runtime = sim()
    events: Events = []
    images_manager = manager(runtime, events, serialize_pulls=False, pull_qps=1.0, pull_burst=2)
    done = await pull_all(images_manager, images(3))
    assert sorted(map(str, done.values())) == sorted([str(PULL), str(PULL), ERR_IMAGE_PULL])
    [rejected] = [image for image, outcome in done.items() if outcome == ERR_IMAGE_PULL]
    assert rejected not in {tag for image in await runtime.list_images() for tag in image.repo_tags}
    assert ("Warning", "Failed", f'Failed to pull image "{rejected}": {PULL_QPS_EXCEEDED}') in events


async def test_a_rejected_pull_is_backed_off_then_retried(autojump_clock: MockClock) -> None:
    runtime = SimRuntime(wall_clock_start_ns=WALL_START_NS, id_seed=7)  # pulls take no time
    images_manager = manager(runtime, pull_qps=1.0, pull_burst=1)
    first, second = (make_pod([app(image=image)], name=image[-5:], uid=image) for image in images(2))
    await images_manager.ensure_image_exists(first, spec_of(first))
    with pytest.raises(ImageError) as rejected:
        await images_manager.ensure_image_exists(second, spec_of(second))
    assert (rejected.value.reason, rejected.value.message) == (ERR_IMAGE_PULL, PULL_QPS_EXCEEDED)
    assert rejected.value.backoff_until == trio.current_time() + 10  # the first image backoff step
    with pytest.raises(ImageError) as backing_off:
        await images_manager.ensure_image_exists(second, spec_of(second))
    assert (backing_off.value.reason, backing_off.value.message) == (
        ERR_IMAGE_PULL_BACKOFF,
        f'Back-off pulling image "{spec_of(second).image}": {ERR_IMAGE_PULL}: {PULL_QPS_EXCEEDED}',
    )
    await trio.sleep_until(rejected.value.backoff_until)
    await images_manager.ensure_image_exists(second, spec_of(second))  # the bucket has refilled


async def test_the_rate_limit_applies_when_a_pull_gets_its_turn(autojump_clock: MockClock) -> None:
    """Serialized pulls queue first and take their token when they start (Go throttles the image service
    the puller calls): the second pull starts at 10s, when one token every 20s has not come back yet."""
    done = await pull_all(manager(sim(), pull_qps=0.05, pull_burst=1), images(2))
    assert sorted(map(str, done.values())) == sorted([str(PULL), ERR_IMAGE_PULL])


async def test_qps_zero_is_no_limit(autojump_clock: MockClock) -> None:
    done = await pull_all(manager(sim(), serialize_pulls=False, pull_qps=0.0, pull_burst=1), images(20))
    assert set(done.values()) == {PULL}


async def test_the_runtime_manager_hands_the_settings_to_its_image_manager(autojump_clock: MockClock) -> None:
    runtime = sim()
    runtime_manager = KubeRuntimeManager(
        runtime,
        node_name="n",
        clock=WallClock(base_wall_ns=WALL_START_NS, base_trio=trio.current_time()),
        serialize_image_pulls=False,
        max_parallel_image_pulls=2,
        registry_pull_qps=0.01,
        registry_burst=2,
    )
    done = await pull_all(runtime_manager.images, images(3))  # the third starts at 10s: no token
    assert sorted(map(str, done.values())) == sorted([str(PULL), str(PULL), ERR_IMAGE_PULL])


def _waiting(status: PodStatus) -> tuple[str, str] | None:
    for container in status.container_statuses or ():
        waiting = container.state.waiting if container.state is not None else None
        if waiting is not None and waiting.reason in (ERR_IMAGE_PULL, ERR_IMAGE_PULL_BACKOFF):
            return waiting.reason, waiting.message or ""
    return None


async def test_a_node_built_with_the_settings_throttles_its_pulls(
    autojump_clock: MockClock, tmp_path: Path
) -> None:
    """KubeletConfig → the node's runtime manager: two pods pulling at once with a burst of one and a token
    every 100 s; one runs, the other shows Go's error (ErrImagePull, then backing off from it)."""
    clock = WallClock(base_wall_ns=WALL_START_NS, base_trio=trio.current_time())
    runtime = SimRuntime(clock=clock, run_sync=run_inline, pull_delay=PULL)
    async with open_sim_node(
        sim=runtime,
        clock=clock,
        root_dir=str(tmp_path),
        serialize_image_pulls=False,
        registry_pull_qps=0.01,
        registry_burst=1,
    ) as node:
        manifests = [
            make_pod([app(image=image)], name=f"p{i}", uid=f"uid-{i}") for i, image in enumerate(images(2))
        ]
        statuses = [
            await node.wait_for(pod, lambda s: s.phase == "Running" or _waiting(s) is not None)
            for pod in await node.apply(*manifests)
        ]
    shown = [_waiting(status) for status in statuses]
    assert shown.count(None) == 1
    [(reason, message)] = [waiting for waiting in shown if waiting is not None]
    assert reason in (ERR_IMAGE_PULL, ERR_IMAGE_PULL_BACKOFF) and message.endswith(PULL_QPS_EXCEEDED)
