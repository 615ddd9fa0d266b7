"""GenericPLEG against a scripted fake runtime, on virtual time."""

from __future__ import annotations

import logging

import attrs
import pytest
import trio
import trio.testing

from kubelet_trio.clock import go_duration
from kubelet_trio.container.cache import PodCache
from kubelet_trio.container.types import (
    ContainerState,
    ContainerStatus,
    PodStatus,
    RuntimeContainer,
    RuntimePod,
    SandboxStatus,
)
from kubelet_trio.pleg import GenericPLEG, PodLifecycleEvent, PodLifecycleEventType, compute_events

S = ContainerState
T = PodLifecycleEventType
UID = "uid-1"


class RuntimeDown(Exception):
    pass


@attrs.define
class FakeRuntime:
    """Returns whatever the test put in ``pods``/``statuses``; can fail or be slow on demand."""

    pods: list[RuntimePod] = attrs.Factory(list)
    statuses: dict[str, PodStatus] = attrs.Factory(dict)
    list_error: Exception | None = None
    status_errors: dict[str, Exception] = attrs.Factory(dict)
    list_delay: float = 0.0
    list_calls: list[float] = attrs.Factory(list)
    status_calls: list[str] = attrs.Factory(list)

    async def get_pods(self, all: bool = True) -> list[RuntimePod]:
        assert all
        self.list_calls.append(trio.current_time())
        if self.list_delay:
            await trio.sleep(self.list_delay)
        if self.list_error is not None:
            raise self.list_error
        return list(self.pods)

    async def get_pod_status(self, uid: str, name: str, namespace: str) -> PodStatus:
        self.status_calls.append(uid)
        if uid in self.status_errors:
            raise self.status_errors[uid]
        return self.statuses.get(uid, PodStatus(uid=uid, name=name, namespace=namespace))


def pod(
    *containers: RuntimeContainer, sandboxes: tuple[RuntimeContainer, ...] = (), uid: str = UID
) -> RuntimePod:
    return RuntimePod(uid=uid, name="web", namespace="default", containers=containers, sandboxes=sandboxes)


def c(cid: str, state: ContainerState, name: str = "app") -> RuntimeContainer:
    return RuntimeContainer(id=cid, name=name, state=state)


def drain(pleg: GenericPLEG) -> list[PodLifecycleEvent]:
    events = []
    while True:
        try:
            events.append(pleg.events.receive_nowait())
        except trio.WouldBlock:
            return events


def make(runtime: FakeRuntime, **kwargs: object) -> tuple[GenericPLEG, PodCache]:
    cache = PodCache()
    return GenericPLEG(runtime, cache, **kwargs), cache  # type: ignore[arg-type]


# --- the event table -------------------------------------------------------------------------------

NONE = None  # the container is absent from the listing ("non-existent")


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        # new running
        (NONE, S.RUNNING, [T.CONTAINER_STARTED]),
        (S.CREATED, S.RUNNING, [T.CONTAINER_STARTED]),
        (S.EXITED, S.RUNNING, [T.CONTAINER_STARTED]),
        (S.UNKNOWN, S.RUNNING, [T.CONTAINER_STARTED]),
        (S.RUNNING, S.RUNNING, []),
        # new exited
        (NONE, S.EXITED, [T.CONTAINER_DIED]),
        (S.RUNNING, S.EXITED, [T.CONTAINER_DIED]),
        (S.CREATED, S.EXITED, [T.CONTAINER_DIED]),
        (S.UNKNOWN, S.EXITED, [T.CONTAINER_DIED]),
        (S.EXITED, S.EXITED, []),
        # new unknown (created counts as unknown): ContainerChanged is computed but never sent
        (NONE, S.CREATED, []),
        (NONE, S.UNKNOWN, []),
        (S.RUNNING, S.UNKNOWN, []),
        (S.CREATED, S.UNKNOWN, []),  # both map to unknown: nothing at all
        # new non-existent
        (S.EXITED, NONE, [T.CONTAINER_REMOVED]),
        (S.RUNNING, NONE, [T.CONTAINER_DIED, T.CONTAINER_REMOVED]),
        (S.UNKNOWN, NONE, [T.CONTAINER_DIED, T.CONTAINER_REMOVED]),
        (S.CREATED, NONE, [T.CONTAINER_DIED, T.CONTAINER_REMOVED]),
    ],
)
async def test_event_table(
    autojump_clock: trio.testing.MockClock,
    old: ContainerState | None,
    new: ContainerState | None,
    expected: list[PodLifecycleEventType],
) -> None:
    sandbox = (c("sb", S.RUNNING, name=""),)
    runtime = FakeRuntime(pods=[pod(*([c("c1", old)] if old else []), sandboxes=sandbox)])
    pleg, _ = make(runtime)
    await pleg.relist()
    drain(pleg)
    runtime.pods = [pod(*([c("c1", new)] if new else []), sandboxes=sandbox)]
    await pleg.relist()
    assert drain(pleg) == [PodLifecycleEvent(UID, t, "c1") for t in expected]


