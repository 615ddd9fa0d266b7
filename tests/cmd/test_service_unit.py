"""The packaged service (examples/service): the systemd unit lints, its ExecStart runs ``python -m
kubelet_trio`` with flags kubelet-trio accepts, the example KubeletConfiguration loads without a warning, and
both files are installed with the package's docs."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from kubelet_trio.options import load_options

REPO = Path(__file__).resolve().parents[2]
SERVICE = REPO / "examples" / "service"
UNIT = SERVICE / "kubelet-trio.service"
CONFIG = SERVICE / "kubelet-config.yaml"


def read_unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """systemd's unit syntax: ``[Section]``, ``Key=value`` (a key may repeat), ``#``/``;`` comments."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text = line.strip()
        if not text or text.startswith(("#", ";")):
            continue
        if text.startswith("[") and text.endswith("]"):
            current = sections.setdefault(text[1:-1], {})
            continue
        key, sep, value = text.partition("=")
        assert current is not None and sep, f"{path}:{number}: not a Key=value line in a section: {line!r}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def exec_start_flags() -> list[str]:
    [command] = read_unit(UNIT)["Service"]["ExecStart"]
    argv = shlex.split(command.replace("$KUBELET_TRIO_ARGS", ""))  # /etc/default/kubelet-trio: unset
    assert argv[:3] == ["/usr/bin/python3", "-m", "kubelet_trio"]
    return argv[3:]


def test_unit_keys() -> None:
    unit = read_unit(UNIT)
    assert set(unit) == {"Unit", "Service", "Install"}
    assert unit["Unit"]["After"] == ["network-online.target containerd.service"]
    service = unit["Service"]
    assert (service["Type"], service["Restart"], service["KillSignal"]) == (["exec"], ["always"], ["SIGTERM"])
    assert service["EnvironmentFile"] == ["-/etc/default/kubelet-trio"]
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    def verify(path: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["systemd-analyze", "verify", str(path)], capture_output=True, text=True, timeout=60, check=False
        )

    good = tmp_path / "kubelet-trio.service"
    shutil.copy(UNIT, good)
    result = verify(good)
    assert (result.returncode, result.stderr) == (0, "")
    broken = tmp_path / "broken.service"
    broken.write_text(UNIT.read_text().replace("/usr/bin/python3 ", "/nonexistent/python3 "))
    assert verify(broken).returncode != 0  # the check can fail


def test_exec_start_flags_and_the_example_config_are_valid() -> None:
    flags = exec_start_flags()
    assert flags == ["--config=/etc/kubelet-trio/config.yaml"]
    options, warnings = load_options([f"--config={CONFIG}"])
    assert warnings == []  # every key of the example is one kubelet-trio reads
    assert options.pod_manifest_path == "/etc/kubernetes/manifests"
    assert options.container_runtime_endpoint == "unix:///run/containerd/containerd.sock"
    assert (options.cgroup_driver, options.authorization_mode, options.rotate_certificates) == (
        "systemd",
        "Webhook",
        True,
    )
    assert options.explicit >= {"pod_manifest_path", "cluster_dns", "eviction_hard", "logging_format"}


def test_both_files_are_installed_with_the_docs() -> None:
    from setuptools.config.pyprojecttoml import read_configuration

    data_files = dict(read_configuration(REPO / "pyproject.toml")["tool"]["setuptools"]["data-files"])
    installed = data_files["share/doc/kubelet-trio/examples/service"]  # in the wheel's .data/data/
    assert sorted(installed) == [
        "examples/service/kubelet-config.yaml",
        "examples/service/kubelet-trio.service",
    ]
    assert all((REPO / path).is_file() for path in installed)
