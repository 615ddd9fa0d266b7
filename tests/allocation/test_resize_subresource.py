"""The fake API server's ``pods/<name>/resize`` answers, each as kube-apiserver 1.36 gave it to the same
request (tests/envtest/test_resize_containerd.py runs the node side against the real one)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubelet_trio.testing.fakeapi.store import FakeApiError, FakeStore

BURST = {"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"cpu": "200m", "memory": "64Mi"}}
WIDER = {"requests": {"cpu": "150m", "memory": "32Mi"}, "limits": {"cpu": "300m", "memory": "64Mi"}}


def store_with(*containers: str, node: dict[str, str] | None = None, **status: Any) -> FakeStore:
    """A store with node ``n1`` (allocatable ``node``, default 2 CPUs and 4Gi) and pod ``p`` bound to it,
    whose containers are Burstable busybox containers."""
    store = FakeStore()
    store.create("nodes", None, {"metadata": {"name": "n1"}})
    allocatable = node or {"cpu": "2", "memory": "4Gi"}
    store.patch(
        "nodes", None, "n1", {"status": {"allocatable": allocatable, "capacity": allocatable}}, "status"
    )
    spec = {
        "nodeName": "n1",
        "containers": [{"name": n, "image": "busybox", "resources": BURST} for n in containers],
    }
    store.create("pods", "default", {"metadata": {"name": "p"}, "spec": copy.deepcopy(spec)})
    if status:
        store.patch("pods", "default", "p", {"status": status}, "status")
    return store


def resize(store: FakeStore, patch: dict[str, Any], *, strategic: bool = True) -> dict[str, Any]:
    return store.patch("pods", "default", "p", patch, "resize", strategic=strategic)


def refusal(store: FakeStore, patch: dict[str, Any], *, strategic: bool = True) -> tuple[int, str]:
    with pytest.raises(FakeApiError) as caught:
        resize(store, patch, strategic=strategic)
    return caught.value.code, caught.value.message


def containers(**resources: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": n, "resources": r} for n, r in resources.items()]}}


def test_a_strategic_patch_merges_containers_by_name_and_their_resources() -> None:
    store = store_with("a", "b")
    pod = resize(store, containers(a=WIDER))
    assert pod["metadata"]["generation"] == 2
    assert [c["resources"] for c in pod["spec"]["containers"]] == [WIDER, BURST]
    # limits only: the requests stay; another field of the container is dropped, not refused
    patch = {
        "spec": {"containers": [{"name": "b", "image": "other", "resources": {"limits": {"cpu": "300m"}}}]}
    }
    pod = resize(store, patch)
    b = pod["spec"]["containers"][1]
    assert (b["image"], b["resources"]) == (
        "busybox",
        {"requests": BURST["requests"], "limits": {"cpu": "300m", "memory": "64Mi"}},
    )


def test_refusals_read_as_kube_apiserver_1_36_words_them() -> None:
    store = store_with("a", "b")
    assert refusal(store, containers(a=WIDER), strategic=False) == (
        422,
        'Pod "p" is invalid: spec.containers: Forbidden: containers may not be added or removed on resize',
    )
    policy = [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]
    assert refusal(store, {"spec": {"containers": [{"name": "a", "resizePolicy": policy}]}}) == (
        422,
        'Pod "p" is invalid: spec: Forbidden: only cpu and memory resources are mutable',
    )
    storage = {"requests": {**BURST["requests"], "ephemeral-storage": "1Gi"}, "limits": BURST["limits"]}
    assert refusal(store, containers(a=storage)) == (
        422,
        'Pod "p" is invalid: spec: Forbidden: only cpu and memory resources are mutable',
    )
    above = {"requests": {"cpu": "500m", "memory": "32Mi"}, "limits": BURST["limits"]}
    assert refusal(store, containers(a=above)) == (
        422,
        'Pod "p" is invalid: spec.containers[0].resources.requests: Invalid value: "500m": must be less than '
        "or equal to cpu limit of 200m",
    )
    limits_only = {
        "spec": {
            "containers": [
                {"name": "a", "resources": {"limits": {"cpu": "300m"}}},
                {"name": "b", "image": "busybox", "resources": BURST},
            ]
        }
    }
    assert refusal(store, limits_only, strategic=False) == (
        422,
        'Pod "p" is invalid: [spec.containers[0].resources.requests: Forbidden: resource requests cannot be '
        "removed, spec.containers[0].resources.limits: Forbidden: resource limits cannot be removed]",
    )


def test_the_qos_class_may_not_change_once_the_status_has_it() -> None:
    store = store_with("a", qosClass="Burstable", phase="Running")
    guaranteed = {"requests": BURST["limits"], "limits": BURST["limits"]}
    assert refusal(store, containers(a=guaranteed)) == (
        422,
        'Pod "p" is invalid: spec: Invalid value: "Burstable": Pod QOS Class may not change as a result of '
        "resizing",
    )


def test_a_terminal_pod_may_be_resized() -> None:
    store = store_with("a", phase="Succeeded")
    assert resize(store, containers(a=WIDER))["spec"]["containers"][0]["resources"] == WIDER


def test_the_admission_refuses_more_than_the_node_has_allocatable_or_a_missing_node() -> None:
    store = store_with("a", "b", node={"cpu": "2", "memory": "1Gi"})
    big = {"requests": {"cpu": "2", "memory": "1000Mi"}, "limits": {"cpu": "2", "memory": "1000Mi"}}
    assert refusal(store, containers(a=big)) == (
        403,
        'pods "p" is forbidden: node didn\'t have enough allocatable resources: cpu, requested: 2100, '
        "allocatable: 2000; memory, requested: 1082130432, allocatable: 1073741824",
    )
    fits = {"requests": {"cpu": "1900m", "memory": "32Mi"}, "limits": {"cpu": "2", "memory": "64Mi"}}
    assert resize(store, containers(a=fits))["metadata"]["generation"] == 2  # 2000m: exactly allocatable
    store.delete("nodes", None, "n1")
    assert resize(store, containers(a=fits))["metadata"]["generation"] == 2  # no change: not asked
    assert refusal(store, containers(a=BURST)) == (403, 'pods "p" is forbidden: node "n1" not found')
