"""Run-once on the simulated runtime, in-process under MockClock: outcomes, report, retries, cleanup."""

from __future__ import annotations

from pathlib import Path

import httpx
import trio
import trio.testing

from kubelet_trio.clock import WallClock
from kubelet_trio.config.file import scan_manifest_path
from kubelet_trio.config.types import FILE_SOURCE
from kubelet_trio.fsio import run_inline
from kubelet_trio.kubelet import KubeletConfig
from kubelet_trio.runonce import RunOnceSettings, fetch_manifest_url, run_once
from kubelet_trio.runonce_report import RunOnceReport
from kubelet_trio.sim.runtime import SimRuntime
from tests.http_peers import from_handler
from tests.runonce.pods import BAD_ONCE, CRASH, GOOD_JOB, WEB, missing_image, write_manifests

NODE = "node-1"


async def run(
    tmp_path: Path, *specs: tuple[str, str, str, str, str], sim: SimRuntime | None = None, **settings: object
) -> tuple[RunOnceReport, SimRuntime, list[str]]:
    clock = WallClock()
    sim = sim or SimRuntime(clock=clock, run_sync=run_inline)
    scan = scan_manifest_path(str(write_manifests(tmp_path / "manifests", *specs)), NODE)
    config = KubeletConfig(
        node_name=NODE,
        pod_logs_dir=str(tmp_path / "logs"),
        root_dir=str(tmp_path / "root"),
        node_ips=("192.0.2.1",),
    )
    progress: list[str] = []
    report = await run_once(
        sim,
        config,
        {FILE_SOURCE: scan.pods},
        RunOnceSettings(**settings),  # type: ignore[arg-type]
        clock=clock,
        run_sync=run_inline,
        progress=progress.append,
    )
    return report, sim, progress


def by_name(report: RunOnceReport) -> dict[str, object]:
    return {p.name.removesuffix(f"-{NODE}"): p for p in report.pods}


