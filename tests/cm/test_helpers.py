"""Pod cgroup values as Go's ``ResourceConfigForPod`` computes them."""

from __future__ import annotations

from kubelet_trio.cm.helpers import (
    MIN_SHARES,
    ResourceConfig,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
    pod_requests_and_limits,
    resource_config_for_pod,
)
from tests.cm.fakes import MI, best_effort, burstable, guaranteed, pod


def test_shares_and_quota_conversions() -> None:
    assert milli_cpu_to_shares(0) == MIN_SHARES
    assert milli_cpu_to_shares(1) == MIN_SHARES
    assert milli_cpu_to_shares(100) == 102
    assert milli_cpu_to_shares(1000) == 1024
    assert milli_cpu_to_quota(0) == 0
    assert milli_cpu_to_quota(5) == 1000  # at least 1 ms
    assert milli_cpu_to_quota(250) == 25_000
    assert milli_cpu_to_quota(250, 50_000) == 12_500


def test_guaranteed_pod_gets_shares_quota_and_memory() -> None:
    assert resource_config_for_pod(guaranteed()) == ResourceConfig(
        cpu_shares=102, cpu_quota=10_000, cpu_period=100_000, memory=64 * MI, hugepage_limits={}
    )


def test_guaranteed_without_cfs_quota_is_unlimited() -> None:
    config = resource_config_for_pod(guaranteed(), enforce_cpu_limits=False)
    assert config.cpu_quota == -1
    assert config.memory == 64 * MI


def test_burstable_memory_limit_only_when_every_container_has_one() -> None:
    limited = {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m", "memory": "64Mi"}}
    unlimited = {"requests": {"cpu": "100m", "memory": "16Mi"}}
    partly = resource_config_for_pod(pod("partly", limited, unlimited))
    assert partly == ResourceConfig(cpu_shares=204, hugepage_limits={})
    both = resource_config_for_pod(pod("both", limited, limited))
    assert both == ResourceConfig(
        cpu_shares=204, cpu_quota=40_000, cpu_period=100_000, memory=128 * MI, hugepage_limits={}
    )


def test_burstable_without_limits_has_only_shares() -> None:
    assert resource_config_for_pod(burstable()) == ResourceConfig(cpu_shares=256, hugepage_limits={})


def test_best_effort_gets_minimum_shares() -> None:
    assert resource_config_for_pod(best_effort()) == ResourceConfig(cpu_shares=MIN_SHARES, hugepage_limits={})


def test_init_containers_raise_the_pod_to_their_maximum() -> None:
    app = {"requests": {"cpu": "100m", "memory": "10Mi"}}
    big_init = {"requests": {"cpu": "500m", "memory": "5Mi"}}
    requests, _ = pod_requests_and_limits(pod("p", app, app, init=(big_init,)))
    assert requests["cpu"].milli_value() == 500
    assert requests["memory"].int_value() == 20 * MI


def test_overhead_adds_to_requests_and_to_set_limits() -> None:
    both = {"cpu": "1", "memory": "64Mi"}
    with_overhead = pod("o", {"requests": both, "limits": both}, overhead={"cpu": "250m", "memory": "10Mi"})
    config = resource_config_for_pod(with_overhead)
    assert config.cpu_shares == 1280
    assert config.cpu_quota == 125_000
    assert config.memory == 74 * MI


def test_a_limit_without_request_counts_as_the_request() -> None:
    requests, limits = pod_requests_and_limits(pod("l", {"limits": {"cpu": "300m", "memory": "8Mi"}}))
    assert requests["cpu"].milli_value() == 300
    assert limits["memory"].int_value() == 8 * MI


def test_hugepages_requests_become_the_pod_limit() -> None:
    pages = {"cpu": "100m", "memory": "64Mi", "hugepages-2Mi": "4Mi"}
    config = resource_config_for_pod(pod("h", {"requests": pages, "limits": pages}))
    assert config.hugepage_limits == {2 * MI: 4 * MI}
