"""containerLogMaxSize, containerLogMaxFiles, containerLogMonitorInterval: flags, file keys, validation,
and what the node gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelet_trio.kubelet import KubeletConfig
from kubelet_trio.options import KubeletOptions, OptionsError, component_configs, load_options


def kubelet_config(options: KubeletOptions) -> KubeletConfig:
    return component_configs(options).kubelet


HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def test_defaults_are_the_go_kubelets() -> None:
    options, _ = load_options([])
    assert (options.container_log_max_size, options.container_log_max_files) == ("10Mi", 5)
    assert options.container_log_monitor_interval == 10
    config = kubelet_config(options)
    assert (config.container_log_max_size, config.container_log_max_files) == (10 * 2**20, 5)
    assert config.container_log_monitor_interval == 10


def test_file_then_flags(tmp_path: Path) -> None:
    file = tmp_path / "kubelet.yaml"
    file.write_text(
        HEADER + "containerLogMaxSize: 50Mi\ncontainerLogMaxFiles: 3\ncontainerLogMonitorInterval: 1m\n"
    )
    options, warnings = load_options(["--config", str(file), "--container-log-max-size", "500Ki"])
    assert warnings == []
    config = kubelet_config(options)
    assert (config.container_log_max_size, config.container_log_max_files) == (500 * 1024, 3)
    assert config.container_log_monitor_interval == 60
    options, _ = load_options(["--container-log-max-size", "-1", "--container-log-max-files", "2"])
    assert kubelet_config(options).container_log_max_size == -1  # rotation off


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--container-log-max-size", "big"],
            "invalid value 'big' for --container-log-max-size: expected a quantity",
        ),
        (
            ["--container-log-max-files", "1"],
            "invalid value '1' for --container-log-max-files: must be at least 2",
        ),
        (["--container-log-max-files", "many"], "for --container-log-max-files: expected an integer"),
    ],
)
def test_invalid_flags(flags: list[str], message: str) -> None:
    with pytest.raises(OptionsError, match=message):
        load_options(flags)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "containerLogMaxSize: 1000\n",
            "invalid value for containerLogMaxSize: 1000: expected a quantity string",
        ),
        ("containerLogMaxFiles: 1\n", "invalid value for containerLogMaxFiles: 1: must be at least 2"),
        (
            "containerLogMonitorInterval: 1s\n",
            "invalid value for containerLogMonitorInterval: '1s': must be at least 3s",
        ),
    ],
)
def test_invalid_keys(tmp_path: Path, body: str, message: str) -> None:
    file = tmp_path / "kubelet.yaml"
    file.write_text(HEADER + body)
    with pytest.raises(OptionsError, match=message):
        load_options(["--config", str(file)])


def test_the_monitor_interval_is_a_file_key_only() -> None:
    with pytest.raises(OptionsError, match=r"^unknown flag: --container-log-monitor-interval$"):
        load_options(["--container-log-monitor-interval", "5s"])
