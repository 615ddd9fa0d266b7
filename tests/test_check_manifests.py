"""``kubelet-trio check-manifests`` end to end, through ``python -m kubelet_trio``."""

from __future__ import annotations

import json
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
    expected: list[str] = []
    for path in sorted((DATA / "manifests").iterdir()):
        if path.name == "multi-doc.yaml":
            expected += [f"{path}: document 1 (line 3): ok", f"{path}: document 2 (line 15): ok"]
            continue
        if path.name == "dns-custom.yaml":  # kept to show that unknown fields survive a round trip
            expected.append(f"{path}:34: warning: spec.someFutureField: unknown field")
        expected.append(f"{path}: ok")
    assert lines == expected


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


TYPOS = """\
apiVersion: v1
kind: Pod
metadata:
  name: typos
spec:
  restartPolcy: Never
  containers:
  - name: app
    image: busybox:1.36
    imagePullPolcy: Always
    comand: [sh, -c, "true"]
"""


def test_unknown_fields_warn_with_their_paths_and_fail_with_strict(tmp_path: Path) -> None:
    path = tmp_path / "typos.yaml"
    path.write_text(TYPOS)
    warnings = [
        f"{path}:6: warning: spec.restartPolcy: unknown field",
        f"{path}:10: warning: spec.containers[0].imagePullPolcy: unknown field",
        f"{path}:11: warning: spec.containers[0].comand: unknown field",
    ]
    result = run(path)
    assert (result.returncode, result.stdout.splitlines()) == (0, [*warnings, f"{path}: ok"])
    strict = run("--strict", path)
    errors = [line.replace(": warning:", ":") for line in warnings]
    assert (strict.returncode, strict.stdout.splitlines()) == (1, errors)


def test_every_document_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "pods.yaml"
    bad_yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: broken\n"
    missing_image = TYPOS.replace("name: typos", "name: three").replace("    image: busybox:1.36\n", "")
    path.write_text("---\n".join([TYPOS, bad_yaml, missing_image]))
    result = run(path)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        f"{path}:6: warning: document 1: spec.restartPolcy: unknown field",
        f"{path}:10: warning: document 1: spec.containers[0].imagePullPolcy: unknown field",
        f"{path}:11: warning: document 1: spec.containers[0].comand: unknown field",
        f"{path}: document 1 (line 1): ok",
        f"{path}:15: document 2: invalid YAML: expected ',' or '}}', but got '<stream end>'",
        f"{path}: document 2 (line 13): 1 error",
        f"{path}:22: warning: document 3: spec.restartPolcy: unknown field",
        f"{path}:24: document 3: spec.containers[0].image: Required value",
        f"{path}:25: warning: document 3: spec.containers[0].imagePullPolcy: unknown field",
        f"{path}:26: warning: document 3: spec.containers[0].comand: unknown field",
        f"{path}: document 3 (line 17): 1 error",
    ]


def test_json_output(tmp_path: Path) -> None:
    path = tmp_path / "pods.yaml"
    path.write_text("---\n".join([TYPOS, TYPOS.replace("name: typos", "name: Bad_Name")]))
    missing = tmp_path / "missing.yaml"
    result = run("--output", "json", path, missing)
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert {k: report[k] for k in ("version", "strict", "ok", "summary")} == {
        "version": 1,
        "strict": False,
        "ok": False,
        "summary": {"files": 2, "documents": 2, "errors": 2, "warnings": 6},
    }
    good, bad = report["files"][0]["documents"]
    assert report["files"][0]["path"] == str(path) and report["files"][0]["errors"] == []
    assert good == {
        "document": 1,
        "line": 1,
        "ok": True,
        "pods": ["default/typos"],
        "errors": [],
        "warnings": [
            {"line": 6, "field": "spec.restartPolcy", "message": "unknown field"},
            {"line": 10, "field": "spec.containers[0].imagePullPolcy", "message": "unknown field"},
            {"line": 11, "field": "spec.containers[0].comand", "message": "unknown field"},
        ],
    }
    assert (bad["document"], bad["ok"], bad["pods"]) == (2, False, [])
    assert [(e["line"], e["field"]) for e in bad["errors"]] == [(16, "metadata.name")]
    assert report["files"][1] == {
        "path": str(missing),
        "ok": False,
        "errors": [{"line": None, "field": "", "message": "no such file or directory"}],
        "documents": [],
    }
    strict = json.loads(run("--strict", "-o", "json", path).stdout)
    assert strict["strict"] is True and strict["summary"]["warnings"] == 0
    assert strict["summary"]["errors"] == 7


def test_no_abbreviated_options(tmp_path: Path) -> None:
    assert run("--stri", tmp_path).returncode == 2


def test_a_reader_that_stops_early_ends_it_quietly(tmp_path: Path) -> None:
    """``check-manifests --output json | head``: no BrokenPipeError traceback; the status a shell reports
    for a tool that SIGPIPE stopped (141)."""
    pod = "apiVersion: v1\nkind: Pod\nmetadata: {{name: p{}}}\nspec: {{containers: [{{name: a, image: b}}]}}"
    many = tmp_path / "many.yaml"
    many.write_text("\n---\n".join(pod.format(i) for i in range(1500)))  # far more than a pipe holds
    with subprocess.Popen(
        [sys.executable, "-m", "kubelet_trio", "check-manifests", "--output", "json", str(many)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        head = proc.stdout.read(100)
        proc.stdout.close()  # as head(1) exits
        stderr = proc.stderr.read()
        code = proc.wait(60)
    assert head.startswith(b'{\n  "version": 1,')
    assert (code, stderr) == (141, b"")