def test_compute_events_includes_container_changed() -> None:
    events = compute_events(UID, pod(c("c1", S.RUNNING)), pod(c("c1", S.UNKNOWN)))
    assert events == [PodLifecycleEvent(UID, T.CONTAINER_CHANGED, "c1")]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (NONE, S.RUNNING, [T.CONTAINER_STARTED]),  # sandbox READY
        (S.RUNNING, S.EXITED, [T.CONTAINER_DIED]),  # READY -> NOTREADY
        (S.EXITED, NONE, [T.CONTAINER_REMOVED]),
        (S.RUNNING, NONE, [T.CONTAINER_DIED, T.CONTAINER_REMOVED]),
    ],
)
async def test_sandboxes_are_diffed_like_containers(
    autojump_clock: trio.testing.MockClock,
    old: ContainerState | None,
    new: ContainerState | None,
    expected: list[PodLifecycleEventType],
) -> None:
    keep = c("c1", S.RUNNING)
    runtime = FakeRuntime(pods=[pod(keep, sandboxes=(c("sb", old, name=""),) if old else ())])
    pleg, _ = make(runtime)
    await pleg.relist()
    drain(pleg)
    runtime.pods = [pod(keep, sandboxes=(c("sb", new, name=""),) if new else ())]
    await pleg.relist()
    assert drain(pleg) == [PodLifecycleEvent(UID, t, "sb") for t in expected]


async def test_vanished_pod_reports_died_and_removed_and_leaves_the_cache(
    autojump_clock: trio.testing.MockClock,
) -> None:
    runtime = FakeRuntime(
        pods=[pod(c("c1", S.RUNNING), c("c2", S.EXITED), sandboxes=(c("sb", S.RUNNING, ""),))]
    )
    pleg, cache = make(runtime)
    await pleg.relist()
    assert {e.type for e in drain(pleg)} == {T.CONTAINER_STARTED, T.CONTAINER_DIED}
    assert cache.get_entry(UID) is not None

    runtime.pods = []
    await pleg.relist()
    assert drain(pleg) == [
        PodLifecycleEvent(UID, T.CONTAINER_DIED, "c1"),
        PodLifecycleEvent(UID, T.CONTAINER_REMOVED, "c1"),
        PodLifecycleEvent(UID, T.CONTAINER_REMOVED, "c2"),
        PodLifecycleEvent(UID, T.CONTAINER_DIED, "sb"),
        PodLifecycleEvent(UID, T.CONTAINER_REMOVED, "sb"),
    ]
    assert cache.get_entry(UID) is None
    # The record is gone: a later relist has nothing more to say.
    await pleg.relist()
    assert drain(pleg) == []


async def test_only_changed_pods_are_inspected(autojump_clock: trio.testing.MockClock) -> None:
    runtime = FakeRuntime(pods=[pod(c("a", S.RUNNING), uid="p1"), pod(c("b", S.RUNNING), uid="p2")])
    pleg, _ = make(runtime)
    await pleg.relist()
    assert sorted(runtime.status_calls) == ["p1", "p2"]
    runtime.status_calls.clear()
    runtime.pods = [pod(c("a", S.EXITED), uid="p1"), pod(c("b", S.RUNNING), uid="p2")]
    await pleg.relist()
    assert runtime.status_calls == ["p1"]
    assert drain(pleg)[-1] == PodLifecycleEvent("p1", T.CONTAINER_DIED, "a")


