"""PodStorage merge semantics and PodConfig as a component (upstream ``config_test.go`` behaviours)."""

from __future__ import annotations

import random

import attrs
import pytest
import trio

from kubelet_trio.api import Pod, PodStatus
from kubelet_trio.config import (
    CONFIG_FIRST_SEEN_ANNOTATION,
    CONFIG_SOURCE_ANNOTATION,
    PodConfig,
    PodOperation,
    PodStorage,
    SourceSet,
)
from tests.config.conftest import api_pod, fixed_now, summary

ADD, UPDATE, REMOVE, DELETE, RECONCILE = (
    PodOperation.ADD,
    PodOperation.UPDATE,
    PodOperation.REMOVE,
    PodOperation.DELETE,
    PodOperation.RECONCILE,
)


def merge(storage: PodStorage, *pods, source="api"):  # type: ignore[no-untyped-def]
    return [summary(u) for u in storage.merge(source, pods)]


def test_first_empty_set_sends_empty_add() -> None:
    storage = PodStorage(now=fixed_now)
    assert merge(storage) == [(ADD, ())]
    assert merge(storage) == []  # only on the first SET
    assert storage.seen_sources == {"api"}


def test_add_then_nothing_changed() -> None:
    storage = PodStorage(now=fixed_now)
    a, b = api_pod("a", "uid-a"), api_pod("b", "uid-b")
    assert merge(storage, a, b) == [(ADD, ("a", "b"))]
    assert merge(storage, a, b) == []
    stored = storage.pods("api")[0]
    assert stored.annotations[CONFIG_SOURCE_ANNOTATION] == "api"
    assert stored.annotations[CONFIG_FIRST_SEEN_ANNOTATION] == "2024-05-01T12:00:00Z"


def test_emit_order_remove_add_update_delete_reconcile() -> None:
    storage = PodStorage(now=fixed_now)
    a, b, c, d = (api_pod(n, f"uid-{n}") for n in "abcd")
    merge(storage, a, b, c, d)
    e = api_pod("e", "uid-e")
    b2 = api_pod("b", "uid-b", image="busybox:1.37")
    c2 = api_pod("c", "uid-c", deletion_timestamp="2024-05-01T12:01:00Z", deletion_grace_period_seconds=30)
    d2 = attrs.evolve(d, status=PodStatus(phase="Running"))
    assert merge(storage, b2, c2, d2, e) == [
        (REMOVE, ("a",)),
        (ADD, ("e",)),
        (UPDATE, ("b",)),
        (DELETE, ("c",)),
        (RECONCILE, ("d",)),
    ]
    stored = {p.name: p for p in storage.pods()}
    assert stored["b"].spec.containers[0].image == "busybox:1.37"  # type: ignore[union-attr, index]
    assert stored["d"].status == PodStatus(phase="Running")
    assert stored["c"].metadata.deletion_grace_period_seconds == 30  # type: ignore[union-attr]


def test_update_keeps_first_seen_and_local_annotations_do_not_count() -> None:
    times = iter(["2024-01-01T00:00:00Z", "2030-01-01T00:00:00Z"])
    import datetime as dt

    storage = PodStorage(now=lambda: dt.datetime.fromisoformat(next(times)))
    merge(storage, api_pod("a", "uid-a"))
    seen = storage.pods()[0].annotations[CONFIG_FIRST_SEEN_ANNOTATION]
    relabelled = api_pod("a", "uid-a", labels={"x": "y"}, annotations={CONFIG_FIRST_SEEN_ANNOTATION: "other"})
    assert merge(storage, relabelled) == [(UPDATE, ("a",))]
    assert storage.pods()[0].annotations[CONFIG_FIRST_SEEN_ANNOTATION] == seen
    only_local = api_pod("a", "uid-a", labels={"x": "y"}, annotations={CONFIG_SOURCE_ANNOTATION: "elsewhere"})
    assert merge(storage, only_local) == []


def test_duplicates_by_full_name_and_uid_across_sources() -> None:
    storage = PodStorage(now=fixed_now)
    a, a_dup = api_pod("a", "uid-a"), api_pod("a", "uid-other")
    assert merge(storage, a, a_dup) == [(ADD, ("a",))]
    assert merge(storage, api_pod("x", "uid-a"), source="file") == [(ADD, ())]  # UID owned by "api"
    assert [p.uid for p in storage.pods("file")] == []
    same_name_other_ns = api_pod("a", "uid-b", namespace="other")
    assert merge(storage, a, same_name_other_ns) == [(ADD, ("a",))]


