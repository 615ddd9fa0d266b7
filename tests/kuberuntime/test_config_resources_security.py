"""CRI resources (shares, quota, memory, OOM score by QoS) and security context (Go: helpers_linux_test.go,
qos/policy_test.go, security_context_test.go, kuberuntime_container_linux_test.go)."""

from __future__ import annotations

from typing import Any

import pytest

from kubelet_trio.api import Container, Pod, default_pod
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.kuberuntime.container import RunContainerOptions, generate_container_config
from kubelet_trio.kuberuntime.resources import (
    container_oom_score_adj,
    linux_container_resources,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
)
from kubelet_trio.kuberuntime.security import (
    DEFAULT_MASKED_PATHS,
    ImageUser,
    SecurityContextError,
    linux_container_security_context,
    verify_run_as_non_root,
)

GI = 2**30


def pod(containers: list[dict[str, Any]], **spec: Any) -> Pod:
    return default_pod(
        Pod.from_dict(
            {
                "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
                "spec": {"containers": containers, **spec},
            }
        )
    )


def first(p: Pod) -> Container:
    assert p.spec is not None and p.spec.containers
    return p.spec.containers[0]


def app(**resources: Any) -> dict[str, Any]:
    return {"name": "app", "image": "busybox", "resources": resources}


@pytest.mark.parametrize(
    ("milli", "shares"), [(0, 2), (1, 2), (2, 2), (250, 256), (1000, 1024), (1500, 1536), (300_000, 262144)]
)
def test_milli_cpu_to_shares(milli: int, shares: int) -> None:
    assert milli_cpu_to_shares(milli) == shares


@pytest.mark.parametrize(
    ("milli", "quota"), [(0, 0), (5, 1000), (9, 1000), (10, 1000), (200, 20000), (1500, 150000)]
)
def test_milli_cpu_to_quota(milli: int, quota: int) -> None:
    assert milli_cpu_to_quota(milli) == quota


def test_linux_resources_from_requests_and_limits() -> None:
    p = pod([app(requests={"cpu": "250m", "memory": "64Mi"}, limits={"cpu": "500m", "memory": "128Mi"})])
    resources = linux_container_resources(p, first(p), memory_capacity=4 * GI)
    assert resources.cpu_shares == 256
    assert (resources.cpu_period, resources.cpu_quota) == (100_000, 50_000)
    assert resources.memory_limit_in_bytes == 128 * 2**20
    assert resources.oom_score_adj == 1000 - (1000 * 64 * 2**20) // (4 * GI)  # Burstable: 985


def test_limit_only_sets_shares_from_the_limit() -> None:
    p = Pod.from_dict(
        {"metadata": {"name": "p"}, "spec": {"containers": [app(limits={"cpu": "2"})]}}
    )  # undefaulted
    resources = linux_container_resources(p, first(p), memory_capacity=GI)
    assert resources.cpu_shares == 2048 and resources.cpu_quota == 200_000
    assert resources.memory_limit_in_bytes == 0


def test_best_effort_and_guaranteed_oom_scores() -> None:
    best = pod([app()])
    assert container_oom_score_adj(best, first(best), GI) == 1000
    assert linux_container_resources(best, first(best), GI).cpu_shares == 2
    guaranteed = pod([app(limits={"cpu": "1", "memory": "1Gi"})])
    assert container_oom_score_adj(guaranteed, first(guaranteed), 4 * GI) == -997
    huge = pod([app(requests={"memory": "4Gi"}, limits={"memory": "8Gi"})])
    assert container_oom_score_adj(huge, first(huge), 4 * GI) == 3  # at least 1000 - 997
    tiny = pod([app(requests={"cpu": "1m"})])
    assert container_oom_score_adj(tiny, first(tiny), 4 * GI) == 999  # never equal to best effort
    critical = pod(
        [app(requests={"cpu": "1m"})], priorityClassName="system-node-critical", priority=2_000_001_000
    )
    assert container_oom_score_adj(critical, first(critical), 4 * GI) == -997


