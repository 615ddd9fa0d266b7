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
from tests.apiserver.harness import open_api_node, pod_manifest
from tests.apiserver.pod_status import running

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


async def test_a_gone_pods_keys_are_forgotten(autojump_clock: trio.testing.MockClock) -> None:
    """Once the kubelet has forgotten a deleted pod, the next sweep drops its keys from all three caches;
    the node's own keys and a running pod's stay."""
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock) as node:
        recorder = node.mode.recorder
        for name in ("keep", "gone"):
            api.create_pod(pod_manifest(name, {"app": "run"}))
        with trio.fail_after(60):
            await api.wait_for(lambda: running(api, "keep") and running(api, "gone"))
        await trio.sleep(5)  # their events have gone out
        uids = {name: api.pod(name)["metadata"]["uid"] for name in ("keep", "gone")}

        def pod_uids() -> set[str]:
            caches = (recorder._seen, recorder._similar, recorder._spam)
            return {key[5] for cache in caches for key in cache if key[2] == "Pod"}

        assert pod_uids() == set(uids.values())
        api.store.delete("pods", "default", "gone")
        with trio.fail_after(120):
            await api.wait_for(lambda: not api.pods() or len(api.pods()) == 1)
        await trio.sleep(events.FORGET_PERIOD + 5)
        assert pod_uids() == {uids["keep"]}
        assert any(key[2] == "Node" for key in recorder._spam)
