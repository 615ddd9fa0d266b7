"""The ``target`` fixture: every contract test runs once per runtime implementation."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio

from kubelet_trio.cri.remote import open_cri_runtime
from tests.contract.targets import Target

SIM_IMAGE = "registry.sim/kubelet-trio/busybox:1.36"
SIM_MISSING_IMAGE = "sim.invalid/kubelet-trio/does-not-exist:1"

TARGETS = [
    pytest.param("sim", id="sim"),
    pytest.param("sim-cri", id="sim-cri"),
    pytest.param("containerd", id="containerd", marks=pytest.mark.containerd),
]


@pytest.fixture(params=TARGETS)
def target_kind(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    """(kind, endpoint); resolving the endpoint lazily starts only the servers a run needs."""
    kind = request.param
    if kind == "sim-cri":
        return kind, request.getfixturevalue("sim_cri_endpoint")
    if kind == "containerd":
        return kind, request.getfixturevalue("cri_env").endpoint
    return kind, None


@pytest.fixture
def target_images(request: pytest.FixtureRequest, target_kind: tuple[str, str | None]) -> tuple[str, str]:
    if target_kind[0] == "containerd":
        env = request.getfixturevalue("cri_env")
        return env.images.busybox, env.missing_image
    return SIM_IMAGE, SIM_MISSING_IMAGE


@pytest.fixture
async def target(
    target_kind: tuple[str, str | None], target_images: tuple[str, str], tmp_path: object
) -> AsyncIterator[Target]:
    kind, endpoint = target_kind
    image, missing = target_images
    log_root = trio.Path(str(tmp_path)) / "logs"
    if endpoint is None:
        from kubelet_trio.sim.runtime import SimRuntime

        t = Target(kind, SimRuntime(), image, missing, log_root)
        yield t
        await t.cleanup()
        return
    async with open_cri_runtime(endpoint, request_timeout=30) as runtime:
        t = Target(kind, runtime, image, missing, log_root)
        try:
            yield t
        finally:
            await t.cleanup()
