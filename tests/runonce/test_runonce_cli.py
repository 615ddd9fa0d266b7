"""``kubelet-trio --runonce`` as a command on the simulated runtime: exit status, table, JSON, progress."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.runonce.pods import CRASH, GOOD_JOB, WEB, missing_image, write_manifests


def runonce(tmp_path: Path, manifests: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubelet_trio", "--runonce", "--runtime", "sim", "--hostname-override", "n1",
         "--pod-manifest-path", str(manifests), "--pod-logs-dir", str(tmp_path / "logs"),
         "--root-dir", str(tmp_path / "root"), *flags],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_good_pods_exit_0_with_a_table(tmp_path: Path) -> None:
    result = runonce(tmp_path, write_manifests(tmp_path / "m", GOOD_JOB, WEB), "--runonce-wait=completion")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["POD", "TARGET", "RESULT", "PHASE", "TO", "RUNNING", "TO", "COMPLETION"]
    assert lines[1].split()[:4] == ["default/good-job-n1", "completion", "ok", "Succeeded"]
    assert "terminated: Completed   exit 0   restarts 0" in lines[2]
    assert lines[3].split()[:4] == ["default/web-n1", "running", "ok", "Running"]
    assert lines[-1].startswith("2 pods: 2 reached their target, 0 failed (--runonce-wait=completion) in ")
    progress = result.stderr.splitlines()
    assert progress[0].startswith("run-once: 2 pods: 2 started, 0 running, 0 done")
    assert progress[-1].startswith("run-once: 2 pods: 2 started, 2 running, 2 done")
    assert not any("level=info" in line for line in progress)  # run-once is quiet unless --v is given


def test_failures_exit_1_with_a_json_report(tmp_path: Path) -> None:
    manifests = write_manifests(tmp_path / "m", GOOD_JOB, CRASH, missing_image())
    result = runonce(
        tmp_path,
        manifests,
        "--runonce-wait=completion",
        "--runonce-timeout=4s",
        "--output=json",
        "--runonce-cleanup",
    )
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    pods = {p["name"]: p for p in report["pods"]}
    assert report["ok"] is False
    assert pods["good-job-n1"]["reached"] is True and pods["good-job-n1"]["phase"] == "Succeeded"
    crash = pods["crash-n1"]
    assert crash["reached"] is False and crash["reason"] == "completion not reached within 4s (timeout)"
    assert crash["containers"][0]["exitCode"] == 1 and crash["containers"][0]["logTail"] == ["boom"]
    image = pods["no-image-n1"]["containers"][0]
    assert image["state"] == "waiting" and image["reason"] in ("ErrImagePull", "ImagePullBackOff")
    assert "run-once: removing 3 pods" in result.stderr
