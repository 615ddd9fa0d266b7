"""SimRuntime's configurable runtime handlers (containerd's ``runtimes`` table and default runtime)."""

from __future__ import annotations

import pytest

from kubelet_trio.cri import errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.sim.runtime import SimRuntime


def config(name: str) -> pb.PodSandboxConfig:
    return pb.PodSandboxConfig(metadata=pb.PodSandboxMetadata(name=name, namespace="default", uid=name))


async def test_configured_set_and_default() -> None:
    sim = SimRuntime(runtime_handlers=["kata", "runsc"], default_runtime_name="kata")
    assert sim.runtime_handlers == frozenset({"kata", "runsc"})
    for handler in ("", "kata", "runsc"):
        sandbox_id = await sim.run_pod_sandbox(config(f"pod-{handler or 'default'}"), handler)
        status = (await sim.pod_sandbox_status(sandbox_id)).status
        assert status is not None and status.runtime_handler == handler
    with pytest.raises(
        errors.CriCallError,
        match=r'^RunPodSandbox: failed to get sandbox runtime: no runtime for "runc" is configured$',
    ):
        await sim.run_pod_sandbox(config("pod-runc"), "runc")


async def test_default_runtime_missing_from_the_set_fails_the_empty_handler() -> None:
    sim = SimRuntime(runtime_handlers=["runsc"])  # default_runtime_name stays "runc"
    with pytest.raises(errors.CriCallError, match='no runtime for "runc" is configured'):
        await sim.run_pod_sandbox(config("pod"), "")
    assert await sim.list_pod_sandbox() == []
