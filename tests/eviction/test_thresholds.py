"""Threshold parsing (Go ``ParseThresholdConfig``), the threshold checks and the node's signals read from
/proc, cgroup v1 and v2 files and statvfs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kubelet_trio.api import Quantity
from kubelet_trio.eviction import (
    ALLOCATABLE_MEMORY_AVAILABLE,
    IMAGEFS_AVAILABLE,
    MEMORY_AVAILABLE,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
    PID_AVAILABLE,
    EvictionConfigError,
    Observation,
    Threshold,
    ThresholdValue,
    parse_thresholds,
)
from kubelet_trio.eviction.helpers import format_amount, node_conditions, thresholds_met
from kubelet_trio.eviction.signals import (
    allocatable_memory_observation,
    memory_observation,
    pid_observation,
    statvfs_observations,
)
from kubelet_trio.stats.cgroups import read_cgroup_usage

MI = 1 << 20


def test_hard_soft_grace_periods_and_minimum_reclaim() -> None:
    thresholds = parse_thresholds(
        {"memory.available": "100Mi", "nodefs.available": "10%"},
        {"memory.available": "300Mi"},
        {"memory.available": 90.0},
        {"memory.available": "50Mi", "nodefs.available": "5%"},
    )
    assert thresholds == (
        Threshold(MEMORY_AVAILABLE, ThresholdValue(Quantity("100Mi")), 0.0, ThresholdValue(Quantity("50Mi"))),
        Threshold(NODEFS_AVAILABLE, ThresholdValue(percentage=0.1), 0.0, ThresholdValue(percentage=0.05)),
        Threshold(
            MEMORY_AVAILABLE, ThresholdValue(Quantity("300Mi")), 90.0, ThresholdValue(Quantity("50Mi"))
        ),
    )
    assert [t.hard for t in thresholds] == [True, True, False]


def test_enforcing_allocatable_for_pods_copies_the_hard_memory_thresholds() -> None:
    args = ({"memory.available": "100Mi", "nodefs.available": "10%"}, {"memory.available": "300Mi"})
    soft = ({"memory.available": 90.0}, {"memory.available": "50Mi"})
    plain = parse_thresholds(*args, *soft)
    thresholds = parse_thresholds(*args, *soft, enforce_node_allocatable=True)
    assert thresholds[:3] == plain  # appended, as Go's addAllocatableThresholds does
    assert thresholds[3:] == (
        Threshold(
            ALLOCATABLE_MEMORY_AVAILABLE,
            ThresholdValue(Quantity("100Mi")),
            0.0,
            ThresholdValue(Quantity("50Mi")),
        ),
    )  # the hard one only, with its minimum reclaim
    assert parse_thresholds({"allocatableMemory.available": "1Gi"}) == (
        Threshold(ALLOCATABLE_MEMORY_AVAILABLE, ThresholdValue(Quantity("1Gi"))),
    )  # also a signal of its own, as in Go


def test_allocatable_memory_available_is_kubepods_limit_less_working_set(tmp_path: Path) -> None:
    kubepods = tmp_path / "cgroup/memory/kubepods"
    _write(kubepods / "memory.usage_in_bytes", f"{700 * MI}\n")
    _write(kubepods / "memory.stat", f"total_inactive_file {100 * MI}\n")
    _write(kubepods / "memory.limit_in_bytes", f"{1000 * MI}\n")
    usage = read_cgroup_usage({"memory": "/kubepods"}, root=str(tmp_path / "cgroup"))
    assert allocatable_memory_observation(usage, 3.0) == Observation(
        available=400 * MI, capacity=1000 * MI, time=3.0
    )
    _write(kubepods / "memory.usage_in_bytes", f"{1200 * MI}\n")  # over the limit: nothing left, as cAdvisor
    over = read_cgroup_usage({"memory": "/kubepods"}, root=str(tmp_path / "cgroup"))
    assert allocatable_memory_observation(over, 3.0) == Observation(available=0, capacity=1100 * MI, time=3.0)
    _write(kubepods / "memory.limit_in_bytes", "9223372036854771712\n")  # no limit: no signal
    unlimited = read_cgroup_usage({"memory": "/kubepods"}, root=str(tmp_path / "cgroup"))
    assert allocatable_memory_observation(unlimited, 3.0) is None


def test_zero_and_hundred_percent_are_ignored_as_in_go() -> None:
    assert parse_thresholds({"nodefs.available": "0%", "imagefs.available": "100%"}) == ()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (({"memory.free": "1Gi"},), "evictionHard: unsupported eviction signal 'memory.free'"),
        (({"memory.available": "lots"},), "evictionHard: memory.available: 'lots' is not a quantity"),
        (({"memory.available": "0"},), "evictionHard: memory.available: 0 must be positive"),
        (({"nodefs.available": "120%"},), "evictionHard: nodefs.available: percentage 120% must be within"),
        (
            ({}, {"memory.available": "1Gi"}),
            "evictionSoftGracePeriod: a grace period must be given for the soft",
        ),
        (
            ({}, {}, {"pid.available": -1.0}),
            "evictionSoftGracePeriod: pid.available: -1.0s must not be negative",
        ),
        (({}, {}, {}, {"nodefs.available": "0%"}), "evictionMinimumReclaim: nodefs.available: percentage 0%"),
    ],
)
def test_bad_settings_name_the_setting_and_signal(args: tuple[dict[str, str], ...], message: str) -> None:
    with pytest.raises(EvictionConfigError, match="^" + message.replace("(", r"\(")):
        parse_thresholds(*args)


def test_thresholds_met_by_quantity_percentage_and_minimum_reclaim() -> None:
    memory, nodefs = parse_thresholds(
        {"memory.available": "100Mi", "nodefs.available": "10%"}, {}, {}, {"memory.available": "50Mi"}
    )
    observed = {
        MEMORY_AVAILABLE: Observation(available=120 * MI, capacity=1024 * MI, time=0.0),
        NODEFS_AVAILABLE: Observation(available=99, capacity=1000, time=0.0),
    }
    assert thresholds_met([memory, nodefs], observed, enforce_min_reclaim=False) == [nodefs]
    # 120Mi available is above 100Mi but not above 100Mi + 50Mi of minimum reclaim
    assert thresholds_met([memory, nodefs], observed, enforce_min_reclaim=True) == [memory, nodefs]
    observed[NODEFS_AVAILABLE] = Observation(available=100, capacity=1000, time=0.0)  # exactly 10%: not below
    assert thresholds_met([nodefs], observed, enforce_min_reclaim=False) == []
    assert thresholds_met([memory], {}, enforce_min_reclaim=False) == []  # no observation: not met


def test_each_signal_raises_its_node_condition() -> None:
    thresholds = parse_thresholds(
        {s: "1" for s in (MEMORY_AVAILABLE, NODEFS_INODES_FREE, IMAGEFS_AVAILABLE, PID_AVAILABLE)}
    )
    assert node_conditions(thresholds) == ["MemoryPressure", "DiskPressure", "PIDPressure"]


def test_amounts_print_as_go_quantities() -> None:
    assert format_amount("memory", 100 * MI) == "100Mi"
    assert format_amount("memory", 100 * MI + 1) == str(100 * MI + 1)
    assert format_amount("ephemeral-storage", 1536 * 1024) == "1536Ki"
    assert format_amount("inodes", 5000) == "5k"
    assert format_amount("pids", 1234) == "1234"


# -- the host's signals -----------------------------------------------------------------------------------


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


MEMINFO = "MemTotal:        8000000 kB\nMemFree:         1000000 kB\nInactive(file):   500000 kB\n"


def test_memory_available_on_cgroup_v1_is_capacity_less_working_set(tmp_path: Path) -> None:
    _write(tmp_path / "proc/meminfo", MEMINFO)
    _write(tmp_path / "cgroup/memory/memory.usage_in_bytes", f"{6000 * MI}\n")
    _write(tmp_path / "cgroup/memory/memory.stat", f"cache 1\ntotal_inactive_file {1000 * MI}\n")
    observed = memory_observation(7.0, proc=str(tmp_path / "proc"), cgroup_root=str(tmp_path / "cgroup"))
    capacity = 8000000 * 1024
    assert observed == Observation(available=capacity - 5000 * MI, capacity=capacity, time=7.0)


def test_memory_available_on_cgroup_v2_uses_meminfo_for_the_root_usage(tmp_path: Path) -> None:
    _write(tmp_path / "proc/meminfo", MEMINFO)
    _write(tmp_path / "cgroup/cgroup.controllers", "memory pids\n")
    _write(tmp_path / "cgroup/memory.stat", "anon 5\ninactive_file 204800000\n")
    observed = memory_observation(1.0, proc=str(tmp_path / "proc"), cgroup_root=str(tmp_path / "cgroup"))
    capacity = 8000000 * 1024
    working_set = (8000000 - 1000000) * 1024 - 204800000
    assert observed == Observation(available=capacity - working_set, capacity=capacity, time=1.0)


def test_memory_available_without_memory_stat_takes_inactive_file_from_meminfo(tmp_path: Path) -> None:
    _write(tmp_path / "proc/meminfo", MEMINFO)
    (tmp_path / "cgroup").mkdir()
    observed = memory_observation(1.0, proc=str(tmp_path / "proc"), cgroup_root=str(tmp_path / "cgroup"))
    assert observed.available == 8000000 * 1024 - (7000000 - 500000) * 1024


def test_pid_available_is_the_task_limit_less_the_tasks(tmp_path: Path) -> None:
    _write(tmp_path / "sys/kernel/pid_max", "32768\n")
    _write(tmp_path / "sys/kernel/threads-max", "20000\n")
    _write(tmp_path / "loadavg", "0.10 0.20 0.30 2/345 6789\n")
    assert pid_observation(3.0, proc=str(tmp_path)) == Observation(
        available=20000 - 345, capacity=20000, time=3.0
    )


def test_nodefs_from_statvfs(tmp_path: Path) -> None:
    st = os.statvfs(tmp_path)
    space, inodes = statvfs_observations(str(tmp_path), 2.0)
    assert space.capacity == st.f_blocks * st.f_frsize and 0 < space.available <= space.capacity
    assert inodes.capacity == st.f_files and inodes.time == 2.0
