"""The eviction manager on simulated signals and usage: every signal and threshold kind, grace periods,
the pressure transition period, minimum reclaim, node-level reclaim, critical pods and admission.
Schedules are exact under an autojump MockClock (monitoring every 10 s)."""

from __future__ import annotations

import attrs
import pytest
import trio
import trio.testing

from kubelet_trio.eviction import (
    ALLOCATABLE_MEMORY_AVAILABLE,
    IMAGEFS_AVAILABLE,
    IMAGEFS_INODES_FREE,
    MEMORY_AVAILABLE,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
    PID_AVAILABLE,
    PodUsage,
    SimulatedSignals,
)
from kubelet_trio.eviction.usage import ContainerUsage
from tests.eviction.helpers import MI, Kill, harness, make_pod

GI = 1 << 30


async def test_hard_memory_threshold_evicts_the_best_effort_pod_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    guaranteed = make_pod("guaranteed", requests={"memory": "100Mi"})
    best_effort = make_pod("best-effort")
    important = make_pod("important", requests={"memory": "100Mi"}, priority=1000)
    h = harness([guaranteed, best_effort, important], {"memory.available": "100Mi"})
    h.signals.set(MEMORY_AVAILABLE, 50 * MI, GI)
    h.usage.set(guaranteed.uid, PodUsage(memory_working_set=50 * MI))
    h.usage.set(
        best_effort.uid,
        PodUsage(memory_working_set=10 * MI, containers={"main": ContainerUsage(memory_working_set=10 * MI)}),
    )
    h.usage.set(important.uid, PodUsage(memory_working_set=500 * MI))

    evicted = await h.manager.synchronize()

    message = (
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
        "Container main was using 10Mi, request is 0, has larger consumption of memory. "
    )
    assert [p.name for p in evicted] == ["best-effort"]
    assert h.killer.kills == [Kill("best-effort", 1, "Evicted", message, trio.current_time())]
    assert h.pod_events == [("best-effort", "Warning", "Evicted", message)]
    assert h.node_events == [("Warning", "EvictionThresholdMet", "Attempting to reclaim memory")]
    assert h.manager.conditions.value == {"MemoryPressure"}
    assert h.manager.evictions == {MEMORY_AVAILABLE: 1}


@pytest.mark.parametrize(
    ("signal", "threshold", "available", "condition", "shown"),
    [
        (
            MEMORY_AVAILABLE,
            "100Mi",
            50 * MI,
            "MemoryPressure",
            "memory. Threshold quantity: 100Mi, available: 50Mi",
        ),
        (
            NODEFS_AVAILABLE,
            "10%",
            50 * MI,
            "DiskPressure",
            "ephemeral-storage. Threshold quantity: 100Mi, available: 50Mi",
        ),
        (NODEFS_INODES_FREE, "5%", 40, "DiskPressure", "inodes. Threshold quantity: 50, available: 40"),
        (
            IMAGEFS_AVAILABLE,
            "150Mi",
            50 * MI,
            "DiskPressure",
            "ephemeral-storage. Threshold quantity: 150Mi, available: 50Mi",
        ),
        (IMAGEFS_INODES_FREE, "100", 40, "DiskPressure", "inodes. Threshold quantity: 100, available: 40"),
        (PID_AVAILABLE, "100", 40, "PIDPressure", "pids. Threshold quantity: 100, available: 40"),
        (
            ALLOCATABLE_MEMORY_AVAILABLE,
            "100Mi",
            50 * MI,
            "MemoryPressure",
            "memory. Threshold quantity: 100Mi, available: 50Mi",
        ),
    ],
)
async def test_every_signal_raises_its_condition_and_evicts(
    signal: str, threshold: str, available: int, condition: str, shown: str
) -> None:
    pod = make_pod("victim")
    h = harness([pod], {signal: threshold})
    capacity = 1000 * MI if "available" in signal and signal != PID_AVAILABLE else 1000
    h.signals.set(signal, available, capacity)
    h.usage.set(pod.uid, PodUsage())

    await h.manager.synchronize()

    assert h.manager.conditions.value == {condition}
    assert [k.message for k in h.killer.kills] == [f"The node was low on resource: {shown}. "]


