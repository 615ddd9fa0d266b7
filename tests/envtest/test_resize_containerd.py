"""In-place pod resize by hand, automated: a real kube-apiserver 1.36, a private containerd and the
``kubelet-trio --kubeconfig`` daemon with pod cgroups under a cgroup root of its own (cgroupfs driver).

Through the API server's ``pods/<name>/resize`` subresource (a strategic merge patch, as
``kubectl patch --subresource resize`` sends it):

1. a Burstable pod's CPU limit is raised in place: the container's and the pod's ``cpu.cfs_quota_us``
   follow, ``restartCount`` stays 0, the status shows the new ``resources`` and ``allocatedResources``;
2. a memory resize of a container whose ``resizePolicy`` says ``RestartContainer`` restarts that container
   only, and its new cgroup has the new ``memory.limit_in_bytes``;
3. a resize beyond the node's allocatable is refused by the API server (403, its admission); one that
   fits the allocatable but not beside another pod is ``Deferred`` under ``PodResizePending``, then
   applied once that pod is deleted.

Needs the envtest binaries and the containerd tier (skipped otherwise; under ``CI=true`` the conftest
turns a skip into a failure).
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio
import trio_util

from kubelet_trio.apimode import open_kubeconfig_client
from kubelet_trio.client import ApiClient, Forbidden, NotFound
from kubelet_trio.testing.env import LocalCriEnvironment, private_cgroup_root, remove_all_pods
from kubelet_trio.testing.envtest import EnvtestCluster
from tests.cm.test_pod_cgroups_containerd import value

pytestmark = pytest.mark.containerd

NODE = "resize-node"
PODS = "/api/v1/namespaces/default/pods"
STRATEGIC = "application/strategic-merge-patch+json"
NODE_READY_TIMEOUT = 90.0
WAIT = 120.0  # seconds: each scenario's deadline (two shared cores, other runs beside)
MI = 1 << 20
SLEEP = ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
Pod = dict[str, Any]


@attrs.frozen
class Node:
    api: EnvtestCluster
    cri: LocalCriEnvironment
    cgroup_root: str
    log: Path
    seen: dict[str, Pod] = attrs.Factory(dict)  # the pods last seen by wait_pod, for failures

    def log_tail(self, chars: int = 6000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


def _node_ready(client: httpx.Client) -> bool:
    response = client.get(f"/api/v1/nodes/{NODE}")
    if response.status_code != 200:
        return False
    conditions = response.json().get("status", {}).get("conditions", ())
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


@pytest.fixture(scope="module")
def node(
    envtest: EnvtestCluster, cri_env: LocalCriEnvironment, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Node]:
    work = tmp_path_factory.mktemp("resize")
    log = work / "kubelet.log"
    with private_cgroup_root("kubelet-trio-resize") as cgroups:
        command = [
            sys.executable, "-m", "kubelet_trio",
            "--kubeconfig", str(envtest.kubeconfig),
            "--container-runtime-endpoint", cri_env.endpoint,
            "--hostname-override", NODE,
            "--root-dir", str(work / "root"),
            "--cgroup-root", cgroups,  # not the session's other daemons' /kubepods
            "--pod-logs-dir", str(work / "pods"),
            "--sync-frequency", "10s",
            "--healthz-port", "0", "--port", "0",
            "-v", "4",
        ]  # fmt: skip
        with log.open("wb") as out:  # the child keeps its own descriptor
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + NODE_READY_TIMEOUT
            with envtest.http_client() as client:
                while not _node_ready(client):
                    if proc.poll() is not None or time.monotonic() > deadline:
                        tail = log.read_text(errors="replace")[-4000:]
                        raise RuntimeError(f"node {NODE} did not become Ready (exit {proc.poll()}):\n{tail}")
                    time.sleep(0.25)
            yield Node(envtest, cri_env, cgroups, log)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            trio.run(remove_all_pods, cri_env.endpoint, NODE)


# -- helpers ----------------------------------------------------------------------------------------------


def container(name: str, image: str, resources: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": image, "command": SLEEP, "resources": resources, **fields}


def manifest(name: str, *containers: dict[str, Any]) -> Pod:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 1, "containers": list(containers)},
    }


async def resize(client: ApiClient, name: str, containers: dict[str, dict[str, Any]]) -> Pod:
    """``kubectl patch pod <name> --subresource resize --patch '{"spec":{"containers":[...]}}'``."""
    patch = {"spec": {"containers": [{"name": n, "resources": r} for n, r in containers.items()]}}
    result: Pod = await client.request("PATCH", f"{PODS}/{name}/resize", body=patch, content_type=STRATEGIC)
    return result


def status_of(pod: Pod, name: str) -> dict[str, Any]:
    return next(s for s in pod.get("status", {}).get("containerStatuses") or () if s["name"] == name)


def conditions(pod: Pod) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in pod.get("status", {}).get("conditions") or ()}


def running(*names: str) -> Callable[[Pod], bool]:
    def check(pod: Pod) -> bool:
        statuses = {s["name"]: s for s in pod.get("status", {}).get("containerStatuses") or ()}
        return pod.get("status", {}).get("phase") == "Running" and all(
            "running" in statuses.get(n, {}).get("state", {}) for n in names
        )

    return check


def settled(pod: Pod) -> bool:
    """The kubelet has seen the pod's latest generation and has no resize in progress or pending."""
    status = pod.get("status", {})
    return status.get("observedGeneration") == pod["metadata"]["generation"] and not (
        {"PodResizePending", "PodResizeInProgress"} & set(conditions(pod))
    )


