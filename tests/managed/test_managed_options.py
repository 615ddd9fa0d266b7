"""The managed runtime's settings: ``--container-runtime managed`` and its pod subnet ``--pod-cidr``."""

from __future__ import annotations

import pytest

from kubelet_trio.options import OptionsError, component_configs, load_options


def test_managed_runtime_and_its_subnet_parse() -> None:
    options, _ = load_options(["--container-runtime", "managed", "--pod-cidr", "198.18.7.0/24"])
    assert component_configs(options).container_runtime == "managed"
    assert options.pod_cidr == "198.18.7.0/24"
    assert load_options([])[0].pod_cidr == ""  # a free /24 of 198.18.0.0/15 is chosen


@pytest.mark.parametrize("value", ["198.18.7.1/33", "fd00::/64", "198.18.7.0/31", "bridge"])
def test_a_bad_pod_cidr_is_named(value: str) -> None:
    with pytest.raises(OptionsError, match=r"--pod-cidr"):
        load_options(["--pod-cidr", value])
