"""``kubelet-trio check-manifests`` end to end, through ``python -m kubelet_trio``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
ROOT = Path(__file__).resolve().parent.parent


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubelet_trio", "check-manifests", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )


def test_valid_directory() -> None:
    result = run(DATA / "manifests")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    names = sorted(p.name for p in (DATA / "manifests").iterdir())
    assert lines == [f"{DATA / 'manifests' / name}: ok" for name in names]


def test_invalid_files() -> None:
    bad = DATA / "invalid" / "port-out-of-range.yaml"
    good = DATA / "manifests" / "nginx-web.yaml"
    result = run(good, bad)
    assert result.returncode == 1
    port = "spec.containers[1].ports[0]"
    assert result.stdout.splitlines() == [
        f"{good}: ok",
        f"{bad}:12: {port}.containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
        f'{bad}:13: {port}.protocol: Unsupported value: "HTTP": supported values: "TCP", "UDP", "SCTP"',
    ]


def test_invalid_directory_reports_every_file() -> None:
    result = run(DATA / "invalid")
    assert result.returncode == 1
    files = {line.split(":", 1)[0] for line in result.stdout.splitlines()}
    assert files == {str(p) for p in (DATA / "invalid").iterdir()}
    assert f"{DATA / 'invalid' / 'syntax-error.yaml'}:8: invalid YAML" in result.stdout


def test_missing_path_and_usage_errors(tmp_path: Path) -> None:
    result = run(tmp_path / "nope.yaml")
    assert result.returncode == 1
    assert result.stdout.strip() == f"{tmp_path / 'nope.yaml'}: no such file or directory"
    usage = run()
    assert usage.returncode == 2
    assert "usage: kubelet-trio check-manifests" in usage.stderr
    assert run("--bogus", tmp_path).returncode == 2
    help_ = run("--help")
    assert help_.returncode == 0 and "PATH" in help_.stdout
