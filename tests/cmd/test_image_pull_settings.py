"""serializeImagePulls, maxParallelImagePulls, registryPullQPS, registryBurst: flags, keys, Go's
defaulting and validation texts, what the node gets and what /configz shows."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubelet_trio.cmd import kubelet as cmd
from kubelet_trio.configz import configz_body
from kubelet_trio.options import OptionsError, component_configs, load_options

HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def config_file(tmp_path: Path, body: str) -> str:
    path = tmp_path / "kubelet.yaml"
    path.write_text(HEADER + body)
    return str(path)


def test_gos_defaults_and_flags_reach_the_node() -> None:
    options, _ = load_options([])
    kubelet = component_configs(options).kubelet
    assert (kubelet.serialize_image_pulls, kubelet.max_parallel_image_pulls) == (True, None)
    assert (kubelet.registry_pull_qps, kubelet.registry_burst) == (5, 10)
    options, _ = load_options(["--serialize-image-pulls=false", "--registry-qps", "0", "--registry-burst=3"])
    kubelet = component_configs(options).kubelet
    assert (kubelet.serialize_image_pulls, kubelet.registry_pull_qps, kubelet.registry_burst) == (False, 0, 3)


def test_the_file_keys_and_gos_defaulting(tmp_path: Path) -> None:
    options, _ = load_options(["--config", config_file(tmp_path, "maxParallelImagePulls: 3\n")])
    # Go: serializeImagePulls left out defaults to false when maxParallelImagePulls is above 1
    assert (options.serialize_image_pulls, options.max_parallel_image_pulls) == (False, 3)
    assert "serialize_image_pulls" not in options.explicit
    options, _ = load_options(["--config", config_file(tmp_path, "maxParallelImagePulls: 1\n")])
    assert (options.serialize_image_pulls, options.max_parallel_image_pulls) == (True, 1)
    body = "serializeImagePulls: false\nregistryPullQPS: 0\nregistryBurst: 0\nmaxParallelImagePulls: null\n"
    options, _ = load_options(["--config", config_file(tmp_path, body)])
    # registryPullQPS 0 is "no limit"; registryBurst 0 is Go's "unset" (defaulted to 10)
    assert (options.serialize_image_pulls, options.registry_qps, options.registry_burst) == (False, 0, 10)
    assert options.max_parallel_image_pulls is None


@pytest.mark.parametrize(
    ("body", "flags", "message"),
    [
        (
            "maxParallelImagePulls: 0\n",
            [],
            "invalid configuration: maxParallelImagePulls 0 must be a positive number",
        ),
        (
            "maxParallelImagePulls: 3\nserializeImagePulls: true\n",
            [],
            "invalid configuration: maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls"
            " (--serialize-image-pulls) is set to false",
        ),
        (
            "maxParallelImagePulls: 3\n",
            ["--serialize-image-pulls"],  # the flag wins over the file's defaulting, and is refused
            "invalid configuration: maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls"
            " (--serialize-image-pulls) is set to false",
        ),
        (
            "registryPullQPS: -1\n",
            [],
            "invalid configuration: registryPullQPS (--registry-qps) -1 must not be a negative number",
        ),
        (
            "",
            ["--registry-burst=-2", "--registry-qps=-1"],
            "[invalid configuration: registryBurst (--registry-burst) -2 must not be a negative number,"
            " invalid configuration: registryPullQPS (--registry-qps) -1 must not be a negative number]",
        ),
        (
            "maxParallelImagePulls: two\n",
            [],
            "invalid value for maxParallelImagePulls: 'two': expected an integer",
        ),
    ],
)
def test_gos_validation_names_the_field(tmp_path: Path, body: str, flags: list[str], message: str) -> None:
    with pytest.raises(OptionsError) as caught:
        load_options(["--config", config_file(tmp_path, body), *flags])
    assert str(caught.value).endswith(message)


def test_the_cli_exits_2_with_gos_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "--runtime=sim",
        f"--pod-manifest-path={tmp_path}",
        "--config",
        config_file(tmp_path, "maxParallelImagePulls: 0\n"),
    ]
    assert cmd.main(argv) == 2
    assert capsys.readouterr().err == (
        "kubelet-trio: invalid configuration: maxParallelImagePulls 0 must be a positive number\n"
    )


def test_configz_shows_them_and_reads_back(tmp_path: Path) -> None:
    options, _ = load_options(["--registry-qps=2"])
    shown = configz_body(options)["kubeletconfig"]
    assert (shown["serializeImagePulls"], shown["registryPullQPS"], shown["registryBurst"]) == (True, 2, 10)
    assert "maxParallelImagePulls" not in shown  # unset, as Go omits a nil pointer
    options, _ = load_options(
        ["--config", config_file(tmp_path, "maxParallelImagePulls: 4\n"), "--registry-burst=7"]
    )
    shown = configz_body(options)["kubeletconfig"]
    assert (shown["serializeImagePulls"], shown["maxParallelImagePulls"], shown["registryBurst"]) == (
        False,
        4,
        7,
    )
    again, _ = load_options(["--config", config_file(tmp_path, yaml.safe_dump(shown))])
    assert (again.serialize_image_pulls, again.max_parallel_image_pulls, again.registry_burst) == (
        False,
        4,
        7,
    )
