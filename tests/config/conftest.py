"""Fixtures and helpers for the pod-config tests."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest
import trio

from kubelet_trio.api import Container, ObjectMeta, Pod, PodSpec
from kubelet_trio.config import PodOperation, PodUpdate

SEEN_AT = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.UTC)


def fixed_now() -> dt.datetime:
    return SEEN_AT


@pytest.fixture
def now() -> Callable[[], dt.datetime]:
    return fixed_now


def api_pod(
    name: str, uid: str, *, image: str = "busybox:1.36", namespace: str = "default", **meta: Any
) -> Pod:
    """A pod as an API-like source would deliver it."""
    return Pod(
        api_version="v1",
        kind="Pod",
        metadata=ObjectMeta(name=name, namespace=namespace, uid=uid, **meta),
        spec=PodSpec(containers=(Container(name="c", image=image),)),
    )


def summary(update: PodUpdate) -> tuple[PodOperation, tuple[str, ...]]:
    """``(op, (pod name, ...))`` for compact assertions."""
    return update.op, tuple(pod.name for pod in update.pods)


async def inline_run_sync(fn: Callable[..., Any], *args: Any) -> Any:
    """Run a blocking function in the Trio thread (MockClock cannot jump during it)."""
    return fn(*args)


async def no_update(channel: trio.MemoryReceiveChannel[PodUpdate], wait: float) -> bool:
    """True if nothing arrives on ``channel`` within ``wait`` (virtual) seconds."""
    with trio.move_on_after(wait):
        update = await channel.receive()
        raise AssertionError(f"unexpected update {summary(update)}")
    return True
