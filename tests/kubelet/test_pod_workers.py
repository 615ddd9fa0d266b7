"""The pod-worker state machine on its own (Go: ``pod_workers.go``), under MockClock with exact times.

A recording syncer stands in for the kubelet: ``sync_pod`` takes ``sync_seconds``, a termination takes
its whole grace period (a container that ignores SIGTERM), and every call is recorded with its trio time.
The pod cache is marked fresh for ever, so a worker never waits for a relist.
"""

from __future__ import annotations

import math
import random
from collections.abc import AsyncIterator

import attrs
import pytest
import trio
import trio.testing

from kubelet_trio.api import ObjectMeta, Pod, PodSpec, PodStatus
from kubelet_trio.container.cache import PodCache
from kubelet_trio.container.types import ContainerState, ContainerStatus, RuntimePod
from kubelet_trio.container.types import PodStatus as RuntimePodStatus
from kubelet_trio.pod_workers import (
    DEFAULT_GRACE_PERIOD,
    PodWorkers,
    SyncError,
    UpdatePodOptions,
    UpdateType,
    WorkType,
    effective_grace_period,
)

STATIC = {"kubernetes.io/config.source": "file"}
RESYNC = 60.0
BACKOFF = 10.0


def make_pod(
    uid: str,
    name: str = "web",
    *,
    grace: int | None = None,
    deletion_grace: int | None = None,
    deleted: bool = False,
    phase: str | None = None,
    static: bool = False,
) -> Pod:
    return Pod(
        metadata=ObjectMeta(
            name=name,
            namespace="default",
            uid=uid,
            annotations=dict(STATIC) if static else None,
            deletion_timestamp="2026-01-01T00:00:00Z" if deleted or deletion_grace is not None else None,
            deletion_grace_period_seconds=deletion_grace,
        ),
        spec=PodSpec(termination_grace_period_seconds=grace),
        status=PodStatus(phase=phase) if phase else None,
    )


@attrs.define(eq=False)
class RecordingSyncer:
    """Records ``(time, call, uid, detail)``; a cancelled call is recorded again as ``<call>-cancelled``."""

    calls: list[tuple[float, str, str, object]] = attrs.Factory(list)
    sync_seconds: float = 0.0
    errors: list[Exception] = attrs.Factory(list)  # raised by the next sync_pod calls, in order
    terminal: set[str] = attrs.Factory(set)  # UIDs whose sync_pod reports a terminal phase

    def _record(self, call: str, uid: str, detail: object = None) -> None:
        self.calls.append((trio.current_time(), call, uid, detail))

    async def _take(self, seconds: float, call: str, uid: str, detail: object) -> None:
        try:
            await trio.sleep(seconds)
        except trio.Cancelled:
            self._record(call + "-cancelled", uid, detail)
            raise

    async def sync_pod(self, update_type: UpdateType, pod: Pod, status: RuntimePodStatus) -> bool:
        self._record("sync", pod.uid, update_type.value)
        await self._take(self.sync_seconds, "sync", pod.uid, update_type.value)
        if self.errors:
            raise self.errors.pop(0)
        return pod.uid in self.terminal

    async def sync_terminating_pod(self, pod: Pod, status: RuntimePodStatus, grace_period: int) -> None:
        self._record("terminating", pod.uid, grace_period)
        await self._take(grace_period, "terminating", pod.uid, grace_period)

    async def sync_terminating_runtime_pod(self, running_pod: RuntimePod) -> None:
        self._record("terminating-runtime", running_pod.uid)

    async def sync_terminated_pod(self, pod: Pod, status: RuntimePodStatus) -> None:
        self._record("terminated", pod.uid)

    def of(self, uid: str) -> list[tuple[float, str, object]]:
        return [(t, call, detail) for t, call, u, detail in self.calls if u == uid]


@attrs.define(eq=False)
class Harness:
    workers: PodWorkers
    syncer: RecordingSyncer
    cache: PodCache

    def update(self, update_type: UpdateType, pod: Pod, *, override: int | None = None) -> None:
        self.workers.update_pod(UpdatePodOptions(update_type, pod=pod, grace_period_override=override))

    def next_due(self) -> float | None:
        """When the work queue's first re-sync is due (None: empty)."""
        return min(self.workers._work_queue.values(), default=None)