async def test_a_pod_a_worker_inspected_during_the_listing_is_not_inspected_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    runtime = FakeRuntime(pods=[pod(c("a", S.RUNNING), uid="p1"), pod(c("b", S.RUNNING), uid="p2")])
    pleg, cache = make(runtime)
    await pleg.relist()
    runtime.status_calls.clear()
    runtime.pods = [pod(c("a", S.EXITED), uid="p1"), pod(c("b", S.EXITED), uid="p2")]
    runtime.list_delay = 1.0
    workers_view = PodStatus(uid="p1", name="web", namespace="default")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pleg.relist)
        await trio.sleep(0.5)  # the listing has begun: p1's worker inspects it after acting on it
        cache.set("p1", workers_view, None, trio.current_time())
        before_listing = trio.current_time() - 0.6
        cache.set("p2", PodStatus(uid="p2", name="web", namespace="default"), None, before_listing)
    assert runtime.status_calls == ["p2"]  # p2's entry predates the listing: inspected again
    assert pleg.reused_inspections == 1
    assert cache.get("p1") is workers_view
    events = drain(pleg)
    assert PodLifecycleEvent("p1", T.CONTAINER_DIED, "a") in events
    assert PodLifecycleEvent("p2", T.CONTAINER_DIED, "b") in events


async def test_an_earlier_inspection_that_agrees_with_the_listing_is_reused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A worker inspected after starting ``a`` but before the listing began: same instances, same states,
    so not inspected again; ``p2``'s entry shows ``b`` still running, so it is."""
    runtime = FakeRuntime(pods=[pod(uid="p1"), pod(c("b", S.RUNNING), uid="p2")])
    pleg, cache = make(runtime)
    await pleg.relist()
    runtime.status_calls.clear()
    sandbox = SandboxStatus(id="sb", attempt=0, ready=True)
    workers_view = PodStatus(
        uid="p1",
        name="web",
        namespace="default",
        container_statuses=(ContainerStatus(id="a", name="app", state=S.RUNNING),),
        sandbox_statuses=(sandbox,),
    )
    cache.set("p1", workers_view, None, trio.current_time())
    stale = PodStatus(uid="p2", container_statuses=(ContainerStatus(id="b", name="app", state=S.RUNNING),))
    cache.set("p2", stale, None, trio.current_time())
    await trio.sleep(1)
    runtime.pods = [
        pod(c("a", S.RUNNING), sandboxes=(c("sb", S.RUNNING),), uid="p1"),
        pod(c("b", S.EXITED), uid="p2"),
    ]
    await pleg.relist()
    assert runtime.status_calls == ["p2"]
    assert pleg.reused_inspections == 1
    assert cache.get("p1") is workers_view
    events = drain(pleg)
    assert PodLifecycleEvent("p1", T.CONTAINER_STARTED, "a") in events
    assert PodLifecycleEvent("p2", T.CONTAINER_DIED, "b") in events


# --- errors ----------------------------------------------------------------------------------------


async def test_relist_error_emits_nothing_and_keeps_cache_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    runtime = FakeRuntime(pods=[pod(c("c1", S.RUNNING))])
    pleg, cache = make(runtime)
    await pleg.relist()
    first = trio.current_time()
    drain(pleg)
    assert cache.timestamp == first
    assert pleg.last_relist_time == first

    await trio.sleep(5)
    runtime.pods = [pod(c("c1", S.EXITED))]
    runtime.list_error = RuntimeDown("runtime is down")
    await pleg.relist()
    assert drain(pleg) == []
    assert cache.timestamp == first
    assert pleg.last_relist_time == first
    assert runtime.status_calls == [UID]  # no inspection either

    # Once listing works again the change is seen (nothing was lost).
    runtime.list_error = None
    await pleg.relist()
    assert drain(pleg) == [PodLifecycleEvent(UID, T.CONTAINER_DIED, "c1")]
    assert cache.timestamp == trio.current_time()


async def test_reinspection_after_status_error_reemits_the_same_events(
    autojump_clock: trio.testing.MockClock,
) -> None:
    runtime = FakeRuntime(pods=[pod(c("c1", S.RUNNING))])
    runtime.status_errors[UID] = RuntimeDown("inspect failed")
    pleg, cache = make(runtime)

    await pleg.relist()
    assert drain(pleg) == []  # none of the pod's events this round
    entry = cache.get_entry(UID)
    assert entry is not None and isinstance(entry.error, RuntimeDown)
    with pytest.raises(RuntimeDown):
        await cache.get_newer_than(UID, trio.current_time() - 1)
    assert cache.timestamp == trio.current_time()  # the relist itself succeeded

    await trio.sleep(1)
    await pleg.relist()  # still failing: still nothing, still queued
    assert drain(pleg) == []
    assert runtime.status_calls == [UID, UID]

    del runtime.status_errors[UID]
    runtime.statuses[UID] = PodStatus(uid=UID, name="web", namespace="default", ips=("10.0.0.5",))
    await trio.sleep(1)
    await pleg.relist()
    assert drain(pleg) == [PodLifecycleEvent(UID, T.CONTAINER_STARTED, "c1")]
    entry = cache.get_entry(UID)
    assert entry is not None and entry.error is None and entry.status.ips == ("10.0.0.5",)

    # The record advanced: the pod is neither re-inspected nor re-reported.
    await pleg.relist()
    assert drain(pleg) == []
    assert runtime.status_calls == [UID, UID, UID]


