"""Admission: the predicates alone, and rejections seen through the fake API server (MockClock)."""

from __future__ import annotations

from typing import Any

import attrs
import trio
import trio.testing

from kubelet_trio.api import Pod, default_pod
from kubelet_trio.apimode import ApiModeOptions
from kubelet_trio.clock import WallClock
from kubelet_trio.lifecycle.predicate import NodeView, PredicateAdmitHandler, pod_requests
from kubelet_trio.testing.fakeapi import open_fake_api
from tests.apiserver.harness import MACHINE, node_ready, open_api_node, pod_manifest
from tests.apiserver.pod_status import phase, running

NODE = NodeView(
    "node-1",
    {"cpu": "2", "memory": "1Gi", "ephemeral-storage": "10Gi", "pods": "3"},
    labels={"kubernetes.io/os": "linux", "disk": "ssd"},
    taints=({"key": "dedicated", "value": "x", "effect": "NoExecute"},),
)


def pod(name: str, *, cpu: str | None = None, memory: str | None = None, **spec: Any) -> Pod:
    resources: dict[str, Any] = {}
    if cpu or memory:
        resources["requests"] = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    tolerations = spec.pop("tolerations", [{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}])
    body = {
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {
            "nodeName": "node-1",
            "tolerations": tolerations,
            "containers": [{"name": "c", "image": "i", "resources": resources, **spec.pop("container", {})}],
            **spec,
        },
    }
    return default_pod(Pod.from_dict(body))


def test_requests_sum_containers_and_take_the_largest_init_container() -> None:
    p = default_pod(
        Pod.from_dict(
            {
                "spec": {
                    "containers": [
                        {"name": "a", "image": "i", "resources": {"requests": {"cpu": "100m"}}},
                        {
                            "name": "b",
                            "image": "i",
                            "resources": {"limits": {"cpu": "200m", "memory": "1Mi"}},
                        },
                    ],
                    "initContainers": [
                        {"name": "i", "image": "i", "resources": {"requests": {"cpu": "500m"}}}
                    ],
                }
            }
        )
    )
    assert pod_requests(p) == {"cpu": 500, "memory": 1024 * 1024}


def test_pod_requests_follow_a_changed_spec() -> None:
    """The requests are remembered per spec object: a pod whose spec is replaced gets the new spec's."""
    small = pod("a", cpu="100m")
    assert pod_requests(small) == {"cpu": 100}
    assert pod_requests(small) == {"cpu": 100}  # the remembered answer is the same
    bigger = pod("a", cpu="300m", memory="1Mi")
    assert pod_requests(bigger) == {"cpu": 300, "memory": 1024 * 1024}
    assert pod_requests(attrs.evolve(small, spec=bigger.spec)) == {"cpu": 300, "memory": 1024 * 1024}


def test_predicates_in_go_order() -> None:
    admit = PredicateAdmitHandler(lambda: NODE)
    running_pod = pod("big", cpu="1500m")
    assert admit(pod("ok", cpu="500m"), [running_pod]) is None
    cpu = admit(pod("cpu", cpu="600m"), [running_pod])
    assert cpu is not None and cpu.reason == "OutOfcpu"
    assert cpu.message == "Node didn't have enough resource: cpu, requested: 600, used: 1500, capacity: 2000"
    memory = admit(pod("mem", memory="2Gi"), [])
    assert memory is not None and memory.reason == "OutOfmemory"
    pods = admit(pod("many"), [pod("a"), pod("b"), pod("c")])
    assert pods is not None and pods.reason == "OutOfpods"
    assert pods.message == "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3"
    selector = admit(pod("sel", nodeSelector={"disk": "hdd"}), [])
    assert selector is not None and selector.reason == "NodeAffinity"
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}
                ]
            }
        }
    }
    assert admit(pod("aff", affinity=affinity), []) is None
    port = {"ports": [{"containerPort": 80, "hostPort": 8080}]}
    clash = admit(pod("p2", container=port), [pod("p1", container=port)])
    assert clash is not None and clash.reason == "NodePorts"
    taint = admit(pod("t", tolerations=[]), [])
    assert taint is not None and taint.reason == "TaintToleration"
    os_mismatch = admit(pod("w", nodeSelector={"kubernetes.io/os": "windows"}), [])
    assert os_mismatch is not None and os_mismatch.reason == "PodOSSelectorNodeLabelDoesNotMatch"
    # The first failure decides: too many pods and too much cpu -> OutOfpods.
    both = admit(pod("x", cpu="5"), [pod("a"), pod("b"), pod("c")])
    assert both is not None and both.reason == "OutOfpods"


