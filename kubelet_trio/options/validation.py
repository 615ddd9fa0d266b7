"""Checks across settings, once every setting has its value (Go:
``pkg/kubelet/apis/config/validation``): the error names the settings, in Go's words where Go has them.

Several errors are reported together as Go's ``utilerrors.NewAggregate`` prints them (``[a, b]``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio import defaults
from kubelet_trio.clock import go_duration
from kubelet_trio.cm.node_container_manager import ENFORCEMENT_KEYS
from kubelet_trio.eviction import EvictionConfigError, parse_thresholds
from kubelet_trio.options.errors import OptionsError

if TYPE_CHECKING:
    from kubelet_trio.options.settings import KubeletOptions

__all__ = ["cgroup_errors", "image_pull_errors", "validate"]


def image_pull_errors(options: KubeletOptions) -> list[str]:
    """Go's checks of ``registryPullQPS``, ``registryBurst``, ``maxParallelImagePulls`` and
    ``serializeImagePulls``, with Go's texts."""
    errors = []
    if options.registry_burst < 0:
        errors.append(
            f"invalid configuration: registryBurst (--registry-burst) {options.registry_burst} must not be"
            " a negative number"
        )
    if options.registry_qps < 0:
        errors.append(
            f"invalid configuration: registryPullQPS (--registry-qps) {options.registry_qps} must not be a"
            " negative number"
        )
    max_parallel = options.max_parallel_image_pulls
    if max_parallel is not None and max_parallel < 1:
        errors.append(
            f"invalid configuration: maxParallelImagePulls {max_parallel} must be a positive number"
        )
    if options.serialize_image_pulls and max_parallel is not None and max_parallel > 1:
        errors.append(
            "invalid configuration: maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls"
            " (--serialize-image-pulls) is set to false"
        )
    return errors


#: enforceNodeAllocatable's values (Go: ``kubetypes.NodeAllocatableEnforcementKey`` and the others)
PODS, SYSTEM_RESERVED, KUBE_RESERVED, NONE = ENFORCEMENT_KEYS


def cgroup_errors(options: KubeletOptions) -> list[str]:
    """Go's checks of ``cgroupsPerQOS``, ``enforceNodeAllocatable`` (with the reserved cgroups it
    names), ``cpuCFSQuotaPeriod`` and ``oomScoreAdj``, with Go's texts."""
    errors = []
    enforce = options.enforce_node_allocatable
    if not options.cgroups_per_qos and enforce:
        errors.append(
            "invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) is not supported"
            " unless cgroupsPerQOS (--cgroups-per-qos) is set to true"
        )
    period = options.cpu_cfs_quota_period
    if period != defaults.CPU_CFS_QUOTA_PERIOD and not 1e-6 <= period <= 1.0:
        errors.append(
            f"invalid configuration: cpuCFSQuotaPeriod (--cpu-cfs-quota-period) {go_duration(period)}"
            " must be between 1usec and 1sec, inclusive"
        )
    if not -1000 <= options.oom_score_adj <= 1000:
        errors.append(
            f"invalid configuration: oomScoreAdj (--oom-score-adj) {options.oom_score_adj} must be between"
            " -1000 and 1000, inclusive"
        )
    for value in enforce:
        if value == PODS:
            continue
        if value == SYSTEM_RESERVED and not options.system_reserved_cgroup:
            errors.append(
                "invalid configuration: systemReservedCgroup (--system-reserved-cgroup) must be specified"
                f' when "{SYSTEM_RESERVED}" contained in enforceNodeAllocatable (--enforce-node-allocatable)'
            )
        elif value == KUBE_RESERVED and not options.kube_reserved_cgroup:
            errors.append(
                "invalid configuration: kubeReservedCgroup (--kube-reserved-cgroup) must be specified"
                f' when "{KUBE_RESERVED}" contained in enforceNodeAllocatable (--enforce-node-allocatable)'
            )
        elif value == NONE and len(enforce) > 1:
            errors.append(
                "invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) may not contain"
                f' additional enforcements when "{NONE}" is specified'
            )
        elif value not in (SYSTEM_RESERVED, KUBE_RESERVED, NONE):
            errors.append(
                f'invalid configuration: option "{value}" specified for enforceNodeAllocatable'
                f' (--enforce-node-allocatable). Valid options are "{PODS}", "{SYSTEM_RESERVED}",'
                f' "{KUBE_RESERVED}", or "{NONE}"'
            )
    return errors


def validate(options: KubeletOptions) -> None:
    """Raise :class:`OptionsError` naming what is wrong across ``options``."""
    errors = []
    try:  # the soft thresholds and their grace periods go together
        parse_thresholds(
            options.eviction_hard,
            options.eviction_soft,
            options.eviction_soft_grace_period,
            options.eviction_minimum_reclaim,
        )
    except EvictionConfigError as err:
        errors.append(f"invalid eviction settings: {err}")
    if options.image_gc_low_threshold > options.image_gc_high_threshold:
        errors.append(
            f"invalid value {options.image_gc_low_threshold} for imageGCLowThresholdPercent: must not be"
            f" greater than imageGCHighThresholdPercent ({options.image_gc_high_threshold})"
        )
    errors += image_pull_errors(options)
    errors += cgroup_errors(options)
    if errors:
        raise OptionsError(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
