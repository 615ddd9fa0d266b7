"""The runtime handler contract (RuntimeClass): SimRuntime, SimRuntime over a socket and containerd agree
on which handlers exist, what a sandbox reports, and the error for an unknown one."""

from __future__ import annotations

import secrets

import pytest

from kubelet_trio.cri import errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from tests.contract.targets import TEST_LABEL, Target


async def run_sandbox(
    target: Target, handler: str, name: str | None = None
) -> tuple[str, pb.PodSandboxConfig]:
    uid = secrets.token_hex(8)
    name = name or f"pod-{uid[:6]}"
    log_dir = target.log_root / f"default_{name}_{uid}"
    await log_dir.mkdir(parents=True, exist_ok=True)
    config = pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name=name, uid=uid, namespace="default", attempt=0),
        hostname=name,
        log_directory=str(log_dir),
        labels={TEST_LABEL: "1"},
        linux=pb.LinuxPodSandboxConfig(cgroup_parent=""),
    )
    sandbox_id = await target.runtime.run_pod_sandbox(config, handler)
    target.created_sandboxes.append(sandbox_id)
    return sandbox_id, config


async def test_configured_handlers_are_reported_as_asked(target: Target) -> None:
    for handler in ("", "runc"):  # "" is the default runtime, and is not rewritten to its name
        sandbox_id, _ = await run_sandbox(target, handler)
        status = (await target.runtime.pod_sandbox_status(sandbox_id)).status
        assert status is not None and status.state is pb.PodSandboxState.SANDBOX_READY
        assert status.runtime_handler == handler
        (listed,) = await target.runtime.list_pod_sandbox(pb.PodSandboxFilter(id=sandbox_id))
        assert listed.runtime_handler == handler


async def test_unknown_handler_fails_and_leaves_nothing_behind(target: Target) -> None:
    name = f"pod-{secrets.token_hex(3)}"
    with pytest.raises(errors.CriCallError) as caught:
        await run_sandbox(target, "nosuchhandler", name=name)
    assert caught.value.code == "UNKNOWN"
    assert str(caught.value) == (
        'RunPodSandbox: failed to get sandbox runtime: no runtime for "nosuchhandler" is configured'
    )
    listed = await target.runtime.list_pod_sandbox(pb.PodSandboxFilter(label_selector={TEST_LABEL: "1"}))
    assert [s for s in listed if s.metadata and s.metadata.name == name] == []
    # The name was not reserved by the failed attempt.
    sandbox_id, _ = await run_sandbox(target, "runc", name=name)
    status = (await target.runtime.pod_sandbox_status(sandbox_id)).status
    assert status is not None and status.state is pb.PodSandboxState.SANDBOX_READY
