"""The node loop on real containerd: real processes, real exits, real signals (real clock)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
import trio
import trio_util

from kubelet_trio.api import PodStatus
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.remote import open_cri_runtime
from kubelet_trio.testing.env import LocalCriEnvironment, remove_all_pods, running_containers
from kubelet_trio.testing.node import SimNode, open_node

pytestmark = pytest.mark.containerd

SERVE = "trap 'echo got TERM; exit 0' TERM; echo started; sleep 3600 & wait"


def manifest(name: str, image: str, containers: dict[str, str], **spec: Any) -> dict[str, Any]:
    init = spec.pop("init", {})
    body: dict[str, Any] = {
        "containers": [
            {"name": n, "image": image, "command": ["sh", "-c", c]} for n, c in containers.items()
        ],
        **spec,
    }
    if init:
        body["initContainers"] = [
            {"name": n, "image": image, "command": ["sh", "-c", c]} for n, c in init.items()
        ]
    return {"metadata": {"name": name}, "spec": body}


def cstatus(status: PodStatus, name: str) -> Any:
    for c in (status.container_statuses or ()) + (status.init_container_statuses or ()):
        if c.name == name:
            return c
    return None


def is_running(status: PodStatus, name: str) -> bool:
    c = cstatus(status, name)
    return c is not None and c.state is not None and c.state.running is not None


def seconds(value: str) -> float:
    return time.mktime(time.strptime(value, "%Y-%m-%dT%H:%M:%SZ"))


@pytest.fixture
async def node(cri_env: LocalCriEnvironment) -> AsyncIterator[SimNode]:
    try:
        async with (
            open_cri_runtime(cri_env.endpoint, request_timeout=30) as runtime,
            open_node(runtime, "e2e-node") as node,
        ):
            yield node
    finally:
        with trio.move_on_after(60, shield=True):
            await remove_all_pods(cri_env.endpoint)


async def test_crash_loop_with_real_exits(node: SimNode, cri_env: LocalCriEnvironment) -> None:
    (pod,) = await node.apply(
        manifest("crashy", cri_env.images.busybox, {"app": "echo run; sleep 1; exit 3"})
    )
    with trio.fail_after(60):
        status = await node.wait_for(
            pod, lambda s: (cstatus(s, "app").restart_count or 0) >= 2 if cstatus(s, "app") else False
        )
        waiting = await node.wait_for(
            pod,
            lambda s: (
                (c := cstatus(s, "app")).state.waiting is not None
                and c.state.waiting.reason == "CrashLoopBackOff"
            ),
        )
    app = cstatus(waiting, "app")
    assert app.last_state.terminated.exit_code == 3
    assert app.last_state.terminated.reason == "Error"
    assert "back-off" in app.state.waiting.message
    assert status.phase == "Running"
    with trio.fail_after(60):
        third = await node.wait_for(pod, lambda s: (cstatus(s, "app").restart_count or 0) >= 3)
    started = cstatus(third, "app")
    # the third start waited for the 20 s backoff after the previous exit (whole-second timestamps)
    prev = started.last_state.terminated
    begun = started.state.running.started_at if started.state.running else started.state.terminated.started_at
    assert seconds(begun) - seconds(prev.finished_at) >= 19


async def test_init_containers_run_in_order(node: SimNode, cri_env: LocalCriEnvironment) -> None:
    stamp = 'echo "$0 $(date +%s)"'
    (pod,) = await node.apply(
        manifest(
            "ordered",
            cri_env.images.busybox,
            {"app": SERVE},
            init={"first": f"{stamp}; sleep 2", "second": f"{stamp}"},
        )
    )
    with trio.fail_after(60):
        status = await node.wait_for(pod, lambda s: is_running(s, "app"))
    logs = Path(node.kubelet.config.pod_logs_dir) / f"default_ordered_{pod.uid}"
    first = (logs / "first" / "0.log").read_text().split()
    second = (logs / "second" / "0.log").read_text().split()
    assert first[-2] == "sh" and second[-2] == "sh"
    assert int(first[-1]) + 2 <= int(second[-1])  # second ran after first had slept 2 s
    assert cstatus(status, "first").state.terminated.exit_code == 0
    assert cstatus(status, "second").state.terminated.exit_code == 0
    assert {c.type: c.status for c in status.conditions}["Initialized"] == "True"


async def test_graceful_delete_honours_sigterm(node: SimNode, cri_env: LocalCriEnvironment) -> None:
    (pod,) = await node.apply(
        manifest("polite", cri_env.images.busybox, {"app": SERVE}, terminationGracePeriodSeconds=30)
    )
    with trio.fail_after(60):
        await node.wait_for(pod, lambda s: is_running(s, "app"))
    started = trio.current_time()
    await node.delete(pod)
    with trio.fail_after(60):
        await node.wait_terminated(pod)
    assert trio.current_time() - started < 10  # it exited on SIGTERM, long before the 30 s grace period
    app = cstatus(node.status(pod), "app")
    assert app.state.terminated.exit_code == 0
    log = Path(node.kubelet.config.pod_logs_dir) / f"default_polite_{pod.uid}" / "app" / "0.log"
    assert log.read_text().splitlines()[-1].endswith("stdout F got TERM")


async def test_sandbox_recreated_after_pause_process_dies(
    node: SimNode, cri_env: LocalCriEnvironment
) -> None:
    (pod,) = await node.apply(manifest("sbx", cri_env.images.busybox, {"app": SERVE}))
    with trio.fail_after(60):
        first = await node.wait_for(pod, lambda s: is_running(s, "app"))
    runtime = node.kubelet.runtime
    (sandbox,) = await runtime.list_pod_sandbox(
        pb.PodSandboxFilter(label_selector={"io.kubernetes.pod.uid": pod.uid})
    )
    info = (await runtime.pod_sandbox_status(sandbox.id, verbose=True)).info
    pid = json.loads(info["info"])["pid"]
    os.kill(pid, signal.SIGKILL)
    with trio.fail_after(60):
        status = await node.wait_for(
            pod, lambda s: is_running(s, "app") and cstatus(s, "app").restart_count == 1
        )
    ready = [
        s
        for s in await runtime.list_pod_sandbox(
            pb.PodSandboxFilter(label_selector={"io.kubernetes.pod.uid": pod.uid})
        )
        if s.state is pb.PodSandboxState.SANDBOX_READY
    ]
    assert [s.metadata.attempt for s in ready] == [1]
    assert cstatus(status, "app").container_id != cstatus(first, "app").container_id


# -- the kubelet process: killed and restarted, it adopts what it started ---------------------------------


@pytest.fixture
def manifest_dir(tmp_path: Path, cri_env: LocalCriEnvironment) -> Iterator[Path]:
    pods = tmp_path / "manifests"
    pods.mkdir()
    for i in range(5):
        doc = manifest(f"adopt-{i}", cri_env.images.busybox, {"app": SERVE})
        (pods / f"adopt-{i}.json").write_text(json.dumps({"apiVersion": "v1", "kind": "Pod", **doc}))
    yield pods
    trio.run(remove_all_pods, cri_env.endpoint)


def start_daemon(cri_env: LocalCriEnvironment, manifests: Path, workdir: Path) -> subprocess.Popen[bytes]:
    log = (workdir / "kubelet.log").open("ab")
    with log:
        return subprocess.Popen(
            [
                sys.executable, "-m", "kubelet_trio",
                "--pod-manifest-path", str(manifests),
                "--container-runtime-endpoint", cri_env.endpoint,
                "--root-dir", str(workdir / "root"),
                "--pod-logs-dir", str(workdir / "logs"),
                "--hostname-override", "adopt-node",
                "--healthz-port", "0",
                "--port", "0",
            ],
            stdout=log,
            stderr=log,
        )  # fmt: skip


async def adopted_containers(endpoint: str) -> dict[str, pb.Container]:
    return {c.id: c for c in await running_containers(endpoint, "adopt-node")}


async def wait_running(endpoint: str, count: int) -> dict[str, pb.Container]:
    """Poll the runtime (as an outside observer would) until ``count`` containers run."""
    with trio.fail_after(60):
        async with aclosing(trio_util.periodic(0.2)) as ticks:
            async for _ in ticks:
                if len(found := await adopted_containers(endpoint)) >= count:
                    return found
    raise AssertionError("unreachable")


async def test_restarted_kubelet_adopts_running_pods(
    cri_env: LocalCriEnvironment, manifest_dir: Path, tmp_path: Path
) -> None:
    first = start_daemon(cri_env, manifest_dir, tmp_path)
    try:
        before = await wait_running(cri_env.endpoint, 5)
    finally:
        first.kill()  # no chance to clean up: like a crash
        first.wait()
    second = start_daemon(cri_env, manifest_dir, tmp_path)
    try:
        await trio.sleep(6)  # several relists, syncs and housekeeping passes
        after = await wait_running(cri_env.endpoint, 5)
        assert second.poll() is None, (tmp_path / "kubelet.log").read_text()[-3000:]
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(10)
    assert set(after) == set(before)  # the same containers: none restarted, none duplicated
    assert all(c.annotations["io.kubernetes.container.restartCount"] == "0" for c in after.values())
    assert second.returncode == 0