async def wait_pod(client: ApiClient, node: Node, name: str, check: Callable[[Pod], bool]) -> Pod:
    """Poll the pod until ``check`` holds (the caller's deadline bounds it; :func:`scenario` reports the
    last pod seen)."""
    async with contextlib.aclosing(trio_util.periodic(0.25)) as ticks:
        async for _ in ticks:
            pod: Pod = await client.get(f"{PODS}/{name}")
            node.seen[name] = pod
            if check(pod):
                return pod
    raise AssertionError("unreachable")


@contextlib.contextmanager
def scenario(node: Node) -> Iterator[None]:
    """A scenario's absolute deadline; past it, the failure shows the pods last seen and the kubelet's log."""
    node.seen.clear()
    try:
        with trio.fail_after(WAIT):
            yield
    except trio.TooSlowError:
        raise AssertionError(f"not done in {WAIT}s; last seen {node.seen}\n{node.log_tail()}") from None


async def wait_gone(client: ApiClient, name: str) -> None:
    async with contextlib.aclosing(trio_util.periodic(0.25)) as ticks:
        async for _ in ticks:
            try:
                await client.get(f"{PODS}/{name}")
            except NotFound:
                return


async def wait_cgroup(node: Node, cgroup: str, hierarchy: str, filename: str, wanted: str) -> None:
    async with contextlib.aclosing(trio_util.periodic(0.1)) as ticks:
        async for _ in ticks:
            with contextlib.suppress(OSError):
                if value(cgroup, hierarchy, filename) == wanted:
                    return


async def wait_events(client: ApiClient, name: str, *reasons: str) -> dict[str, dict[str, Any]]:
    """The pod's events by reason, once each of ``reasons`` is among them (they are posted apart from the
    status)."""
    async with contextlib.aclosing(trio_util.periodic(0.25)) as ticks:
        async for _ in ticks:
            items = (await client.get("/api/v1/namespaces/default/events")).get("items") or ()
            events = {e["reason"]: e for e in items if e["involvedObject"].get("name") == name}
            if set(reasons) <= set(events):
                return events
    raise AssertionError("unreachable")


def pod_cgroup(node: Node, pod: Pod) -> str:
    tier = {"Guaranteed": "", "Burstable": "/burstable", "BestEffort": "/besteffort"}[
        pod["status"]["qosClass"]
    ]
    return f"{node.cgroup_root}/kubepods{tier}/pod{pod['metadata']['uid']}"


def container_cgroup(node: Node, pod: Pod, name: str) -> str:
    return f"{pod_cgroup(node, pod)}/{status_of(pod, name)['containerID'].split('//')[-1]}"


