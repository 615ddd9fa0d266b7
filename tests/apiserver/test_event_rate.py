"""Events have a rate limit of their own (Go: eventRecordQPS/eventBurst on a separate client): a burst of
events is spread out, and never makes pod status updates wait for the API client's tokens."""

from __future__ import annotations

import trio
import trio.testing

from kubelet_trio.apimode import ApiModeOptions
from kubelet_trio.client import TokenBucket
from kubelet_trio.clock import WallClock
from kubelet_trio.testing.apinode import MACHINE
from kubelet_trio.testing.fakeapi import open_fake_api
from tests.apiserver.harness import open_api_node, pod_manifest
from tests.apiserver.pod_status import running

PODS = 6


async def test_events_are_spread_at_their_rate_and_statuses_do_not_wait(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = WallClock()
    options = ApiModeOptions(machine=MACHINE, event_record_qps=1, event_burst=2)
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock, options=options) as node:
        assert node.mode.recorder.client.limiter is not node.mode.client.limiter
        await trio.sleep(30)  # the node's own start-up events have gone out
        before, start = len(api.events()), trio.current_time()
        for i in range(PODS):
            api.create_pod(pod_manifest(f"web-{i}", {"app": "run"}))
        with trio.fail_after(30):
            await api.wait_for(lambda: all(running(api, f"web-{i}") for i in range(PODS)))
        elapsed = trio.current_time() - start
        posted = len(api.events()) - before
        # at most the burst plus one a second went out meanwhile; each pod has at least three to send
        assert posted <= 2 + int(elapsed) + 1 < 3 * PODS
        await trio.sleep(3 * PODS + 10)
        reasons = [e["reason"] for e in api.events() if e["involvedObject"]["kind"] == "Pod"]
        assert all(reasons.count(reason) == PODS for reason in ("Pulled", "Created", "Started"))


async def test_no_limit_when_the_rate_is_zero(autojump_clock: trio.testing.MockClock) -> None:
    clock = WallClock()
    options = ApiModeOptions(machine=MACHINE, event_record_qps=0)
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock, options=options) as node:
        await trio.sleep(30)
        for i in range(PODS):
            api.create_pod(pod_manifest(f"web-{i}", {"app": "run"}))
        with trio.fail_after(30):
            await api.wait_for(lambda: all(running(api, f"web-{i}") for i in range(PODS)))
        await trio.sleep(1)
        started = [e for e in api.events() if e["reason"] == "Started"]
        assert len(started) == PODS
        assert node.mode.recorder.client.limiter.qps == 0


async def test_nodes_can_share_one_event_limit(autojump_clock: trio.testing.MockClock) -> None:
    clock = WallClock()
    shared = TokenBucket(5, 5)
    options = ApiModeOptions(machine=MACHINE, event_limiter=shared)
    async with (
        open_fake_api(now=clock.now) as api,
        open_api_node(api, "node-1", clock=clock, options=options) as one,
        open_api_node(api, "node-2", clock=clock, options=options) as two,
    ):
        assert one.mode.recorder.client.limiter is shared is two.mode.recorder.client.limiter
        assert one.mode.client.limiter is not shared