@pytest.fixture
async def harness(nursery: trio.Nursery) -> AsyncIterator[Harness]:
    syncer = RecordingSyncer()
    cache = PodCache()
    cache.update_time(math.inf)  # every status is fresh: no worker waits for a relist
    workers = PodWorkers(
        syncer, cache, resync_interval=RESYNC, backoff_period=BACKOFF, jitter=0.0, rng=random.Random(0)
    )
    await nursery.start(workers.run)
    yield Harness(workers, syncer, cache)


# -- effective grace periods (calculateEffectiveGracePeriod) ------------------------------------------


@pytest.mark.parametrize(
    ("current", "spec", "deletion", "override", "expected"),
    [
        (0, None, None, None, DEFAULT_GRACE_PERIOD),  # nothing set: the API default
        (0, 45, None, None, 45),  # spec.terminationGracePeriodSeconds
        (0, 45, 20, None, 20),  # deletionGracePeriodSeconds wins over the spec
        (0, 45, 20, 5, 5),  # an override (eviction) shortens it further
        (0, 45, None, 60, 60),  # an override is taken when nothing was stored yet
        (10, 45, 20, None, 10),  # it only ever shrinks
        (10, 45, None, 30, 10),
        (10, 45, 3, None, 3),
        (0, 0, None, None, 1),  # at least 1 s
        (0, 45, 0, None, 1),  # a forced deletion (grace 0) still gets 1 s
        (30, 45, None, 0, 1),
    ],
)
def test_effective_grace_period(
    current: int, spec: int | None, deletion: int | None, override: int | None, expected: int
) -> None:
    pod = make_pod("u", grace=spec, deletion_grace=deletion)
    assert effective_grace_period(current, pod, override) == expected


async def test_deletion_uses_the_pod_grace_period(
    harness: Harness, autojump_clock: trio.testing.MockClock
) -> None:
    harness.update(UpdateType.CREATE, make_pod("a", grace=20))
    await trio.testing.wait_all_tasks_blocked()
    harness.update(UpdateType.UPDATE, make_pod("a", grace=20, deleted=True))
    await harness.workers.wait_finished("a")
    assert harness.syncer.of("a") == [
        (0.0, "sync", "create"),
        (0.0, "terminating", 20),
        (20.0, "terminated", None),
    ]
    status = harness.workers.status("a")
    assert status is not None and status.deleted and status.terminated_at == 20.0


