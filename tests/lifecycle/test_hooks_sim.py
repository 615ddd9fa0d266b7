"""postStart and preStop hooks through a whole node on SimRuntime (autojump MockClock; the httpGet hook
test uses real sockets and Trio's real clock)."""

from __future__ import annotations

import trio
import trio.testing

from kubelet_trio.testing.pods import container_status, is_running
from tests.prober.nodes import bare_id, container, open_probe_node, pod_manifest
from tests.prober.servers import http_server


def hook(kind: str, handler: dict[str, object]) -> dict[str, object]:
    return {"lifecycle": {kind: handler}}


async def test_post_start_blocks_running_until_it_returns(autojump_clock: trio.testing.MockClock) -> None:
    async with open_probe_node() as env:
        (pod,) = await env.node.apply(
            pod_manifest(
                "post",
                [container(**hook("postStart", {"exec": {"command": ["warm-up"]}}))],
                scripts={"app": "run; exec warm-up -> 0 after 3s"},
            )
        )
        await trio.sleep_until(2.5)
        status = env.node.status(pod)
        assert status is not None and not is_running(status)
        assert container_status(status).state.waiting.reason == "ContainerCreating"
        status = await env.node.wait_for(pod, lambda s: is_running(s) and bool(container_status(s).ready))
        assert trio.current_time() >= 3
        assert env.sim.exec_times("warm-up") == [0]
        assert container_status(status).restart_count == 0


async def test_post_start_failure_kills_the_container(autojump_clock: trio.testing.MockClock) -> None:
    async with open_probe_node() as env:
        bad, good = await env.node.apply(
            pod_manifest(
                "post-fail",
                [container(**hook("postStart", {"exec": {"command": ["setup"]}}))],
                scripts={"app": "run; exec setup -> 1"},
            ),
            pod_manifest("fine", [container()]),
        )
        status = await env.node.wait_for(
            bad,
            lambda s: (
                bool(s.container_statuses)
                and container_status(s).state.waiting is not None
                and container_status(s).state.waiting.reason == "PostStartHookError"
            ),
        )
        app = container_status(status)
        assert "Exec lifecycle hook ([setup])" in (app.state.waiting.message or "")
        assert env.events.reasons("FailedPostStartHook", "post-fail")[0][1] == "PostStartHook failed"
        killing = [m for _, m in env.events.reasons("Killing", "post-fail")]
        assert killing and killing[0] == "FailedPostStartHook"
        assert env.sim.stops and env.sim.stops[0][0] == 0  # killed right after it started
        await trio.sleep(60)
        neighbour = env.node.status(good)
        assert (
            neighbour is not None and is_running(neighbour) and container_status(neighbour).restart_count == 0
        )


async def test_pre_stop_runs_before_sigterm_within_the_grace_period(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_probe_node() as env:
        (pod,) = await env.node.apply(
            pod_manifest(
                "pre",
                [container(**hook("preStop", {"exec": {"command": ["drain"]}}))],
                scripts={"app": "run; exec drain -> 0 after 5s"},
                terminationGracePeriodSeconds=30,
            )
        )
        status = await env.node.wait_for(pod, is_running)
        container_id = bare_id(status)
        await trio.sleep_until(10)
        await env.node.delete(pod)
        await env.node.wait_terminated(pod)
        (drain_at,) = env.sim.exec_times("drain")
        stops = [(t, timeout) for t, cid, timeout in env.sim.stops if cid == container_id]
        assert stops[0] == (drain_at + 5, 25)  # SIGTERM after the hook, with what is left of the 30 s


async def test_pre_stop_is_cut_at_the_grace_period(autojump_clock: trio.testing.MockClock) -> None:
    async with open_probe_node() as env:
        (pod,) = await env.node.apply(
            pod_manifest(
                "pre-slow",
                [container(**hook("preStop", {"exec": {"command": ["drain"]}}))],
                scripts={"app": "run; exec drain -> 0 after 1h"},
                terminationGracePeriodSeconds=4,
            )
        )
        status = await env.node.wait_for(pod, is_running)
        await env.node.delete(pod)
        await env.node.wait_terminated(pod)
        (drain_at,) = env.sim.exec_times("drain")
        stops = [(t, timeout) for t, cid, timeout in env.sim.stops if cid == bare_id(status)]
        assert stops[0] == (drain_at + 4, 2)  # 4 s used up by the hook; the runtime's 2 s minimum


async def test_pre_stop_sleep(autojump_clock: trio.testing.MockClock) -> None:
    async with open_probe_node() as env:
        (pod,) = await env.node.apply(
            pod_manifest("pre-sleep", [container(**hook("preStop", {"sleep": {"seconds": 3}}))])
        )
        status = await env.node.wait_for(pod, is_running)
        await env.node.delete(pod)
        deleted_at = trio.current_time()
        await env.node.wait_terminated(pod)
        (stop_at, _, timeout) = env.sim.stops[0]
        assert timeout == 27
        assert 3 <= stop_at - deleted_at <= 4  # the kill starts at the next relist
        assert bare_id(status)


async def test_http_post_start_hook_goes_to_the_pod() -> None:
    with trio.fail_after(20):
        async with http_server({"/hook": (500, {}, b"")}) as web, open_probe_node() as env:
            env.node.kubelet._kube_runtime.hooks.host_override = "127.0.0.1"  # type: ignore[union-attr]
            (pod,) = await env.node.apply(
                pod_manifest(
                    "http-hook",
                    [container(**hook("postStart", {"httpGet": {"path": "/hook", "port": web.port}}))],
                )
            )
            await env.node.wait_for(pod, is_running)
            assert [path for path, _ in web.requests] == ["/hook"]
            assert web.requests[0][1]["user-agent"] == "kube-lifecycle/1.36"
            assert env.events.reasons("FailedPostStartHook") == []  # Go does not check the status code