def test_sources_are_independent() -> None:
    storage = PodStorage(now=fixed_now)
    assert merge(storage, api_pod("a", "uid-a"), source="file") == [(ADD, ("a",))]
    assert merge(storage, api_pod("b", "uid-b"), source="http") == [(ADD, ("b",))]
    assert merge(storage, source="file") == [(REMOVE, ("a",))]
    assert [p.name for p in storage.pods()] == ["b"]


async def test_podconfig_component_and_sources_ready(nursery: trio.Nursery) -> None:
    config = PodConfig(sources=("file", "http"), now=fixed_now)
    with pytest.raises(ValueError, match="not configured"):
        config.source_channel("api")
    file_send, http_send = config.source_channel("file"), config.source_channel("http")
    await nursery.start(config.run)
    assert not config.sources_ready.value
    await file_send.send(SourceSet("file", (api_pod("a", "uid-a"),)))
    assert summary(await config.updates.receive()) == (ADD, ("a",))
    assert not config.sources_ready.value
    await http_send.send(SourceSet("http", ()))
    await config.sources_ready.wait_value(True)
    update = await config.updates.receive()
    assert (update.op, update.source, update.pods) == (ADD, "http", ())
    assert config.seen_sources() == {"file", "http"}
    await file_send.send(SourceSet("file", ()))
    assert summary(await config.updates.receive()) == (REMOVE, ("a",))


async def test_podconfig_closes_updates_when_cancelled() -> None:
    config = PodConfig(sources=("file",))
    async with trio.open_nursery() as nursery:
        await nursery.start(config.run)
        nursery.cancel_scope.cancel()
    with pytest.raises(trio.EndOfChannel):
        await config.updates.receive()


def _replaced(pods: list[Pod], rng: random.Random) -> None:
    """Replace one pod object in place, as a watch event would: a new status, spec or deletion."""
    i = rng.randrange(len(pods))
    pod = pods[i]
    change = rng.randrange(5)
    if change == 0:
        pods[i] = attrs.evolve(pod, status=PodStatus(phase=rng.choice(["Pending", "Running"])))
    elif change == 1:
        pods[i] = api_pod(pod.name, pod.uid, image=rng.choice(["busybox:1.36", "busybox:1.37"]))
    elif change == 2:
        pods[i] = api_pod(pod.name, pod.uid, deletion_timestamp="2024-05-01T12:01:00Z")
    elif change == 3:
        pods[i] = attrs.evolve(pod)  # an equal object that is not the same one
    else:
        pods[i] = api_pod(pod.name, f"{pod.uid}-new")  # recreated under the same name


@pytest.mark.parametrize("seed", range(20))
def test_in_place_merge_gives_the_full_merges_updates(seed: int) -> None:
    """A SET that only replaces pod objects in place is merged without looking at the others; the
    updates and the stored pods are the full merge's, whatever the SETs (adds, removes, duplicates, a
    UID of another source's, reorders mixed in)."""
    rng = random.Random(seed)
    fast, full = PodStorage(now=fixed_now), PodStorage(now=fixed_now)
    pods = [api_pod(f"p{i}", f"uid-{i}") for i in range(6)]
    file_pods = [api_pod("f0", "uid-f0", namespace="kube-system")]
    for step in range(80):
        action = rng.randrange(20)
        extra: list[Pod] = []  # sent once: duplicates and another source's UID
        if action < 14 and pods:
            for _ in range(rng.randrange(1, 3)):
                _replaced(pods, rng)
        elif action == 14:
            pods.append(api_pod(f"p{step + 10}", f"uid-{step + 10}"))
        elif action == 15 and pods:
            pods.pop(rng.randrange(len(pods)))
        elif action in (16, 17) and pods:
            extra = [rng.choice([pods[0], api_pod(pods[0].name, "uid-dup"), file_pods[0]])]
        elif pods:
            rng.shuffle(pods)
        source = "file" if rng.randrange(10) == 0 else "api"
        sent = tuple(file_pods if source == "file" else [*pods, *extra])
        full._whole_sets.clear()  # the reference always runs the full merge
        assert fast.merge(source, sent) == full.merge(source, sent), step
        assert fast.pods() == full.pods(), step
        assert [p.uid for p in fast.pods()] == [p.uid for p in full.pods()], step