async def delete_and_wait(client: ApiClient, *names: str) -> None:
    for name in names:
        with contextlib.suppress(NotFound):
            await client.delete(f"{PODS}/{name}", grace_period_seconds=1)
    for name in names:
        await wait_gone(client, name)


# -- scenarios --------------------------------------------------------------------------------------------


async def test_cpu_limit_resized_in_place(node: Node) -> None:
    image = node.cri.images.busybox
    before = {"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"cpu": "200m", "memory": "64Mi"}}
    after = {"requests": {"cpu": "200m", "memory": "32Mi"}, "limits": {"cpu": "400m", "memory": "64Mi"}}
    async with open_kubeconfig_client(str(node.api.kubeconfig)) as client:
        try:
            with scenario(node):
                await client.create(PODS, manifest("cpu", container("app", image, before)))
                pod = await wait_pod(client, node, "cpu", running("app"))
                assert pod["status"]["qosClass"] == "Burstable"
                app = status_of(pod, "app")
                assert app["allocatedResources"] == {"cpu": "100m", "memory": "32Mi"}
                assert app["resources"] == before
                cgroup, parent = container_cgroup(node, pod, "app"), pod_cgroup(node, pod)
                assert value(cgroup, "cpu", "cpu.cfs_quota_us") == "20000"
                assert value(parent, "cpu", "cpu.cfs_quota_us") == "20000"

                resized = await resize(client, "cpu", {"app": after})
                assert resized["metadata"]["generation"] == 2
                assert resized["spec"]["containers"][0]["resources"] == after
                await wait_cgroup(node, cgroup, "cpu", "cpu.cfs_quota_us", "40000")
                pod = await wait_pod(
                    client, node, "cpu", lambda p: settled(p) and status_of(p, "app")["resources"] == after
                )
                events = await wait_events(client, "cpu", "ResizeStarted", "ResizeCompleted")
            summary = (
                '{"containers":[{"name":"app","resources":{"limits":{"cpu":"400m","memory":"64Mi"},'
                '"requests":{"cpu":"200m","memory":"32Mi"}}}],"generation":2}'
            )
            assert events["ResizeStarted"]["message"] == f"Pod resize started: {summary}"
            assert events["ResizeCompleted"]["message"] == f"Pod resize completed: {summary}"
            assert value(cgroup, "cpu", "cpu.cfs_quota_us") == "40000"
            assert value(parent, "cpu", "cpu.cfs_quota_us") == "40000"
            assert value(cgroup, "cpu", "cpu.shares") == "204"
            resized_app = status_of(pod, "app")
            assert resized_app["restartCount"] == 0
            assert resized_app["containerID"] == app["containerID"]
            assert resized_app["allocatedResources"] == {"cpu": "200m", "memory": "32Mi"}
            assert pod["status"]["observedGeneration"] == 2
        finally:
            with trio.move_on_after(60, shield=True):
                await delete_and_wait(client, "cpu")


async def test_memory_resize_restarts_only_the_container_that_asks(node: Node) -> None:
    image = node.cri.images.busybox
    small = {"requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}}
    big = {"requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}}
    policy = [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]
    async with open_kubeconfig_client(str(node.api.kubeconfig)) as client:
        try:
            with scenario(node):
                await client.create(
                    PODS,
                    manifest(
                        "mem",
                        container("app", image, small, resizePolicy=policy),
                        container("side", image, small),
                    ),
                )
                pod = await wait_pod(client, node, "mem", running("app", "side"))
                first = {n: status_of(pod, n)["containerID"] for n in ("app", "side")}
                parent = pod_cgroup(node, pod)
                assert value(container_cgroup(node, pod, "app"), "memory", "memory.limit_in_bytes") == str(
                    64 * MI
                )
                assert value(parent, "memory", "memory.limit_in_bytes") == str(128 * MI)

                await resize(client, "mem", {"app": big})
                pod = await wait_pod(
                    client,
                    node,
                    "mem",
                    lambda p: (
                        settled(p)
                        and running("app", "side")(p)
                        and status_of(p, "app")["resources"]["limits"] == {"memory": "128Mi"}
                    ),
                )
            app, side = status_of(pod, "app"), status_of(pod, "side")
            assert app["restartCount"] == 1 and app["containerID"] != first["app"]
            assert side["restartCount"] == 0 and side["containerID"] == first["side"]
            assert app["allocatedResources"] == {"cpu": "50m", "memory": "32Mi"}
            assert side["resources"]["limits"] == {"memory": "64Mi"}
            assert value(container_cgroup(node, pod, "app"), "memory", "memory.limit_in_bytes") == str(
                128 * MI
            )
            assert value(container_cgroup(node, pod, "side"), "memory", "memory.limit_in_bytes") == str(
                64 * MI
            )
            assert value(parent, "memory", "memory.limit_in_bytes") == str(192 * MI)
        finally:
            with trio.move_on_after(60, shield=True):
                await delete_and_wait(client, "mem")


async def test_a_resize_that_does_not_fit_now_is_deferred_until_room_frees_up(node: Node) -> None:
    image = node.cri.images.busybox
    async with open_kubeconfig_client(str(node.api.kubeconfig)) as client:
        allocatable = (await client.get(f"/api/v1/nodes/{NODE}"))["status"]["allocatable"]["cpu"]
        capacity = int(allocatable) * 1000 if allocatable.isdigit() else int(allocatable.removesuffix("m"))
        hog = capacity - 600  # millicores: grow's 100m fits beside it, grow's 1000m does not
        try:
            with scenario(node):
                await client.create(
                    PODS, manifest("grow", container("app", image, {"requests": {"cpu": "100m"}}))
                )
                await client.create(
                    PODS, manifest("hog", container("app", image, {"requests": {"cpu": f"{hog}m"}}))
                )
                pod = await wait_pod(client, node, "grow", running("app"))
                await wait_pod(client, node, "hog", running("app"))
                cgroup = container_cgroup(node, pod, "app")
                first = status_of(pod, "app")["containerID"]
                assert value(cgroup, "cpu", "cpu.shares") == "102"

                # beyond the node's allocatable: the API server refuses it (admission), the kubelet never
                # sees it
                with pytest.raises(Forbidden) as refused:
                    await resize(client, "grow", {"app": {"requests": {"cpu": f"{capacity + 1000}m"}}})
                assert refused.value.message == (
                    'pods "grow" is forbidden: node didn\'t have enough allocatable resources: cpu, '
                    f"requested: {capacity + 1000}, allocatable: {capacity}"
                )
                await resize(client, "grow", {"app": {"requests": {"cpu": "1"}}})
                pod = await wait_pod(client, node, "grow", lambda p: "PodResizePending" in conditions(p))
                pending = conditions(pod)["PodResizePending"]
                assert (pending["status"], pending["reason"]) == ("True", "Deferred")
                assert pending["message"] == (
                    "Node didn't have enough resource: cpu, requested: 1000, "
                    f"used: {hog}, capacity: {capacity}"
                )
                assert pending["observedGeneration"] == 2
                assert status_of(pod, "app")["allocatedResources"] == {"cpu": "100m"}
                assert value(cgroup, "cpu", "cpu.shares") == "102"
                deferred = (await wait_events(client, "grow", "ResizeDeferred"))["ResizeDeferred"]
                assert deferred["type"] == "Warning"
                assert deferred["message"] == (
                    'Pod resize Deferred: {"containers":[{"name":"app","resources":{"requests":'
                    '{"cpu":"1"}}}],'
                    f'"generation":2,"error":"{pending["message"]}"}}'
                )

                await delete_and_wait(client, "hog")
                await wait_cgroup(node, cgroup, "cpu", "cpu.shares", "1024")
                pod = await wait_pod(
                    client,
                    node,
                    "grow",
                    lambda p: settled(p) and status_of(p, "app").get("allocatedResources") == {"cpu": "1"},
                )
            app = status_of(pod, "app")
            assert app["restartCount"] == 0 and app["containerID"] == first
            assert app["resources"] == {"requests": {"cpu": "1"}}
            assert value(cgroup, "cpu", "cpu.shares") == "1024"
        finally:
            with trio.move_on_after(60, shield=True):
                await delete_and_wait(client, "grow", "hog")
