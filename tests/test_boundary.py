"""``kubelet_trio.boundary.contain``: one peer's failure is logged once, counted and swallowed; cancellation
and the node's own errors outside a boundary still propagate."""

from __future__ import annotations

import logging

import pytest
import trio

from kubelet_trio.boundary import BoundaryErrors, contain
from kubelet_trio.logs import record_fields
from kubelet_trio.metrics import KubeletMetrics


def test_an_error_is_logged_once_with_the_peer_counted_and_swallowed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    errors = BoundaryErrors()
    seen: list[Exception] = []
    with (
        caplog.at_level(logging.ERROR, logger="kubelet_trio.boundary"),
        contain("http", errors, on_error=seen.append, peer="127.0.0.1:4000") as result,
    ):
        raise KeyError("a corner only this input reaches")
    assert isinstance(result.error, KeyError)
    assert seen == [result.error]
    assert errors.counts == {"http": 1}
    [record] = caplog.records
    assert record.getMessage() == "Peer failed; closing it"
    assert record_fields(record) == {"boundary": "http", "peer": "127.0.0.1:4000"}


def test_a_body_that_ends_normally_records_nothing() -> None:
    errors = BoundaryErrors()
    with contain("manifest", errors) as result:
        pass
    assert result.error is None
    assert not errors.counts


async def test_errors_in_a_peers_nursery_are_contained_and_siblings_keep_running() -> None:
    errors = BoundaryErrors()
    sibling_done = trio.Event()

    async def peer() -> None:
        async def broken() -> None:
            raise ValueError("garbage")

        with contain("grpc", errors):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(broken)
                await trio.sleep_forever()

    async def sibling() -> None:
        await trio.sleep(1)
        sibling_done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(peer)
        nursery.start_soon(sibling)
    assert sibling_done.is_set()
    assert errors.counts == {"grpc": 1}


async def test_cancellation_passes_through(autojump_clock: trio.testing.MockClock) -> None:
    errors = BoundaryErrors()
    with trio.move_on_after(5) as scope:
        with contain("streaming", errors) as result:
            await trio.sleep_forever()
    assert scope.cancelled_caught
    assert result.error is None
    assert not errors.counts


def test_the_node_metrics_export_the_counts() -> None:
    metrics = KubeletMetrics()
    assert b"kubelet_trio_boundary_errors_total" not in metrics.render()
    metrics.boundary_errors.record("apiwatch")
    metrics.boundary_errors.record("apiwatch")
    assert b'kubelet_trio_boundary_errors_total{boundary="apiwatch"} 2.0' in metrics.render()