async def test_a_terminating_pod_is_inspected_only_when_no_relist_followed_its_last_sync(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Go waits for a relist newer than the last sync; this kubelet inspects at once instead, but only
    when the cache is not already that fresh."""
    syncer, cache = RecordingSyncer(), PodCache()
    inspected: list[tuple[float, str]] = []

    async def inspect(pod: Pod) -> RuntimePodStatus:
        inspected.append((trio.current_time(), pod.uid))
        return RuntimePodStatus(uid=pod.uid)

    workers = PodWorkers(syncer, cache, jitter=0.0, inspect=inspect)
    await nursery.start(workers.run)
    cache.update_time(0.0)
    harness = Harness(workers, syncer, cache)
    harness.update(UpdateType.CREATE, make_pod("a", grace=1))
    await trio.sleep(1)
    cache.update_time(1.0)  # a relist after a's last sync
    harness.update(UpdateType.CREATE, make_pod("b", grace=1))
    await trio.sleep(1)
    for uid in ("a", "b"):
        harness.update(UpdateType.UPDATE, make_pod(uid, grace=1, deleted=True))
    await trio.sleep(0.5)
    cache.update_time(math.inf)  # relists from now on (the terminated cleanup waits for one)
    await workers.wait_finished("a")
    await workers.wait_finished("b")
    assert inspected == [(2.0, "b")]
    assert [call for _, call, _ in syncer.of("a")] == ["sync", "terminating", "terminated"]


async def test_a_sync_that_changed_nothing_keeps_the_cache_fresh_for_the_kill(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """A probe-triggered sync that had nothing to do in the runtime does not make the kill that follows
    inspect the pod again; one that did act (or failed) does."""

    @attrs.define(eq=False)
    class Syncer(RecordingSyncer):
        workers: PodWorkers | None = None
        idle: set[str] = attrs.Factory(set)

        async def sync_pod(self, update_type: UpdateType, pod: Pod, status: RuntimePodStatus) -> bool:
            terminal = await super().sync_pod(update_type, pod, status)
            if pod.uid in self.idle and self.workers is not None:
                self.workers.untouched(pod.uid)
            return terminal

    syncer, cache = Syncer(idle={"idle"}), PodCache()
    inspected: list[str] = []

    async def inspect(pod: Pod) -> RuntimePodStatus:
        inspected.append(pod.uid)
        return RuntimePodStatus(uid=pod.uid)

    workers = PodWorkers(syncer, cache, jitter=0.0, inspect=inspect)
    syncer.workers = workers
    await nursery.start(workers.run)
    cache.update_time(0.0)
    harness = Harness(workers, syncer, cache)
    for uid in ("idle", "busy"):
        cache.set(uid, RuntimePodStatus(uid=uid), None, 0.5)
        harness.update(UpdateType.CREATE, make_pod(uid, grace=1))
    await trio.sleep(1)
    for uid in ("idle", "busy"):
        harness.update(UpdateType.SYNC, make_pod(uid, grace=1))  # e.g. a readiness change
    await trio.sleep(1)
    for uid in ("idle", "busy"):
        harness.update(UpdateType.UPDATE, make_pod(uid, grace=1, deleted=True))
    await trio.sleep(0.5)
    cache.update_time(math.inf)
    await workers.wait_finished("idle")
    await workers.wait_finished("busy")
    assert inspected == ["busy"]


async def test_deletion_grace_override_and_kill_override(
    harness: Harness, autojump_clock: trio.testing.MockClock
) -> None:
    harness.update(UpdateType.CREATE, make_pod("a", grace=60))
    harness.update(UpdateType.CREATE, make_pod("b", grace=60))
    await trio.testing.wait_all_tasks_blocked()
    harness.update(UpdateType.UPDATE, make_pod("a", grace=60, deletion_grace=7))
    harness.update(UpdateType.KILL, make_pod("b", grace=60), override=0)  # e.g. eviction with grace 0
    await harness.workers.wait_finished("a")
    await harness.workers.wait_finished("b")
    assert harness.syncer.of("a")[1:] == [(0.0, "terminating", 7), (7.0, "terminated", None)]
    assert harness.syncer.of("b")[1:] == [(0.0, "terminating", 1), (1.0, "terminated", None)]


# -- a shorter grace period cancels the in-flight work -----------------------------------------------


async def test_shorter_grace_period_restarts_termination_sooner(
    harness: Harness, autojump_clock: trio.testing.MockClock
) -> None:
    harness.update(UpdateType.CREATE, make_pod("a", grace=30))
    await trio.testing.wait_all_tasks_blocked()
    harness.update(UpdateType.UPDATE, make_pod("a", grace=30, deletion_grace=30))
    await trio.sleep(10)
    harness.update(UpdateType.UPDATE, make_pod("a", grace=30, deletion_grace=5))
    await trio.sleep(1)
    harness.update(UpdateType.UPDATE, make_pod("a", grace=30, deletion_grace=20))  # never grows back
    await harness.workers.wait_finished("a")
    assert harness.syncer.of("a") == [
        (0.0, "sync", "create"),
        (0.0, "terminating", 30),
        (10.0, "terminating-cancelled", 30),
        (10.0, "terminating", 5),
        (15.0, "terminated", None),
    ]
    status = harness.workers.status("a")
    assert status is not None and status.grace_period == 5


async def test_same_grace_period_does_not_interrupt_termination(
    harness: Harness, autojump_clock: trio.testing.MockClock
) -> None:
    harness.update(UpdateType.CREATE, make_pod("a", grace=30))
    await trio.testing.wait_all_tasks_blocked()
    harness.update(UpdateType.KILL, make_pod("a", grace=30))
    await trio.sleep(10)
    harness.update(UpdateType.KILL, make_pod("a", grace=30), override=30)
    await harness.workers.wait_finished("a")
    # the kill queued behind the running termination is served by the next step: the cleanup
    assert harness.syncer.of("a") == [
        (0.0, "sync", "create"),
        (0.0, "terminating", 30),
        (30.0, "terminated", None),
    ]


async def test_deletion_cancels_an_inflight_sync(
    harness: Harness, autojump_clock: trio.testing.MockClock
) -> None:
    harness.syncer.sync_seconds = 100  # a slow image pull
    harness.update(UpdateType.CREATE, make_pod("a", grace=3))
    await trio.sleep(4)
    harness.update(UpdateType.UPDATE, make_pod("a", grace=3, deleted=True))
    await harness.workers.wait_finished("a")
    assert harness.syncer.of("a") == [
        (0.0, "sync", "create"),
        (4.0, "sync-cancelled", "create"),
        (4.0, "terminating", 3),
        (7.0, "terminated", None),
    ]


async def test_kill_waiter_is_released_when_terminated(
    harness: Harness, autojump_clock: trio.testing.MockClock
) -> None:
    harness.update(UpdateType.CREATE, make_pod("a", grace=4))
    await trio.testing.wait_all_tasks_blocked()
    killed = trio.Event()
    harness.workers.update_pod(UpdatePodOptions(UpdateType.KILL, pod=make_pod("a", grace=4), killed=killed))
    await killed.wait()
    assert trio.current_time() == 4.0
    again = trio.Event()  # a kill of a finished pod completes at once
    harness.workers.update_pod(UpdatePodOptions(UpdateType.KILL, pod=make_pod("a", grace=4), killed=again))
    assert again.is_set()


# -- latest wins, resync and backoff -------------------------------------------------------------------


async def test_pending_updates_coalesce_latest_wins(
    harness: Harness, autojump_clock: trio.testing.MockClock
) -> None:
    harness.syncer.sync_seconds = 5
    harness.update(UpdateType.CREATE, make_pod("a"))
    await trio.sleep(1)
    for _ in range(3):
        harness.update(UpdateType.UPDATE, make_pod("a"))
    harness.update(UpdateType.SYNC, make_pod("a"))
    await trio.sleep(20)
    # one sync in flight, the three updates and the sync coalesced into one: the last one
    assert harness.syncer.of("a") == [(0.0, "sync", "create"), (5.0, "sync", "sync")]


async def test_in_sync_pod_is_due_after_the_resync_interval(
    harness: Harness, autojump_clock: trio.testing.MockClock
) -> None:
    harness.syncer.sync_seconds = 2
    harness.update(UpdateType.CREATE, make_pod("a"))
    await trio.sleep(3)
    assert harness.next_due() == 2.0 + RESYNC
    assert harness.workers.due(2.0 + RESYNC - 0.5) == []
    assert harness.workers.due(2.0 + RESYNC) == ["a"]
    assert harness.next_due() is None


async def test_failed_sync_is_requeued_at_its_backoff_expiry(
    harness: Harness, autojump_clock: trio.testing.MockClock
) -> None:
    await trio.sleep(100)
    harness.syncer.errors = [SyncError("CrashLoopBackOff", retry_at=100.0 + 40.0), RuntimeError("boom")]
    harness.update(UpdateType.CREATE, make_pod("a"))
    await trio.testing.wait_all_tasks_blocked()
    assert harness.next_due() == 140.0  # exactly when the container's backoff ends
    await trio.sleep(40)
    assert harness.workers.due() == ["a"]
    harness.update(UpdateType.SYNC, make_pod("a"))
    await trio.testing.wait_all_tasks_blocked()
    assert harness.next_due() == 140.0 + BACKOFF  # no expiry of its own: the backoff period
    await trio.sleep(BACKOFF)
    assert harness.workers.due() == ["a"]
    harness.update(UpdateType.SYNC, make_pod("a"))
    await trio.testing.wait_all_tasks_blocked()
    assert harness.next_due() == 150.0 + RESYNC
    assert [t for t, call, _ in harness.syncer.of("a")] == [100.0, 140.0, 150.0]


async def test_backoff_expiry_beyond_resync_is_capped(
    harness: Harness, autojump_clock: trio.testing.MockClock
) -> None:
    harness.syncer.errors = [SyncError("ImagePullBackOff", retry_at=300.0)]
    harness.update(UpdateType.CREATE, make_pod("a"))
    await trio.testing.wait_all_tasks_blocked()
    assert harness.next_due() == RESYNC


async def test_terminal_sync_goes_straight_to_termination(
    harness: Harness, autojump_clock: trio.testing.MockClock
) -> None:
    harness.syncer.terminal.add("a")
    harness.update(UpdateType.CREATE, make_pod("a", grace=9))
    await harness.workers.wait_finished("a")
    assert harness.syncer.of("a") == [
        (0.0, "sync", "create"),
        (0.0, "terminating", 9),
        (9.0, "terminated", None),
    ]


async def test_orphaned_runtime_pod_is_killed_and_forgotten(
    harness: Harness, autojump_clock: trio.testing.MockClock
) -> None:
    orphan = RuntimePod(uid="o", name="gone", namespace="default")
    harness.workers.update_pod(UpdatePodOptions(UpdateType.SYNC, running_pod=orphan))  # ignored: not a kill
    assert not harness.workers.is_known("o")
    harness.workers.update_pod(UpdatePodOptions(UpdateType.KILL, running_pod=orphan, grace_period_override=1))
    await harness.workers.wait_finished("o")
    assert harness.syncer.of("o") == [(0.0, "terminating-runtime", None)]
    assert harness.workers.sync_known_pods({}) == {}
    assert not harness.workers.is_known("o")


# -- restarts of the same UID ---------------------------------------------------------------------------


async def test_create_while_terminating_requests_a_restart(
    harness: Harness, autojump_clock: trio.testing.MockClock
) -> None:
    pod = make_pod("a", grace=5, static=True)
    harness.update(UpdateType.CREATE, pod)
    await trio.testing.wait_all_tasks_blocked()
    harness.update(UpdateType.KILL, pod)
    await trio.sleep(1)
    harness.update(UpdateType.CREATE, pod)  # the file came back with the same UID
    status = harness.workers.status("a")
    assert status is not None and status.restart_requested
    assert harness.workers.sync_known_pods({"a": pod}) == {"a": WorkType.TERMINATING}
    await harness.workers.wait_finished("a")
    assert trio.current_time() == 5.0
    # housekeeping forgets the finished worker, and the next create starts the pod afresh
    assert harness.workers.sync_known_pods({"a": pod}) == {}
    harness.update(UpdateType.CREATE, pod)
    await trio.testing.wait_all_tasks_blocked()
    assert harness.syncer.of("a") == [
        (0.0, "sync", "create"),
        (0.0, "terminating", 5),
        (5.0, "terminated", None),
        (5.0, "sync", "create"),
    ]


async def test_create_after_the_worker_finished_requests_a_restart(
    harness: Harness, autojump_clock: trio.testing.MockClock
) -> None:
    """Go checks the restart before ``finished``: a re-added UID is purged by the next housekeeping."""
    pod = make_pod("a", grace=2, static=True)
    harness.update(UpdateType.CREATE, pod)
    await trio.testing.wait_all_tasks_blocked()
    harness.update(UpdateType.KILL, pod)
    await harness.workers.wait_finished("a")
    harness.update(UpdateType.CREATE, pod)
    assert harness.workers.sync_known_pods({"a": pod}) == {}
    harness.update(UpdateType.CREATE, pod)
    await trio.testing.wait_all_tasks_blocked()
    assert harness.syncer.of("a")[-1] == (2.0, "sync", "create")


async def test_first_sighting_of_a_finished_pod_only_cleans_up(
    harness: Harness, autojump_clock: trio.testing.MockClock
) -> None:
    """A kubelet restart finds a Succeeded pod with nothing running: only the terminated cleanup runs."""
    pod = make_pod("a", phase="Succeeded")
    harness.update(UpdateType.CREATE, pod)
    with trio.fail_after(1000):  # the worker used to wait for ever here
        await harness.workers.wait_finished("a")
    assert harness.syncer.of("a") == [(0.0, "terminated", None)]


async def test_first_sighting_of_a_finished_pod_still_running_is_terminated(
    harness: Harness, autojump_clock: trio.testing.MockClock
) -> None:
    app = ContainerStatus(id="c1", name="app", state=ContainerState.RUNNING)
    harness.cache.set("a", RuntimePodStatus(uid="a", container_statuses=(app,)), None, 0.0)
    harness.update(UpdateType.CREATE, make_pod("a", grace=6, phase="Failed"))
    await harness.workers.wait_finished("a")
    assert harness.syncer.of("a") == [(0.0, "terminating", 6), (6.0, "terminated", None)]


async def test_housekeeping_terminates_and_then_forgets_undesired_pods(
    harness: Harness, autojump_clock: trio.testing.MockClock
) -> None:
    assert harness.workers.could_have_running_containers("a")  # before the first housekeeping: unknown
    harness.update(UpdateType.CREATE, make_pod("a", grace=5))
    await trio.testing.wait_all_tasks_blocked()
    assert harness.workers.sync_known_pods({}) == {"a": WorkType.TERMINATING}
    await harness.workers.wait_finished("a")
    assert trio.current_time() == 5.0
    assert not harness.workers.could_have_running_containers("a")
    assert harness.workers.sync_known_pods({}) == {}
    assert not harness.workers.is_known("a")
    assert not harness.workers.could_have_running_containers("a")


# -- static pods with the same full name ----------------------------------------------------------------


async def test_static_pod_waits_for_the_previous_uid_of_its_name(
    harness: Harness, autojump_clock: trio.testing.MockClock
) -> None:
    old = make_pod("old", name="etcd", grace=8, static=True)
    new = make_pod("new", name="etcd", grace=8, static=True)
    newest = make_pod("newest", name="etcd", grace=8, static=True)
    other = make_pod("other", name="api", static=True)
    harness.update(UpdateType.CREATE, old)
    await trio.testing.wait_all_tasks_blocked()
    harness.update(UpdateType.CREATE, new)
    await trio.sleep(1)
    harness.update(UpdateType.CREATE, newest)
    harness.update(UpdateType.CREATE, other)  # another name is not held up
    await trio.sleep(1)
    assert harness.syncer.of("new") == []
    assert harness.syncer.of("other") == [(1.0, "sync", "create")]
    harness.update(UpdateType.KILL, old)
    await harness.workers.wait_finished("old")
    await trio.testing.wait_all_tasks_blocked()
    assert harness.syncer.of("old")[-1] == (10.0, "terminated", None)
    assert harness.syncer.of("new") == [(10.0, "sync", "create")]  # FIFO: the first waiter starts
    assert harness.syncer.of("newest") == []
    harness.update(UpdateType.KILL, new)
    await harness.workers.wait_finished("new")
    await trio.testing.wait_all_tasks_blocked()
    assert harness.syncer.of("newest") == [(18.0, "sync", "create")]


async def test_non_static_pods_with_the_same_name_do_not_wait(
    harness: Harness, autojump_clock: trio.testing.MockClock
) -> None:
    harness.update(UpdateType.CREATE, make_pod("a", name="web"))
    harness.update(UpdateType.CREATE, make_pod("b", name="web"))
    await trio.testing.wait_all_tasks_blocked()
    assert harness.syncer.of("a") == [(0.0, "sync", "create")]
    assert harness.syncer.of("b") == [(0.0, "sync", "create")]


async def test_static_pod_deleted_while_waiting_never_starts(
    harness: Harness, autojump_clock: trio.testing.MockClock
) -> None:
    old = make_pod("old", name="etcd", grace=8, static=True)
    new = make_pod("new", name="etcd", grace=3, static=True)
    newest = make_pod("newest", name="etcd", grace=8, static=True)
    harness.update(UpdateType.CREATE, old)
    await trio.testing.wait_all_tasks_blocked()
    harness.update(UpdateType.CREATE, new)
    harness.update(UpdateType.CREATE, newest)
    await trio.sleep(1)
    harness.update(UpdateType.KILL, new)  # its file went away before the name was free
    await harness.workers.wait_finished("new")
    await trio.testing.wait_all_tasks_blocked()
    assert all(call != "sync" for _, call, _ in harness.syncer.of("new"))
    assert harness.syncer.of("newest") == []  # the name is still held by the old UID
    harness.update(UpdateType.KILL, old)
    await harness.workers.wait_finished("old")
    await trio.testing.wait_all_tasks_blocked()
    assert harness.syncer.of("newest") == [(trio.current_time(), "sync", "create")]
    assert trio.current_time() == 4.0 + 8.0  # old was killed once new had finished (t=4), grace 8
