"""``kubelet_trio.boundary.contain``: one peer's failure is logged once, counted and swallowed; cancellation
and the node's own errors outside a boundary still propagate."""

from __future__ import annotations

import logging

import pytest
import trio

from kubelet_trio.boundary import (
    MAX_ECHO,
    MAX_MESSAGE,
    BoundaryErrors,
    LogBudget,
    contain,
    refused,
    summarise_refusals,
    truncate,
)
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


def test_truncate_keeps_a_prefix_and_says_how_long_the_text_was() -> None:
    assert truncate("short") == "short"
    assert truncate("x" * MAX_ECHO) == "x" * MAX_ECHO
    huge = "é" * (512 * 1024)
    assert truncate(huge) == f"{'é' * MAX_ECHO}... ({2 * len(huge)} bytes)"  # UTF-8 bytes, as sent
    assert truncate("abcdef", 3) == "abc... (6 bytes)"


def test_a_log_budget_holds_back_lines_and_counts_them() -> None:
    budget = LogBudget(period=10, burst=2)
    assert [budget.take(0), budget.take(1), budget.take(2), budget.take(3)] == [0, 0, None, None]
    assert budget.flush(5) is None  # still spent
    assert budget.flush(10) == 2  # a new period: the summary of what was held back
    assert budget.flush(11) is None  # nothing more held back
    assert budget.take(12) == 0


def test_refused_peers_are_counted_and_logged_within_the_budget(caplog: pytest.LogCaptureFixture) -> None:
    errors = BoundaryErrors()
    budget = LogBudget(period=10, burst=1)
    with caplog.at_level(logging.WARNING, logger="kubelet_trio.boundary"):
        for now in (0.0, 1.0, 2.0, 10.0):
            refused(
                "pod-resources", errors, "message larger than max", budget=budget, now=now, name="n" * 5000
            )
    assert errors.counts == {"pod-resources": 4}
    first, second = caplog.records
    assert first.getMessage() == "Peer refused"
    assert record_fields(first) == {
        "boundary": "pod-resources",
        "reason": "message larger than max",
        "name": f"{'n' * MAX_MESSAGE}... (5000 bytes)",
    }
    assert record_fields(second)["suppressed"] == 2


def test_the_refusals_held_back_are_summed_up_in_one_line(caplog: pytest.LogCaptureFixture) -> None:
    budget = LogBudget(period=10, burst=1)
    with caplog.at_level(logging.WARNING, logger="kubelet_trio.boundary"):
        logged = [refused("grpc", None, "no HTTP/2 preface in time", budget=budget, now=t) for t in range(5)]
        summarise_refusals("grpc", budget, 4.0)  # the budget is spent: nothing yet
        summarise_refusals("grpc", budget, 10.0)
        summarise_refusals("grpc", budget, 20.0)  # nothing more held back
    assert logged == [True, False, False, False, False]
    assert [(r.getMessage(), record_fields(r).get("suppressed")) for r in caplog.records] == [
        ("Peer refused", None),
        ("Peers refused", 4),
    ]
