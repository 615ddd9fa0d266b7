"""The ``kubelet-trio`` command in a subprocess: configuration precedence, warnings, errors, help, logs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubelet_trio", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def manifest(directory: Path, name: str, script: str = "run") -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.yaml").write_text(
        f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations:
    sim.kubelet-trio.io/app: '{script}'
spec:
  containers:
    - name: app
      image: busybox:1.36
"""
    )


def test_flags_override_the_config_file(tmp_path: Path) -> None:
    manifest(tmp_path / "from-file", "file-pod")
    manifest(tmp_path / "from-flag", "flag-pod")
    config = tmp_path / "kubelet.yaml"
    config.write_text(
        HEADER
        + "staticPodPath: from-file\n"
        + f"podLogsDir: {tmp_path / 'logs'}\n"
        + "runtimeRequestTimeout: 30s\n"
        + "logging: {format: json}\n"
    )
    common = [
        "--runonce",
        "--runtime",
        "sim",
        "--hostname-override",
        "Node-A",
        "--output",
        "json",
        "--v",
        "0",
        "--root-dir",
        str(tmp_path / "root"),
    ]
    from_file = run_cli("--config", str(config), *common)
    assert from_file.returncode == 0, from_file.stderr
    assert [p["name"] for p in json.loads(from_file.stdout)["pods"]] == ["file-pod-node-a"]
    logs = [json.loads(line) for line in from_file.stderr.splitlines() if line.startswith("{")]
    assert any(entry["msg"] == "pod added" for entry in logs)  # logging.format from the file

    from_flags = run_cli(
        "--config",
        str(config),
        *common,
        "--pod-manifest-path",
        str(tmp_path / "from-flag"),
        "--log-format",
        "text",
    )
    assert from_flags.returncode == 0, from_flags.stderr
    assert [p["name"] for p in json.loads(from_flags.stdout)["pods"]] == ["flag-pod-node-a"]
    assert not any(line.startswith("{") for line in from_flags.stderr.splitlines())
    added = [line for line in from_flags.stderr.splitlines() if '] "pod added" ' in line]
    assert added and re.match(r"I\d{4} [\d:.]{15} +\d+ [\w.]+:\d+\] ", added[0])  # klog's header
    assert 'pod="default/flag-pod-node-a"' in added[0] and ' uid="' in added[0]


def test_unknown_keys_warn_and_name_them(tmp_path: Path) -> None:
    manifest(tmp_path / "pods", "web")
    config = tmp_path / "kubelet.yaml"
    config.write_text(HEADER + "staticPodPath: pods\ncpuManagerPolicy: static\nfeatureGates: {Foo: true}\n")
    result = run_cli(
        "--config", str(config), "--runonce", "--runtime", "sim", "--pod-logs-dir", str(tmp_path / "l"),
        "--root-dir", str(tmp_path / "root"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "unknown or unsupported" in line]
    assert len(warnings) == 1
    assert warnings[0].startswith("W") and "cpuManagerPolicy, featureGates" in warnings[0]


def test_invalid_values_exit_2_naming_key_and_value(tmp_path: Path) -> None:
    config = tmp_path / "kubelet.yaml"
    config.write_text(HEADER + "staticPodPath: /pods\nsyncFrequency: every-minute\n")
    result = run_cli("--config", str(config))
    assert result.returncode == 2
    assert result.stderr == (
        f"kubelet-trio: --config {config}: invalid value for syncFrequency: 'every-minute': "
        "expected a duration such as 1m0s, 20s or 500ms\n"
    )
    flag = run_cli("--pod-manifest-path", "/pods", "--healthz-port", "99999")
    assert flag.returncode == 2
    assert "invalid value '99999' for --healthz-port" in flag.stderr
    unknown_flag = run_cli("--pod-manifest-path", "/pods", "--no-such-flag")
    assert (
        unknown_flag.returncode == 2 and unknown_flag.stderr == "kubelet-trio: unknown flag: --no-such-flag\n"
    )
    upstream = run_cli("--pod-manifest-path", "/pods", "--cpu-manager-policy=static")
    assert upstream.returncode == 2 and upstream.stderr == (
        "kubelet-trio: flag --cpu-manager-policy is an upstream kubelet flag not supported by kubelet-trio\n"
    )


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    no_source = run_cli("--runtime", "sim")
    assert no_source.returncode == 2 and "no pod source" in no_source.stderr
    api_once = run_cli("--runonce", "--kubeconfig", str(tmp_path / "kubeconfig"), "--runtime", "sim")
    assert api_once.returncode == 2 and "--kubeconfig" in api_once.stderr
    missing = run_cli("--runonce", "--runtime", "sim", "--pod-manifest-path", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def test_help_is_grouped() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    headings = [
        line[:-1]
        for line in result.stdout.splitlines()
        if line and not line[0].isspace() and line.endswith(":")
    ]
    assert headings == [
        "Usage",
        "Commands",
        "configuration",
        "pod sources",
        "container runtime",
        "node",
        "API server mode (--kubeconfig)",
        "TLS bootstrap and certificates",
        "HTTP servers",
        "run-once (--runonce)",
        "logging",
        "security-relevant, accepted but not enforced",
        "configuration file only",
    ]
    for flag in (
        "--pod-manifest-path",
        "--runonce-wait",
        "--read-only-port",
        "--log-format",
        "-v, --v LEVEL",
    ):
        assert flag in result.stdout
    assert "[staticPodPath]" in result.stdout and "(default 2m0s)" in result.stdout


def test_help_lists_every_command() -> None:
    from kubelet_trio.subcommands import SUBCOMMANDS

    result = run_cli("--help")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[:3] == [
        "Usage:",
        "  kubelet-trio [flags]",
        "  kubelet-trio COMMAND [args]        (kubelet-trio COMMAND --help for its options)",
    ]
    start = lines.index("Commands:") + 1
    listed = [line.split()[0] for line in lines[start : lines.index("", start)]]
    assert listed == list(SUBCOMMANDS)
    assert {"fake-apiserver", "sim-nodes", "shutdown-node"} <= set(listed)
    # and the usage of kubelet-trio without arguments lists the same
    bare = run_cli()
    assert bare.returncode == 2
    assert all(f"  {name} " in bare.stderr for name in SUBCOMMANDS)


def test_version_verbosity_and_bare_booleans(tmp_path: Path) -> None:
    from kubelet_trio import __version__

    version = run_cli("--version")
    assert (version.returncode, version.stdout, version.stderr) == (
        0,
        f"Kubernetes v1.36.0+kubelet-trio.{__version__}\n",
        "",
    )
    manifest(tmp_path / "pods", "web")
    result = run_cli(
        "--runonce", "--runtime", "sim", "--pod-manifest-path", str(tmp_path / "pods"), "--anonymous-auth",
        "-v", "4", "--logging-format", "json", "--root-dir", str(tmp_path / "root"),
        "--pod-logs-dir", str(tmp_path / "logs"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    logs = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    assert {entry["v"] for entry in logs if "v" in entry} >= {0, 4}  # -v 4 shows V(4) lines
    assert all(isinstance(entry["ts"], float) and ":" in entry["caller"] for entry in logs)