async def test_reinspection_of_a_pod_without_new_events(autojump_clock: trio.testing.MockClock) -> None:
    """A failed pod is inspected again even if its listing did not change in between."""
    runtime = FakeRuntime(pods=[pod(c("c1", S.RUNNING))])
    pleg, _ = make(runtime)
    await pleg.relist()
    drain(pleg)
    runtime.pods = [pod(c("c1", S.EXITED))]
    runtime.status_errors[UID] = RuntimeDown("inspect failed")
    await pleg.relist()
    assert drain(pleg) == []
    del runtime.status_errors[UID]
    await pleg.relist()
    assert drain(pleg) == [PodLifecycleEvent(UID, T.CONTAINER_DIED, "c1")]


# --- cache -----------------------------------------------------------------------------------------


async def test_cache_keeps_old_ips_when_pod_is_torn_down(autojump_clock: trio.testing.MockClock) -> None:
    ready = SandboxStatus(id="sb", attempt=0, ready=True, ip="10.0.0.7")
    runtime = FakeRuntime(
        pods=[pod(c("c1", S.RUNNING), sandboxes=(c("sb", S.RUNNING, ""),))],
        statuses={UID: PodStatus(uid=UID, ips=("10.0.0.7",), sandbox_statuses=(ready,))},
    )
    pleg, cache = make(runtime)
    await pleg.relist()
    assert cache.get(UID).ips == ("10.0.0.7",)

    # Torn down: no IP and no ready sandbox -> the old IP stays.
    runtime.pods = [pod(c("c1", S.EXITED), sandboxes=(c("sb", S.EXITED, ""),))]
    runtime.statuses[UID] = PodStatus(uid=UID, sandbox_statuses=(attrs.evolve(ready, ready=False, ip=""),))
    await pleg.relist()
    assert cache.get(UID).ips == ("10.0.0.7",)

    # A ready sandbox without an IP is believed.
    runtime.pods = [pod(c("c1", S.EXITED), sandboxes=(c("sb", S.EXITED, ""), c("sb2", S.RUNNING, "")))]
    new = SandboxStatus(id="sb2", attempt=1, ready=True)
    runtime.statuses[UID] = PodStatus(uid=UID, sandbox_statuses=(new, attrs.evolve(ready, ready=False)))
    await pleg.relist()
    assert cache.get(UID).ips == ()


async def test_cache_entries_are_stamped_and_carry_the_status(autojump_clock: trio.testing.MockClock) -> None:
    status = PodStatus(
        uid=UID,
        container_statuses=(ContainerStatus(id="c1", name="app", state=S.RUNNING),),
    )
    runtime = FakeRuntime(pods=[pod(c("c1", S.RUNNING))], statuses={UID: status})
    pleg, cache = make(runtime)
    await trio.sleep(7)
    await pleg.relist()
    entry = cache.get_entry(UID)
    assert entry is not None
    assert entry.modified == trio.current_time() == 7
    assert entry.status.container_statuses == status.container_statuses


