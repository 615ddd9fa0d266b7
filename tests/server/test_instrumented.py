"""``InstrumentedRuntime``: every Runtime method counted and timed under the Go operation names."""

from __future__ import annotations

import inspect

import pytest
import trio
import trio.testing

from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.instrumented import OPERATIONS, InstrumentedRuntime
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.sim.runtime import SimRuntime


def test_every_protocol_method_is_wrapped() -> None:
    methods = {name for name, _ in inspect.getmembers(Runtime) if not name.startswith("_")}
    assert methods == set(OPERATIONS)
    assert all(inspect.iscoroutinefunction(getattr(InstrumentedRuntime, name)) for name in methods)
    assert isinstance(InstrumentedRuntime(SimRuntime(), lambda *a: None), Runtime)


async def test_calls_are_counted_timed_and_errors_recorded(autojump_clock: trio.testing.MockClock) -> None:
    calls: list[tuple[str, float, bool]] = []
    sim = SimRuntime(pull_delay=1.5)
    runtime = InstrumentedRuntime(sim, lambda op, seconds, failed: calls.append((op, seconds, failed)))
    await runtime.version()
    await runtime.pull_image(pb.ImageSpec(image="busybox:1.36"))
    with pytest.raises(cri_errors.NotFoundError):
        await runtime.container_status("nope")
    with pytest.raises(cri_errors.NotFoundError):
        await runtime.pull_image(pb.ImageSpec(image="sim.invalid/nothing:1"))
    assert calls == [
        ("version", 0.0, False),
        ("pull_image", 1.5, False),
        ("container_status", 0.0, True),
        ("pull_image", 0.0, True),  # sim.invalid fails at once
    ]
    # Harness extras of the wrapped runtime pass through.
    assert runtime.kill_sandbox_process.__self__ is sim
