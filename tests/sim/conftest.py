"""Fixtures for the SimRuntime tests: a runtime with an image present, and a pod builder on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelet_trio.sim.runtime import SimRuntime
from tests.sim.pods import IMAGE, WALL_START_NS, Pods


@pytest.fixture
def wall_start_ns() -> int:
    return WALL_START_NS


@pytest.fixture
async def sim() -> SimRuntime:
    """Built inside the test's Trio run, so its clock origin is the test's start."""
    return SimRuntime(preloaded_images=[IMAGE], wall_clock_start_ns=WALL_START_NS, id_seed=7)


@pytest.fixture
def pods(sim: SimRuntime, tmp_path: Path) -> Pods:
    return Pods(sim, tmp_path / "logs")