async def test_get_newer_than_is_released_by_update_time(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    runtime = FakeRuntime(pods=[pod(c("c1", S.RUNNING))])
    pleg, cache = make(runtime)
    await nursery.start(pleg.run)
    drain(pleg)
    since = trio.current_time() + 0.5  # a pod worker synced half-way to the next relist

    released: list[float] = []

    async def worker() -> None:
        status = await cache.get_newer_than(UID, since)
        assert status.uid == UID
        released.append(trio.current_time())

    nursery.start_soon(worker)
    await trio.sleep(0.75)
    assert released == []
    await trio.sleep(0.5)  # the relist at +1 has nothing new for this pod, but stamps the cache
    assert released == [since + 0.5]


async def test_failing_relists_do_not_release_get_newer_than(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    runtime = FakeRuntime(pods=[pod(c("c1", S.RUNNING))])
    pleg, cache = make(runtime)
    await nursery.start(pleg.run)
    since = trio.current_time()
    runtime.list_error = RuntimeDown("down")
    done = trio.Event()

    async def worker() -> None:
        await cache.get_newer_than(UID, since)
        done.set()

    nursery.start_soon(worker)
    with trio.move_on_after(30):
        await done.wait()
    assert not done.is_set()
    resumed = trio.current_time()
    runtime.list_error = None
    await done.wait()
    assert trio.current_time() - resumed <= pleg.relist_period


# --- health ----------------------------------------------------------------------------------------


async def test_unhealthy_before_first_success(autojump_clock: trio.testing.MockClock) -> None:
    runtime = FakeRuntime(list_error=RuntimeDown("down"))
    pleg, _ = make(runtime)
    assert pleg.healthy() == (False, "pleg has yet to be successful")
    await pleg.relist()
    assert pleg.healthy() == (False, "pleg has yet to be successful")
    runtime.list_error = None
    await pleg.relist()
    assert pleg.healthy() == (True, "")


async def test_health_fails_exactly_after_threshold_of_failing_relists(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    runtime = FakeRuntime(pods=[pod(c("c1", S.RUNNING))])
    pleg, _ = make(runtime)
    await nursery.start(pleg.run)
    last_success = trio.current_time()
    assert pleg.last_relist_time == last_success
    runtime.list_error = RuntimeDown("down")

    await trio.sleep_until(last_success + 180)
    assert pleg.healthy() == (True, "")
    assert len(runtime.list_calls) >= 180  # it kept trying every second
    await trio.sleep(0.5)
    assert pleg.healthy() == (False, "pleg was last seen active 3m0.5s ago; threshold is 3m0s")
    assert pleg.last_relist_time == last_success

    runtime.list_error = None
    await trio.sleep(1)
    assert pleg.healthy() == (True, "")


def test_go_duration() -> None:
    assert go_duration(180) == "3m0s"
    assert go_duration(180.5) == "3m0.5s"
    assert go_duration(3600) == "1h0m0s"
    assert go_duration(1.25) == "1.25s"
    assert go_duration(0.25) == "250ms"
    assert go_duration(0.0000015) == "1.5µs"
    assert go_duration(0) == "0s"


# --- timing ----------------------------------------------------------------------------------------


async def test_run_reports_started_after_first_attempt(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    runtime = FakeRuntime(list_error=RuntimeDown("down"))
    pleg, _ = make(runtime)
    start = trio.current_time()
    await nursery.start(pleg.run)
    assert runtime.list_calls == [start]
    assert pleg.healthy()[0] is False


async def test_period_is_measured_from_the_end_of_a_slow_relist(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    runtime = FakeRuntime(list_delay=3.0)
    observed: list[tuple[float, float | None]] = []
    pleg, _ = make(runtime, relist_period=1.0, on_relist=lambda d, i: observed.append((d, i)))
    start = trio.current_time()
    await nursery.start(pleg.run)
    assert trio.current_time() == start + 3.0
    await trio.sleep(10)
    assert runtime.list_calls[:3] == [start, start + 4.0, start + 8.0]
    assert observed[:2] == [(3.0, None), (3.0, 4.0)]
    assert pleg.relist_duration == 3.0
    assert pleg.relist_interval == 4.0


async def test_fast_relists_happen_every_period(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    runtime = FakeRuntime()
    pleg, _ = make(runtime, relist_period=1.0)
    start = trio.current_time()
    await nursery.start(pleg.run)
    await trio.sleep(3.5)
    assert runtime.list_calls == [start, start + 1, start + 2, start + 3]


# --- channel overflow ------------------------------------------------------------------------------


async def test_full_channel_drops_events(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = FakeRuntime(pods=[pod(c("c1", S.RUNNING), c("c2", S.RUNNING), c("c3", S.RUNNING))])
    pleg, cache = make(runtime, channel_capacity=2)
    with caplog.at_level(logging.ERROR, logger="kubelet_trio.pleg.generic"):
        await pleg.relist()  # never blocks although nobody reads
    assert [e.data for e in drain(pleg)] == ["c1", "c2"]
    assert pleg.discarded_events == 1
    assert "event channel is full, discarding" in caplog.text
    assert cache.timestamp == trio.current_time()  # the relist completed
