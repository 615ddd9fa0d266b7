"""The eviction settings from the configuration file and from flags, into the node's configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelet_trio.options import OptionsError, component_configs, load_options

HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def test_file_settings_reach_the_kubelet_config(tmp_path: Path) -> None:
    config = tmp_path / "kubelet.yaml"
    config.write_text(
        HEADER
        + "evictionHard: {memory.available: 200Mi, pid.available: 10%}\n"
        + "evictionSoft: {memory.available: 1Gi, nodefs.available: 15%}\n"
        + "evictionSoftGracePeriod: {memory.available: 1m30s, nodefs.available: 2m}\n"
        + "evictionMinimumReclaim: {memory.available: 0Mi, nodefs.available: 500Mi}\n"
        + "evictionPressureTransitionPeriod: 30s\n"
        + "evictionMaxPodGracePeriod: 60\n"
    )
    options, warnings = load_options(["--config", str(config)])
    assert warnings == []
    kubelet = component_configs(options).kubelet
    assert kubelet.eviction_hard == {"memory.available": "200Mi", "pid.available": "10%"}
    assert kubelet.eviction_soft == {"memory.available": "1Gi", "nodefs.available": "15%"}
    assert kubelet.eviction_soft_grace_period == {"memory.available": 90.0, "nodefs.available": 120.0}
    assert kubelet.eviction_minimum_reclaim == {"memory.available": "0Mi", "nodefs.available": "500Mi"}
    assert (kubelet.eviction_pressure_transition_period, kubelet.eviction_max_pod_grace_period) == (30.0, 60)


def test_flags_take_gos_forms() -> None:
    options, _ = load_options(
        [
            "--eviction-soft=memory.available<1.5Gi,imagefs.available<20%",
            "--eviction-soft-grace-period=memory.available=1m,imagefs.available=90",
            "--eviction-minimum-reclaim=imagefs.available=2Gi",
        ]
    )
    assert options.eviction_soft == {"memory.available": "1.5Gi", "imagefs.available": "20%"}
    assert options.eviction_soft_grace_period == {"memory.available": 60.0, "imagefs.available": 90.0}
    assert options.eviction_minimum_reclaim == {"imagefs.available": "2Gi"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--eviction-soft=memory.available<1Gi"],
            "invalid eviction settings: evictionSoftGracePeriod: a grace period must be given for the soft"
            " threshold memory.available",
        ),
        (["--eviction-soft-grace-period=memory.free=1m"], "unknown eviction signal 'memory.free'"),
        (
            ["--eviction-soft-grace-period=memory.available=soon"],
            "memory.available: 'soon' is not a duration",
        ),
        (["--eviction-minimum-reclaim=nodefs.available=-1Gi"], "is not a quantity or a percentage"),
    ],
)
def test_bad_eviction_settings_are_option_errors(argv: list[str], message: str) -> None:
    with pytest.raises(OptionsError, match=message.replace("(", r"\(")):
        load_options(argv)
