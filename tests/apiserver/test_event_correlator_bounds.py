"""The event correlator's three caches (repeats, similar messages, the per-object spam filter) each keep at
most ``MAX_LRU_ENTRIES`` keys, least recently used dropped first, as client-go's LRU caches: their keys
name pods, so on a node whose pods come and go an unbounded map grows by every pod ever seen."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from kubelet_trio import events
from kubelet_trio.api import Pod
from kubelet_trio.clock import WallClock
from kubelet_trio.events import EventRecorder
from kubelet_trio.testing.fakeapi import open_fake_api

LIMIT = 8


def pod(i: int) -> Pod:
    return Pod.from_dict({"metadata": {"name": f"p-{i}", "namespace": "default", "uid": f"uid-{i}"}})


async def test_the_caches_are_bounded_and_an_evicted_repeat_is_posted_anew(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(events, "MAX_LRU_ENTRIES", LIMIT)
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, api.client() as client, trio.open_nursery() as nursery:
        recorder = EventRecorder(client, "node-1", clock)
        await nursery.start(recorder.run)
        recorder.record(pod(0), "Normal", "Pulled", "image pulled")
        recorder.record(pod(0), "Normal", "Pulled", "image pulled")  # a repeat: the same Event, count 2
        await trio.sleep(1)
        assert [e["count"] for e in api.events()] == [2]
        for i in range(1, 3 * LIMIT):  # pods come and go
            recorder.record(pod(i), "Normal", "Started", "started")
            await trio.sleep(0.01)
        await trio.sleep(1)
        sizes = {len(recorder._seen), len(recorder._similar), len(recorder._spam)}
        assert sizes == {LIMIT}
        recorder.record(pod(0), "Normal", "Pulled", "image pulled")  # forgotten: a new Event
        await trio.sleep(1)
        pulled = [e["count"] for e in api.events() if e["reason"] == "Pulled"]
        assert pulled == [2, 1]
        nursery.cancel_scope.cancel()