async def test_no_pressure_no_condition_no_eviction() -> None:
    h = harness([make_pod("a")], {"memory.available": "100Mi", "nodefs.available": "10%"})
    assert await h.manager.synchronize() == []
    assert h.manager.conditions.value == frozenset()
    assert h.killer.kills == [] and h.node_events == []


async def test_soft_threshold_waits_for_its_grace_period_and_caps_the_pod_grace_period(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pod = make_pod("victim", grace=30)
    h = harness(
        [pod],
        soft={"memory.available": "1Gi"},
        soft_grace={"memory.available": 60.0},
        max_pod_grace_period=20,
    )
    h.usage.set(pod.uid, PodUsage(memory_working_set=GI))
    start = trio.current_time()
    seen: list[tuple[float, frozenset[str]]] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(h.manager.run)
        nursery.start_soon(_record_conditions, h.manager.conditions, seen, start)
        await trio.sleep(15)
        h.signals.set(MEMORY_AVAILABLE, 500 * MI)  # observed at the round at 20 s
        await trio.sleep(70)  # 85 s
        h.signals.set(MEMORY_AVAILABLE, 2 * GI)  # last observed in the round at 80 s
        await trio.sleep(400)
        nursery.cancel_scope.cancel()
    assert [(k.pod, k.grace_period, k.at - start) for k in h.killer.kills] == [("victim", 20, 80.0)]
    # the condition holds from the first observation until 300 s after the last one
    assert seen == [(20.0, frozenset({"MemoryPressure"})), (380.0, frozenset())]


async def _record_conditions(
    conditions: object, seen: list[tuple[float, frozenset[str]]], start: float
) -> None:
    async for value in conditions.eventual_values():  # type: ignore[attr-defined]
        if value or seen:
            seen.append((trio.current_time() - start, value))


async def test_soft_grace_period_resets_when_the_signal_recovers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pod = make_pod("victim")
    h = harness([pod], soft={"nodefs.available": "20%"}, soft_grace={"nodefs.available": 30.0}, transition=0)
    h.signals.set(NODEFS_AVAILABLE, 100, 1000)
    h.usage.set(pod.uid, PodUsage())
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        await nursery.start(h.manager.run)  # met at 0, 10, 20
        await trio.sleep(25)
        h.signals.set(NODEFS_AVAILABLE, 500, 1000)  # not at 30
        await trio.sleep(10)
        h.signals.set(NODEFS_AVAILABLE, 100, 1000)  # met again from 40: acts at 70
        await trio.sleep(60)
        nursery.cancel_scope.cancel()
    assert [k.at - start for k in h.killer.kills] == [70.0]


async def test_minimum_reclaim_keeps_evicting_until_the_signal_is_that_far_past_the_threshold(
    autojump_clock: trio.testing.MockClock,
) -> None:
    first, second, third = (
        make_pod("first", priority=1),
        make_pod("second", priority=2),
        make_pod("third", priority=3),
    )
    h = harness(
        [third, second, first], {"nodefs.available": "10%"}, minimum_reclaim={"nodefs.available": "5%"}
    )
    for pod in (first, second, third):
        h.usage.set(pod.uid, PodUsage())
    h.signals.set(NODEFS_AVAILABLE, 50, 1000)
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        await nursery.start(h.manager.run)
        await trio.sleep(5)
        h.signals.set(NODEFS_AVAILABLE, 120, 1000)  # above 10% but not above 10% + 5%
        await trio.sleep(10)
        h.signals.set(NODEFS_AVAILABLE, 160, 1000)
        await trio.sleep(30)
        nursery.cancel_scope.cancel()
    assert [(k.pod, k.at - start) for k in h.killer.kills] == [("first", 0.0), ("second", 10.0)]


async def test_an_eviction_waits_for_the_pod_to_be_cleaned_up_then_looks_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cleaned: dict[str, trio.Event] = {}

    async def wait_cleaned_up(uid: str) -> None:
        await cleaned.setdefault(uid, trio.Event()).wait()

    a, b = make_pod("a", priority=1), make_pod("b", priority=2)
    h = harness([a, b], {"memory.available": "100Mi"}, wait_cleaned_up=wait_cleaned_up)
    h.signals.set(MEMORY_AVAILABLE, 50 * MI)
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        await nursery.start(h.manager.run)
        await trio.sleep(3)
        cleaned.setdefault(a.uid, trio.Event()).set()  # the next round follows at once, not 10 s later
        await trio.sleep(1)
        assert [(k.pod, k.at - start) for k in h.killer.kills] == [("a", 0.0), ("b", 3.0)]
        await trio.sleep(40)  # b is never cleaned up: the manager gives up waiting after 30 s
        nursery.cancel_scope.cancel()
    assert len(h.killer.kills) == 2


async def test_disk_pressure_reclaims_containers_and_images_before_evicting() -> None:
    calls: list[str] = []
    signals_box: list[SimulatedSignals] = []

    @attrs.define
    class GC:
        async def delete_all_unused_containers(self) -> None:
            calls.append("containers")

        async def delete_unused_images(self) -> int:
            calls.append("images")
            signals_box[0].set(NODEFS_AVAILABLE, 300, 1000)
            return 200

    pod = make_pod("a")
    h = harness([pod], {"nodefs.available": "10%"}, container_gc=GC(), image_gc=GC())
    signals_box.append(h.signals)
    h.signals.set(NODEFS_AVAILABLE, 50, 1000)
    assert await h.manager.synchronize() == []
    assert calls == ["containers", "images"]
    assert h.killer.kills == []
    assert h.manager.conditions.value == {"DiskPressure"}  # observed before the reclaim


async def test_reclaim_that_is_not_enough_is_followed_by_an_eviction() -> None:
    calls: list[str] = []

    @attrs.define
    class GC:
        async def delete_all_unused_containers(self) -> None:
            calls.append("containers")

        async def delete_unused_images(self) -> int:
            calls.append("images")
            raise RuntimeError("image service down")  # logged; the eviction goes ahead

    pod = make_pod("a")
    h = harness([pod], {"imagefs.available": "10%"}, container_gc=GC(), image_gc=GC())
    h.signals.set(IMAGEFS_AVAILABLE, 50, 1000)
    h.usage.set(pod.uid, PodUsage())
    await h.manager.synchronize()
    assert calls == ["containers", "images"]
    assert h.evicted == ["a"]


@pytest.mark.parametrize(
    ("signal", "reclaims"), [(NODEFS_AVAILABLE, []), (IMAGEFS_AVAILABLE, ["containers", "images"])]
)
async def test_with_a_dedicated_image_fs_only_imagefs_pressure_reclaims(
    signal: str, reclaims: list[str]
) -> None:
    calls: list[str] = []

    @attrs.define
    class GC:
        async def delete_all_unused_containers(self) -> None:
            calls.append("containers")

        async def delete_unused_images(self) -> int:
            calls.append("images")
            return 0

    pod = make_pod("a")
    h = harness([pod], {signal: "10%"}, container_gc=GC(), image_gc=GC())
    h.signals.dedicated_image_fs = True
    h.signals.set(signal, 50, 1000)
    await h.manager.synchronize()
    assert calls == reclaims
    assert h.evicted == ["a"]


async def test_memory_pressure_never_reclaims_node_resources() -> None:
    calls: list[str] = []

    @attrs.define
    class GC:
        async def delete_all_unused_containers(self) -> None:
            calls.append("containers")

    h = harness([make_pod("a")], {"memory.available": "100Mi"}, container_gc=GC())
    h.signals.set(MEMORY_AVAILABLE, 50 * MI)
    await h.manager.synchronize()
    assert calls == [] and h.evicted == ["a"]


async def test_critical_pods_are_never_evicted() -> None:
    static = make_pod("static", annotations={"kubernetes.io/config.source": "file"})
    mirror = make_pod("mirror", annotations={"kubernetes.io/config.mirror": "abc"})
    system = make_pod("system", priority=2_000_000_000)
    h = harness([static, mirror, system], {"memory.available": "100Mi"})
    h.signals.set(MEMORY_AVAILABLE, 50 * MI)
    assert await h.manager.synchronize() == []
    assert h.killer.kills == []
    regular = make_pod("regular", priority=5)
    h.killer.active.append(regular)
    await h.manager.synchronize()
    assert h.evicted == ["regular"]  # ranked last (no stats for the others: first), yet the only one


async def test_memory_threshold_goes_first_when_several_are_met() -> None:
    pod = make_pod("a")
    h = harness([pod], {"nodefs.available": "10%", "memory.available": "100Mi"})
    h.signals.set(NODEFS_AVAILABLE, 50, 1000)
    h.signals.set(MEMORY_AVAILABLE, 50 * MI)
    await h.manager.synchronize()
    assert h.manager.conditions.value == {"MemoryPressure", "DiskPressure"}
    assert h.node_events == [("Warning", "EvictionThresholdMet", "Attempting to reclaim memory")]


async def test_pods_nearing_allocatable_are_ranked_as_under_memory_pressure() -> None:
    guaranteed = make_pod("guaranteed", requests={"memory": "100Mi"})
    burstable = make_pod("burstable", requests={"memory": "10Mi"})
    h = harness([guaranteed, burstable], {"allocatableMemory.available": "100Mi", "nodefs.available": "10%"})
    h.signals.set(MEMORY_AVAILABLE, 4 * GI)  # the machine has memory left
    h.signals.set(ALLOCATABLE_MEMORY_AVAILABLE, 60 * MI, 2 * GI)
    h.signals.set(NODEFS_AVAILABLE, 50, 1000)
    h.usage.set(guaranteed.uid, PodUsage(memory_working_set=90 * MI))
    h.usage.set(burstable.uid, PodUsage(memory_working_set=40 * MI))  # 30Mi above its request
    assert [p.name for p in await h.manager.synchronize()] == ["burstable"]
    assert h.node_events == [("Warning", "EvictionThresholdMet", "Attempting to reclaim memory")]
    assert h.manager.conditions.value == {"MemoryPressure", "DiskPressure"}
    assert h.manager.evictions == {ALLOCATABLE_MEMORY_AVAILABLE: 1}


async def test_an_unmeasurable_signal_is_no_pressure() -> None:
    h = harness([make_pod("a")], {"pid.available": "100"})
    h.signals.unset(PID_AVAILABLE)
    assert await h.manager.synchronize() == []
    assert h.manager.conditions.value == frozenset()


# -- admission ------------------------------------------------------------------------------------------


async def _pressure(conditions: dict[str, tuple[int, int]]) -> object:
    h = harness([], {"memory.available": "100Mi", "nodefs.available": "10%", "pid.available": "100"})
    for signal, (available, capacity) in conditions.items():
        h.signals.set(signal, available, capacity)
    await h.manager.synchronize()
    return h.manager


async def test_admission_under_memory_pressure_rejects_only_best_effort_pods() -> None:
    manager = await _pressure({MEMORY_AVAILABLE: (50 * MI, GI)})
    best_effort = make_pod("be")
    rejected = manager.admit(best_effort)  # type: ignore[attr-defined]
    assert (rejected.reason, rejected.message) == ("Evicted", "The node had condition: [MemoryPressure]. ")
    assert manager.admit(make_pod("burstable", requests={"memory": "10Mi"})) is None  # type: ignore[attr-defined]
    tolerating = make_pod(
        "tolerating",
        tolerations=[
            {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"}
        ],
    )
    assert manager.admit(tolerating) is None  # type: ignore[attr-defined]
    wrong = make_pod("wrong", tolerations=[{"key": "node.kubernetes.io/disk-pressure", "operator": "Exists"}])
    assert manager.admit(wrong) is not None  # type: ignore[attr-defined]
    assert manager.admit(make_pod("static", annotations={"kubernetes.io/config.source": "file"})) is None  # type: ignore[attr-defined]


async def test_admission_under_disk_or_pid_pressure_rejects_every_pod_but_critical_ones() -> None:
    manager = await _pressure(
        {MEMORY_AVAILABLE: (50 * MI, GI), NODEFS_AVAILABLE: (5, 100), PID_AVAILABLE: (5, 1000)}
    )
    rejected = manager.admit(make_pod("burstable", requests={"memory": "10Mi"}))  # type: ignore[attr-defined]
    assert rejected.message == "The node had condition: [MemoryPressure DiskPressure PIDPressure]. "
    assert manager.admit(make_pod("system", priority=2_000_000_000)) is None  # type: ignore[attr-defined]


async def test_admission_without_pressure_admits_everything() -> None:
    manager = await _pressure({})
    assert manager.admit(make_pod("be")) is None  # type: ignore[attr-defined]


# -- local storage limits (Go: localStorageCapacityIsolation) --------------------------------------------


async def test_pods_over_their_own_local_storage_limits_are_evicted_without_node_pressure(
    autojump_clock: trio.testing.MockClock,
) -> None:
    scratch = [{"name": "scratch", "emptyDir": {"sizeLimit": "1Mi"}}]
    over_dir = make_pod("over-dir", volumes=scratch)
    within_dir = make_pod("within-dir", volumes=scratch)
    over_logs = make_pod("over-logs", limits={"ephemeral-storage": "1Mi"})
    over_pod = make_pod(
        "over-pod",
        containers=[
            {"name": "a", "image": "busybox", "resources": {"limits": {"ephemeral-storage": "1Mi"}}},
            {"name": "b", "image": "busybox", "resources": {"limits": {"ephemeral-storage": "2Mi"}}},
        ],
    )
    unlimited = make_pod("unlimited")
    h = harness([over_dir, within_dir, over_logs, over_pod, unlimited], {"memory.available": "100Mi"})
    h.usage.set(over_dir.uid, PodUsage(volumes={"scratch": 2 * MI}))
    h.usage.set(within_dir.uid, PodUsage(volumes={"scratch": MI}))
    h.usage.set(over_logs.uid, PodUsage(containers={"main": ContainerUsage(logs_bytes=MI + 1)}))
    h.usage.set(over_pod.uid, PodUsage(ephemeral_bytes=3 * MI + 1))
    h.usage.set(unlimited.uid, PodUsage(volume_bytes=50 * MI, ephemeral_bytes=50 * MI))

    evicted = await h.manager.synchronize()

    assert [p.name for p in evicted] == ["over-dir", "over-logs", "over-pod"]
    assert [(k.pod, k.grace_period, k.message) for k in h.killer.kills] == [
        ("over-dir", 1, 'Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". '),
        ("over-logs", 1, 'Container main exceeded its local ephemeral storage limit "1Mi". '),
        ("over-pod", 1, "Pod ephemeral local storage usage exceeds the total limit of containers 3Mi. "),
    ]
    assert h.manager.evictions == {
        "emptydirfs.limit": 1,
        "ephemeralcontainerfs.limit": 1,
        "ephemeralpodfs.limit": 1,
    }
    assert h.manager.conditions.value == frozenset()


@pytest.mark.parametrize(("dedicated", "evicted"), [(False, ["layered"]), (True, [])])
async def test_a_containers_writable_layer_counts_against_its_limit_without_a_dedicated_imagefs(
    dedicated: bool, evicted: list[str]
) -> None:
    pod = make_pod("layered", limits={"ephemeral-storage": "1Mi"})
    h = harness([pod], {"memory.available": "100Mi"})
    h.signals.dedicated_image_fs = dedicated
    h.usage.set(pod.uid, PodUsage(containers={"main": ContainerUsage(rootfs_bytes=2 * MI, logs_bytes=10)}))
    await h.manager.synchronize()
    assert h.evicted == evicted