def test_security_context_merges_pod_and_container() -> None:
    p = pod(
        [
            {
                "name": "app",
                "image": "busybox",
                "securityContext": {
                    "runAsUser": 1000,
                    "readOnlyRootFilesystem": True,
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]},
                },
            }
        ],
        securityContext={
            "runAsUser": 5,
            "runAsGroup": 3000,
            "fsGroup": 2000,
            "supplementalGroups": [4000, 5000],
        },
    )
    sc = linux_container_security_context(p, first(p), ImageUser(uid=0))
    assert sc.run_as_user == pb.Int64Value(value=1000)  # the container's wins
    assert sc.run_as_group == pb.Int64Value(value=3000)  # the pod's fills in
    assert sc.supplemental_groups == [2000, 4000, 5000]  # fsGroup first
    assert sc.readonly_rootfs and sc.no_new_privs and not sc.privileged
    assert sc.capabilities == pb.Capability(add_capabilities=["NET_ADMIN"], drop_capabilities=["ALL"])
    assert sc.masked_paths == list(DEFAULT_MASKED_PATHS)
    assert sc.namespace_options is not None


def test_image_user_applies_without_run_as_user() -> None:
    p = pod([{"name": "app", "image": "busybox"}])
    assert linux_container_security_context(p, first(p), ImageUser(uid=1234)).run_as_user == pb.Int64Value(
        value=1234
    )
    named = linux_container_security_context(p, first(p), ImageUser(uid=None, username="www"))
    assert named.run_as_user is None and named.run_as_username == "www"
    privileged = pod([{"name": "app", "image": "busybox", "securityContext": {"privileged": True}}])
    assert linux_container_security_context(privileged, first(privileged)).privileged


def test_run_as_non_root() -> None:
    nonroot = pod([{"name": "app", "image": "busybox"}], securityContext={"runAsNonRoot": True})
    with pytest.raises(SecurityContextError, match="container has runAsNonRoot and image will run as root"):
        verify_run_as_non_root(nonroot, first(nonroot), ImageUser.from_image(pb.Image(id="x")))
    with pytest.raises(SecurityContextError, match="non-numeric user \\(www\\)"):
        verify_run_as_non_root(nonroot, first(nonroot), ImageUser(uid=None, username="www"))
    verify_run_as_non_root(nonroot, first(nonroot), ImageUser(uid=1000))
    root_user = pod(
        [{"name": "app", "image": "busybox", "securityContext": {"runAsUser": 0}}],
        securityContext={"runAsNonRoot": True},
    )
    with pytest.raises(SecurityContextError, match="runAsUser breaks non-root policy"):
        verify_run_as_non_root(root_user, first(root_user), ImageUser(uid=1000))
    user = pod(
        [{"name": "app", "image": "busybox", "securityContext": {"runAsUser": 7, "runAsNonRoot": True}}]
    )
    verify_run_as_non_root(user, first(user), ImageUser(uid=0))  # runAsUser decides
    assert ImageUser.from_image(pb.Image(id="x", uid=pb.Int64Value(value=42))) == ImageUser(uid=42)


def test_container_config_carries_options() -> None:
    p = pod([app(limits={"memory": "1Gi"})])
    options = RunContainerOptions(
        envs=(("A", "1"),),
        mounts=(pb.Mount(container_path="/data", host_path="/tmp/x"),),
        command=("sh",),
        args=("-c", "true"),
        linux_resources=pb.LinuxContainerResources(memory_limit_in_bytes=GI, oom_score_adj=-997),
    )
    config = generate_container_config(p, first(p), 0, image_ref="sha256:x", options=options)
    assert config.envs == [pb.KeyValue(key="A", value="1")]
    assert [m.container_path for m in config.mounts] == ["/data"]
    assert (config.command, config.args) == (["sh"], ["-c", "true"])
    assert config.linux is not None and config.linux.resources.memory_limit_in_bytes == GI