async def test_good_pods_reach_their_targets(autojump_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    report, sim, progress = await run(tmp_path, GOOD_JOB, WEB, wait="completion")
    assert report.ok
    pods = by_name(report)
    job, web = pods["good-job"], pods["web"]
    assert (job.target, job.phase, job.reached) == ("completion", "Succeeded", True)
    assert (web.target, web.phase, web.reached) == ("running", "Running", True)
    assert web.time_to_running == 0.0  # started at once and reported by the sync that started it
    assert job.time_to_running == 0.0 and job.time_to_completion == 2.0  # exits 2 s after its start
    (task,) = job.containers
    assert (task.state, task.reason, task.exit_code, task.restarts, task.log_tail) == (
        "terminated", "Completed", 0, 0, ()
    )  # fmt: skip
    assert report.elapsed == 2.0
    assert progress[0] == "run-once: 2 pods: 2 started, 0 running, 0 done [0.0s]"
    assert progress[-1] == "run-once: 2 pods: 2 started, 2 running, 2 done [2.0s]"
    # Pods are left as they are (like the Go kubelet): the web pod still runs.
    sandboxes = await sim.list_pod_sandbox()
    assert len(sandboxes) == 2


async def test_failures_are_reported_each_for_what_it_is(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    start = trio.current_time()
    report, _, _ = await run(
        tmp_path, GOOD_JOB, CRASH, BAD_ONCE, missing_image(), wait="completion", timeout=60
    )
    assert not report.ok
    pods = by_name(report)
    assert pods["good-job"].reached

    bad = pods[
        "bad-once"
    ]  # restartPolicy Never, exit 3: Failed, decided at once (no waiting for the deadline)
    assert (bad.reached, bad.phase, bad.time_to_completion) == (False, "Failed", 1.0)
    assert bad.reason == "container app exited with 3 (Error)"
    (app,) = bad.containers
    assert (app.state, app.exit_code, app.log_tail) == ("terminated", 3, ("bad",))

    crash = pods["crash"]  # OnFailure, exit 1 every time: a crash loop until the deadline
    assert (crash.reached, crash.phase) == (False, "Running")
    assert crash.reason == "completion not reached within 1m0s (timeout)"
    (app,) = crash.containers
    assert app.exit_code == 1 and app.restarts >= 3 and app.failed
    assert app.log_tail == ("boom",)

    missing = pods["no-image"]
    assert (missing.reached, missing.phase, missing.target) == (False, "Pending", "running")
    (app,) = missing.containers
    assert app.state == "waiting" and app.reason in ("ErrImagePull", "ImagePullBackOff")
    assert "not found" in app.message or app.reason == "ImagePullBackOff"
    assert trio.current_time() - start == 60

    table = report.format_table()
    assert "default/crash-node-1" in table and "FAILED" in table and "      | boom" in table
    assert "why: completion not reached within 1m0s (timeout)" in table
    assert "4 pods: 1 reached their target, 3 failed (--runonce-wait=completion)" in table
    as_json = report.to_json()
    assert as_json["ok"] is False
    assert {p["name"]: p["reached"] for p in as_json["pods"]} == {
        "good-job-node-1": True,
        "crash-node-1": False,
        "bad-once-node-1": False,
        "no-image-node-1": False,
    }


async def test_running_target_for_every_pod_by_default(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    report, _, _ = await run(tmp_path, GOOD_JOB, WEB)
    assert report.ok and {p.target for p in report.pods} == {"running"}
    assert report.elapsed == 0.0  # the job counts once it runs; it is not waited for


async def test_retries_give_up_after_ten_doubling_delays(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    start = trio.current_time()
    report, _, _ = await run(tmp_path, missing_image(), timeout=5000)
    (pod,) = report.pods
    assert pod.reason == "running not reached after 10 retries"
    assert trio.current_time() - start == sum(2**i for i in range(11))  # 1 + 2 + ... + 1024 s


async def test_max_pods_rejects_the_rest(autojump_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    report, sim, _ = await run(tmp_path, GOOD_JOB, WEB, CRASH, max_pods=2)
    # Admitted in manifest order (crash, good-job, web): the third is rejected.
    assert [(p.name, p.reached, p.reason) for p in report.pods][-1] == (
        "web-node-1",
        False,
        "OutOfpods: node has capacity for 2 pods",
    )
    assert not report.ok
    assert len(await sim.list_pod_sandbox()) == 2


async def test_cleanup_leaves_nothing_behind(autojump_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    report, sim, progress = await run(
        tmp_path, GOOD_JOB, WEB, CRASH, wait="completion", timeout=30, cleanup=True
    )
    assert [p.reached for p in report.pods].count(True) == 2
    assert await sim.list_pod_sandbox() == []
    assert await sim.list_containers() == []
    assert progress[-1] == "run-once: removing 3 pods"
    assert not any((tmp_path / "logs").iterdir())  # log directories went with the pods


async def test_manifest_url_is_read_once(tmp_path: Path) -> None:
    body = b"""apiVersion: v1
kind: PodList
items:
  - metadata: {name: a}
    spec: {containers: [{name: app, image: busybox:1.36}]}
  - metadata: {name: b}
    spec: {containers: [{name: app, image: busybox:1.36}]}
"""
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=body) if request.url.path == "/pods" else httpx.Response(404)

    connect = from_handler(answer).connect
    pods, errors = await fetch_manifest_url(
        "http://config.test/pods", NODE, {"X-Token": ["t"]}, connect=connect
    )
    assert errors == () and [p.name for p in pods] == ["a-node-1", "b-node-1"]
    assert pods[0].annotations["kubernetes.io/config.source"] == "http"
    assert seen[0].headers["x-token"] == "t"
    pods, errors = await fetch_manifest_url("http://config.test/missing", NODE, connect=connect)
    assert pods == () and "HTTP status 404" in str(errors[0])