async def test_rejected_pods_fail_in_creation_order(autojump_clock: trio.testing.MockClock) -> None:
    clock = WallClock()
    options = ApiModeOptions(machine=MACHINE, max_pods=2)  # 4 CPUs, 2 pods
    async with open_fake_api(now=clock.now) as api:
        cpu = {"resources": {"requests": {"cpu": "3"}}}
        for name in ("z-first", "a-second"):  # created in this order: names sort the other way
            manifest = pod_manifest(name, {"app": "run"})
            manifest["spec"]["containers"][0].update(cpu)
            api.create_pod(manifest)
            await trio.sleep(1)
        async with open_api_node(api, clock=clock, options=options) as node:
            with trio.fail_after(30):
                await api.wait_for(lambda: running(api, "z-first") and phase(api, "a-second") == "Failed")
            status = api.pod("a-second")["status"]
            assert status["reason"] == "OutOfcpu"
            assert status["message"] == (
                "Pod was rejected: Node didn't have enough resource: cpu, "
                "requested: 3000, used: 3000, capacity: 4000"
            )
            api.create_pod(pod_manifest("small-1", {"app": "run"}))
            api.create_pod(pod_manifest("small-2", {"app": "run"}))
            with trio.fail_after(30):
                await api.wait_for(lambda: running(api, "small-1") and phase(api, "small-2") == "Failed")
            assert api.pod("small-2")["status"]["reason"] == "OutOfpods"
            await trio.sleep(30)  # never retried, never started
            assert phase(api, "a-second") == "Failed" and phase(api, "small-2") == "Failed"
            started = {c.labels["io.kubernetes.pod.name"] for c in await node.sim.list_containers()}
            assert started == {"z-first", "small-1"}
            warnings = {e["reason"] for e in api.events("default") if e["type"] == "Warning"}
            assert {"OutOfcpu", "OutOfpods"} <= warnings
            # A rejected pod is terminal: deleting it removes it at once, and the kubelet forgets it.
            rejected_uid = api.pod("a-second")["metadata"]["uid"]
            assert rejected_uid in node.kubelet.rejected
            api.store.delete("pods", "default", "a-second")
            assert not api.has_pod("a-second")
            await trio.sleep(5)
            assert "a-second" not in {p.name for p in node.kubelet.pods()}
            assert not node.kubelet.rejected & {
                api_uid for api_uid in ["00000000-0000-4000-8000-000000000002"]
            }


async def test_admission_sees_node_labels_set_by_others(autojump_clock: trio.testing.MockClock) -> None:
    """The node informer: a label an admin adds to the Node (no status change of the kubelet's own)
    reaches admission before the next status report."""
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock) as node:
        with trio.fail_after(30):
            await api.wait_for(lambda: node_ready(api, "node-1"))
        await trio.sleep(1)
        api.store.patch("nodes", None, "node-1", {"metadata": {"labels": {"disk": "ssd"}}})
        await trio.sleep(1)
        assert node.mode.node_status.node.value["metadata"]["labels"]["disk"] == "ssd"  # type: ignore[index]
        api.create_pod(pod_manifest("fits", {"app": "run"}, nodeSelector={"disk": "ssd"}))
        api.create_pod(pod_manifest("misfit", {"app": "run"}, nodeSelector={"disk": "hdd"}))
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "fits") and phase(api, "misfit") == "Failed")
        assert api.pod("misfit")["status"]["reason"] == "NodeAffinity"
