"""``/healthz`` on a node under MockClock: ok, then each failing check named with its reason."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from tests.server.harness import open_test_node, pod_manifest


async def test_healthy_node_answers_ok(autojump_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    async with open_test_node(tmp_path) as node, node.client(read_only=False) as client:
        await trio.sleep(2)
        response = await client.get("/healthz")
        assert (response.status_code, response.text) == (200, "ok")
        verbose = await client.get("/healthz", params={"verbose": ""})
        assert verbose.text.splitlines() == [
            "[+]ping ok",
            "[+]syncloop ok",
            "[+]pleg ok",
            "[+]runtime ok",
            "healthz check passed",
        ]
        assert (await client.get("/healthz/pleg")).text == "ok"
        assert (await client.get("/healthz/nope")).status_code == 404
        assert (await client.post("/healthz")).status_code == 405


async def test_stalled_pleg_turns_healthz_500_with_its_reason(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_test_node(tmp_path) as node, node.client(read_only=False) as client:
        (pod,) = await node.apply(pod_manifest("web", {"app": "run"}))
        await node.wait_running(pod)
        node.sim.listing_broken = True  # every relist fails from now on
        broke_at = trio.current_time()
        await trio.sleep(179)
        assert (await client.get("/healthz")).status_code == 200  # within the 3 min threshold
        await trio.sleep(190 - (trio.current_time() - broke_at))
        response = await client.get("/healthz")
        assert response.status_code == 500
        lines = response.text.splitlines()
        failed = [line for line in lines if line.startswith("[-]")]
        assert len(failed) == 1 and failed[0].startswith("[-]pleg failed: pleg was last seen active 3m1")
        assert failed[0].endswith("ago; threshold is 3m0s")
        assert "[+]runtime ok" in lines and lines[-1] == "healthz check failed"
        one = await client.get("/healthz/pleg")
        assert one.status_code == 500 and "pleg was last seen active" in one.text

        node.sim.listing_broken = False
        await trio.sleep(2)
        assert (await client.get("/healthz")).status_code == 200


async def test_runtime_down_fails_runtime_then_syncloop(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_test_node(tmp_path) as node, node.client(read_only=False) as client:
        await trio.sleep(1)
        node.sim.status_broken = True
        await trio.sleep(6)  # the runtime status loop asks every 5 s
        response = await client.get("/healthz")
        assert response.status_code == 500
        assert "[-]runtime failed: container runtime is down:" in response.text
        assert "[+]syncloop ok" in response.text
        # The sync loop skips iterations while the runtime is in error (as in Go): after 5 min it shows.
        await trio.sleep(301)
        response = await client.get("/healthz")
        assert "[-]syncloop failed: sync Loop took longer than expected" in response.text
