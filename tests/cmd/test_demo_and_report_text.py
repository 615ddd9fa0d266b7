"""User-facing text: ``demo --help`` is plain text, and the run-once summary counts in English."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kubelet_trio.runonce_report import PodReport, RunOnceReport


def test_demo_help_has_no_rest_markup() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kubelet_trio", "demo", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: kubelet-trio demo ")
    assert "kubelet-trio --runonce over examples/" in result.stdout
    for markup in ("``", ":class:", ":func:", ":mod:", "~kubelet_trio"):
        assert markup not in result.stdout


def pod(name: str, reached: bool) -> PodReport:
    return PodReport("default", name, f"uid-{name}", "Succeeded", "completion", reached)


@pytest.mark.parametrize(
    ("pods", "errors", "summary"),
    [
        ((pod("a", True),), (), "1 pod: 1 reached their target, 0 failed (--runonce-wait=completion)"),
        ((pod("a", True), pod("b", False)), (), "2 pods: 1 reached their target, 1 failed"),
        ((), ("bad.yaml: not a pod",), "0 pods: 0 reached their target, 0 failed"),
        ((), ("x",), "(--runonce-wait=completion); 1 manifest error in 0.0s"),
        ((), ("x", "y"), "; 2 manifest errors in 0.0s"),
    ],
)
def test_summary_counts_in_english(
    pods: tuple[PodReport, ...], errors: tuple[str, ...], summary: str
) -> None:
    last = RunOnceReport("completion", pods, errors).format_table().splitlines()[-1]
    assert summary in last
