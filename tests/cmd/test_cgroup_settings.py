"""The pod cgroup settings: what the daemon's node gets from them, and Go's checks of their
combinations with Go's texts."""

from __future__ import annotations

import pytest

from kubelet_trio.cm.container_manager import NodeConfig
from kubelet_trio.options import OptionsError, component_configs, load_options


def cgroups(*flags: str) -> NodeConfig | None:
    options, _ = load_options(list(flags))
    return component_configs(options).kubelet.cgroups


def test_the_daemon_on_a_real_runtime_makes_pod_cgroups_by_default() -> None:
    assert cgroups() == NodeConfig(cgroup_root="/")
    assert cgroups(
        "--cgroup-root=/nodes/a",
        "--cgroup-driver=systemd",
        "--pod-max-pids=64",
        "--cpu-cfs-quota=false",
        "--cpu-cfs-quota-period=50ms",
        "--kube-reserved=cpu=100m,memory=256Mi",
    ) == NodeConfig(
        cgroup_root="/nodes/a",
        cgroup_driver="systemd",
        pod_pids_limit=64,
        cpu_cfs_quota=False,
        cpu_cfs_quota_period=50_000,
        kube_reserved={"cpu": "100m", "memory": "256Mi"},
    )


def test_off_when_asked_and_on_the_simulated_runtime() -> None:
    assert cgroups("--cgroups-per-qos=false", "--enforce-node-allocatable=") is None
    assert cgroups("--runtime", "sim") is None  # its containers are no processes


def test_the_node_config_takes_the_enforcement_levels() -> None:
    config = cgroups("--enforce-node-allocatable=none")
    assert config is not None and config.enforce_node_allocatable == frozenset({"none"})


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--cgroups-per-qos=false"],
            "invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) is not supported"
            " unless cgroupsPerQOS (--cgroups-per-qos) is set to true",
        ),
        (
            ["--enforce-node-allocatable=pods,kube-reserved"],
            "invalid configuration: kubeReservedCgroup (--kube-reserved-cgroup) must be specified when"
            ' "kube-reserved" contained in enforceNodeAllocatable (--enforce-node-allocatable)',
        ),
        (
            ["--enforce-node-allocatable=system-reserved"],
            "invalid configuration: systemReservedCgroup (--system-reserved-cgroup) must be specified when"
            ' "system-reserved" contained in enforceNodeAllocatable (--enforce-node-allocatable)',
        ),
        (
            ["--enforce-node-allocatable=pods,none"],
            "invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) may not contain"
            ' additional enforcements when "none" is specified',
        ),
        (
            ["--enforce-node-allocatable=cpus"],
            'invalid configuration: option "cpus" specified for enforceNodeAllocatable'
            ' (--enforce-node-allocatable). Valid options are "pods", "system-reserved", "kube-reserved",'
            ' or "none"',
        ),
        (
            ["--oom-score-adj=-1001"],
            "invalid configuration: oomScoreAdj (--oom-score-adj) -1001 must be between -1000 and 1000,"
            " inclusive",
        ),
        (
            ["--cpu-cfs-quota-period=2s"],
            "invalid configuration: cpuCFSQuotaPeriod (--cpu-cfs-quota-period) 2s must be between 1usec"
            " and 1sec, inclusive",
        ),
    ],
)
def test_gos_checks_of_the_combinations(flags: list[str], message: str) -> None:
    with pytest.raises(OptionsError) as caught:
        load_options(flags)
    assert str(caught.value) == message


def test_a_reserved_cgroup_given_satisfies_its_enforcement_level() -> None:
    options, warnings = load_options(
        ["--enforce-node-allocatable=pods,kube-reserved", "--kube-reserved-cgroup=/kube.slice"]
    )
    assert options.enforce_node_allocatable == ("pods", "kube-reserved")
    assert warnings == []  # the reserved cgroup is limited: nothing to warn about
    config = component_configs(options).kubelet.cgroups
    assert config is not None
    assert (config.kube_reserved_cgroup, config.system_reserved_cgroup) == ("/kube.slice", "")
