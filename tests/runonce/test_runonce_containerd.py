"""``kubelet-trio --runonce`` against a real containerd (real processes, real clock)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.remote import open_cri_runtime
from kubelet_trio.kuberuntime.labels import node_selector
from kubelet_trio.testing.env import LocalCriEnvironment, remove_all_pods
from kubelet_trio.testing.env import running_containers as env_running_containers
from tests.runonce.pods import CRASH, GOOD_JOB, WEB, missing_image, write_manifests

pytestmark = pytest.mark.containerd


def runonce(
    env: LocalCriEnvironment, tmp_path: Path, node: str, *flags: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubelet_trio", "--runonce", "--container-runtime-endpoint", env.endpoint,
         "--hostname-override", node, "--pod-logs-dir", str(tmp_path / "logs"), "--root-dir", str(tmp_path),
         "--output", "json", *flags],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


async def sandboxes(env: LocalCriEnvironment, node: str) -> list[pb.PodSandbox]:
    async with open_cri_runtime(env.endpoint, request_timeout=30) as runtime:
        return await runtime.list_pod_sandbox(pb.PodSandboxFilter(label_selector=node_selector(node)))


async def running_containers(env: LocalCriEnvironment, node: str) -> list[str]:
    return [c.metadata.name for c in await env_running_containers(env.endpoint, node) if c.metadata]


async def remove_node_pods(env: LocalCriEnvironment, node: str) -> None:
    await remove_all_pods(env.endpoint, node)


async def test_success_crash_loop_and_missing_image_are_reported(
    cri_env: LocalCriEnvironment, tmp_path: Path
) -> None:
    node = "runonce-mixed"
    manifests = write_manifests(tmp_path / "m", GOOD_JOB, CRASH, missing_image(cri_env.missing_image))
    result = await trio.to_thread.run_sync(
        runonce, cri_env, tmp_path, node, "--pod-manifest-path", str(manifests),
        "--runonce-wait=completion", "--runonce-timeout=12s", "--runonce-cleanup",
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    pods = {p["name"]: p for p in json.loads(result.stdout)["pods"]}

    job = pods[f"good-job-{node}"]
    assert (job["reached"], job["phase"]) == (True, "Succeeded")
    assert job["containers"][0]["exitCode"] == 0 and job["containers"][0]["reason"] == "Completed"

    crash = pods[f"crash-{node}"]
    assert crash["reached"] is False and crash["reason"] == "completion not reached within 12s (timeout)"
    (app,) = crash["containers"]
    assert app["exitCode"] == 1 and app["restarts"] >= 1
    assert app["logTail"] == ["boom"]

    missing = pods[f"no-image-{node}"]
    (app,) = missing["containers"]
    assert missing["reached"] is False and missing["phase"] == "Pending"
    assert app["state"] == "waiting" and app["reason"] in ("ErrImagePull", "ImagePullBackOff")

    # --runonce-cleanup: nothing of this node is left in the runtime.
    assert await sandboxes(cri_env, node) == []


async def test_good_pods_exit_0_and_are_left_running(cri_env: LocalCriEnvironment, tmp_path: Path) -> None:
    node = "runonce-good"
    manifests = write_manifests(tmp_path / "m", GOOD_JOB, WEB)  # busybox:1.36 via the docker.io mirror
    try:
        result = await trio.to_thread.run_sync(
            runonce,
            cri_env,
            tmp_path,
            node,
            "--pod-manifest-path",
            str(manifests),
            "--runonce-wait=completion",
        )
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        assert report["ok"] is True
        assert {p["name"]: p["phase"] for p in report["pods"]} == {
            f"good-job-{node}": "Succeeded",
            f"web-{node}": "Running",
        }
        # Like the Go kubelet, run-once leaves the pods as they are.
        assert await running_containers(cri_env, node) == ["app"]
    finally:
        await remove_node_pods(cri_env, node)


async def test_examples_run_on_containerd(cri_env: LocalCriEnvironment, tmp_path: Path) -> None:
    """The README's main job: the examples, as written (busybox:1.36), then removed."""
    node = "runonce-examples"
    examples = Path(__file__).parents[2] / "examples"
    result = await trio.to_thread.run_sync(
        runonce, cri_env, tmp_path, node, "--pod-manifest-path", str(examples), "--runonce-wait=completion",
        "--runonce-timeout=30s", "--runonce-cleanup",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    pods = {p["name"].removesuffix(f"-{node}"): p for p in json.loads(result.stdout)["pods"]}
    assert set(pods) == {"hello", "job-like", "probes", "sidecar"}
    assert pods["job-like"]["phase"] == "Succeeded"
    assert pods["hello"]["reached"] and pods["hello"]["phase"] == "Running"
    assert await sandboxes(cri_env, node) == []
