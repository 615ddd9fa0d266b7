"""Pod lifecycle through a real kube-apiserver (upstream test/e2e/common/node/pods.go): every status field
the kubelet owns, label and annotation updates, graceful deletion, delete-collection and
activeDeadlineSeconds. The cases of one test run concurrently (see conftest.py)."""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

import trio
import trio_util

from tests.conformance._helpers_f import written_log
from tests.conformance.conftest import (
    Namespace,
    after,
    both,
    container_running,
    container_status,
    container_terminated,
    phase_is,
)

# busybox `sh` as PID 1 ignores SIGTERM unless it traps it
SERVE = "trap 'echo got TERM; exit 0' TERM; echo started; while true; do sleep 1; done"
T = TypeVar("T")
DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"


async def poll_until(deadline: float, read: Callable[[], Awaitable[T]], done: Callable[[T], bool]) -> T:
    """``read()`` once a second until ``done`` holds of its value; the last value at ``deadline``."""
    with trio.move_on_at(deadline):
        async with contextlib.aclosing(trio_util.periodic(1.0)) as ticks:
            async for _ in ticks:
                if done(value := await read()):
                    return value
    return await read()


def when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def conditions(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in pod["status"].get("conditions") or ()}


def check_common_status(ns: Namespace, pod: dict[str, Any]) -> None:
    """What every started pod reports: the node's IP, a pod IP, a start time and PodScheduled."""
    status = pod["status"]
    # the node registered a reachable address (the default-route one here), never loopback
    assert not ipaddress.ip_address(ns.cluster.node_ip).is_loopback
    assert status["hostIP"] == ns.cluster.node_ip
    pod_ip = ipaddress.ip_address(status["podIP"])
    assert not pod_ip.is_loopback
    assert status["podIPs"] == [{"ip": status["podIP"]}]
    assert when(status["startTime"]) >= when(pod["metadata"]["creationTimestamp"])
    scheduled = conditions(pod)["PodScheduled"]
    assert scheduled["status"] == "True" and scheduled["lastTransitionTime"]
    assert status["qosClass"] == "BestEffort"


def check_container_identity(ns: Namespace, status: dict[str, Any]) -> None:
    assert status["image"] == ns.cluster.busybox
    assert status["imageID"].startswith(ns.cluster.busybox.rsplit(":", 1)[0] + "@sha256:")
    assert status["containerID"].startswith("containerd://")


async def test_status_of_a_running_a_succeeded_and_a_failed_pod(ns: Namespace) -> None:
    await ns.create_pod(ns.pod("running", containers=[ns.container("app", SERVE)]))
    await ns.create_pod(
        ns.pod("succeeds", containers=[ns.container("app", "echo done")], restartPolicy="Never")
    )
    await ns.create_pod(ns.pod("fails", containers=[ns.container("app", "exit 3")], restartPolicy="Never"))
    deadline = after(90)

    async def running() -> None:
        pod = await ns.wait_pod(
            "running", both(phase_is("Running"), container_running("app", ready=True)), deadline=deadline
        )
        check_common_status(ns, pod)
        for type_ in ("Initialized", "Ready", "ContainersReady"):
            assert conditions(pod)[type_]["status"] == "True", conditions(pod)
        app = container_status(pod, "app")
        assert app is not None
        check_container_identity(ns, app)
        assert app["ready"] is True and app["started"] is True and app["restartCount"] == 0
        assert app["lastState"] == {}
        assert when(app["state"]["running"]["startedAt"]) >= when(pod["status"]["startTime"])
        assert await written_log(ns, "running", "app") == "started\n"
        reasons = {e["reason"] for e in await ns.events("running")}
        assert {"Pulled", "Created", "Started"} <= reasons, reasons

    async def finished(name: str, phase: str, exit_code: int, reason: str) -> None:
        history: list[dict[str, Any]] = []
        pod = await ns.wait_pod(name, phase_is(phase), deadline=deadline, seen=history)
        check_common_status(ns, pod)
        app = container_status(pod, "app")
        assert app is not None
        check_container_identity(ns, app)
        terminated = app["state"]["terminated"]
        assert (terminated["exitCode"], terminated["reason"]) == (exit_code, reason)
        assert when(terminated["startedAt"]) <= when(terminated["finishedAt"])
        assert terminated["containerID"] == app["containerID"]
        assert app["ready"] is False and app["started"] is False and app["restartCount"] == 0
        ready = conditions(pod)["Ready"]
        # a Succeeded pod's Ready is False for PodCompleted; a Failed one's for PodFailed (Go >= 1.27)
        expected = "PodCompleted" if phase == "Succeeded" else "PodFailed"
        assert (ready["status"], ready["reason"]) == ("False", expected), ready
        assert conditions(pod)["Initialized"]["status"] == "True"
        # The IPs stay once assigned, through the terminal phase.
        with_ip = [p for p in history if p["status"].get("podIP")]
        assert with_ip, history
        first = history.index(with_ip[0])
        assert all(p["status"].get("podIP") == pod["status"]["podIP"] for p in history[first:]), [
            (p["status"].get("phase"), p["status"].get("podIP")) for p in history[first:]
        ]

    async with trio.open_nursery() as nursery:
        nursery.start_soon(running)
        nursery.start_soon(finished, "succeeds", "Succeeded", 0, "Completed")
        nursery.start_soon(finished, "fails", "Failed", 3, "Error")
    # A terminal pod stays terminal (the kubelet neither restarts nor rewrites it).
    await trio.sleep(2)
    assert (await ns.get_pod("succeeds"))["status"]["phase"] == "Succeeded"


async def test_label_and_annotation_updates_restart_nothing(ns: Namespace) -> None:
    """The kubelet sees the update (the downward API files follow it) and keeps the container."""
    script = (
        "while true; do cat /etc/podinfo/labels /etc/podinfo/annotations | tr '\\n' ' '; echo; sleep 1; done"
    )
    manifest = ns.pod(
        "labelled",
        metadata={"labels": {"app": "web"}, "annotations": {"note": "one"}},
        containers=[
            ns.container("app", script, volumeMounts=[{"name": "podinfo", "mountPath": "/etc/podinfo"}])
        ],
        volumes=[
            {
                "name": "podinfo",
                "downwardAPI": {
                    "items": [
                        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                        {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
                    ]
                },
            }
        ],
    )
    await ns.create_pod(manifest)
    deadline = after(120)
    before = await ns.wait_pod("labelled", container_running("app", ready=True), deadline=deadline)
    first = container_status(before, "app")
    assert first is not None
    await ns.patch_pod("labelled", {"metadata": {"labels": {"tier": "edge"}, "annotations": {"note": "two"}}})
    log = await poll_until(
        deadline,
        lambda: ns.logs("labelled", "app", tailLines=1),
        lambda t: 'tier="edge"' in t and 'note="two"' in t,
    )
    assert 'tier="edge"' in log and 'note="two"' in log, log
    after_update = await ns.get_pod("labelled")
    again = container_status(after_update, "app")
    assert again is not None
    assert (again["containerID"], again["restartCount"]) == (first["containerID"], 0)
    assert again["state"]["running"] == first["state"]["running"]
    assert after_update["status"]["startTime"] == before["status"]["startTime"]
    assert after_update["metadata"]["labels"] == {"app": "web", "tier": "edge"}


async def test_graceful_deletion_of_running_and_terminated_pods(ns: Namespace) -> None:
    await ns.create_pod(
        ns.pod("trapping", containers=[ns.container("app", SERVE)], terminationGracePeriodSeconds=30)
    )
    await ns.create_pod(
        ns.pod(
            "ignoring",
            containers=[ns.container("app", "echo started; while true; do sleep 1; done")],
            terminationGracePeriodSeconds=2,
        )
    )
    await ns.create_pod(ns.pod("done", containers=[ns.container("app", "true")], restartPolicy="Never"))
    deadline = after(90)

    async def delete_running(name: str, grace: int, exit_code: int) -> None:
        await ns.wait_pod(name, container_running("app"), deadline=deadline)
        deleting = await ns.delete_pod(name)
        assert deleting["metadata"]["deletionTimestamp"]
        assert deleting["metadata"]["deletionGracePeriodSeconds"] == grace
        # The kubelet observes the termination notice (upstream reads its /pods through the node proxy).
        await poll_until(deadline, kubelet_pods, lambda pods: observed_deletion(pods, name))
        assert observed_deletion(await kubelet_pods(), name)
        history: list[dict[str, Any]] = []
        await ns.wait_pod_gone(name, deadline=deadline, seen=history)
        # The kubelet reports the stopped container before it removes the object.
        last = history[-1]
        assert last["metadata"]["deletionTimestamp"]
        terminated = container_terminated("app", exit_code=exit_code)
        assert terminated(last), container_status(last, "app")
        killing = [e for e in await ns.events(name) if e["reason"] == "Killing"]
        assert killing and killing[0]["message"] == "Stopping container app", killing

    async def kubelet_pods() -> list[dict[str, Any]]:
        listed = await ns.client.get(f"/api/v1/nodes/{ns.cluster.node}/proxy/pods")
        return [p for p in listed["items"] if p["metadata"]["namespace"] == ns.name]

    def observed_deletion(pods: list[dict[str, Any]], name: str) -> bool:
        return all(p["metadata"].get("deletionTimestamp") for p in pods if p["metadata"]["name"] == name)

    async def delete_terminated() -> None:
        await ns.wait_pod("done", phase_is("Succeeded"), deadline=deadline)
        await ns.delete_pod("done")
        await ns.wait_pod_gone("done", deadline=deadline)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(delete_running, "trapping", 30, 0)
        nursery.start_soon(delete_running, "ignoring", 2, 137)
        nursery.start_soon(delete_terminated)

    # Once the objects are gone, the kubelet forgets the pods.
    assert await poll_until(deadline, kubelet_pods, lambda pods: not pods) == []


async def test_delete_collection_removes_only_the_selected_pods(ns: Namespace) -> None:
    for i in range(3):
        await ns.create_pod(
            ns.pod(
                f"batch-{i}", metadata={"labels": {"set": "batch"}}, containers=[ns.container("app", SERVE)]
            )
        )
    await ns.create_pod(ns.pod("keeper", containers=[ns.container("app", SERVE)]))
    deadline = after(90)
    async with trio.open_nursery() as nursery:
        for name in ("batch-0", "batch-1", "batch-2", "keeper"):
            nursery.start_soon(lambda n=name: ns.wait_pod(n, container_running("app"), deadline=deadline))
    kept = container_status(await ns.get_pod("keeper"), "app")
    await ns.client.request("DELETE", ns.path("pods"), params={"labelSelector": "set=batch"})
    async with trio.open_nursery() as nursery:
        for i in range(3):
            nursery.start_soon(lambda n=f"batch-{i}": ns.wait_pod_gone(n, deadline=deadline))
    listed = await ns.client.get(ns.path("pods"))
    assert [p["metadata"]["name"] for p in listed["items"]] == ["keeper"]
    keeper = await ns.get_pod("keeper")
    assert "deletionTimestamp" not in keeper["metadata"]
    assert container_status(keeper, "app") == kept


async def test_active_deadline_seconds_from_the_start_and_lowered_while_running(ns: Namespace) -> None:
    """Go fails the pod with reason DeadlineExceeded and its message, however the containers end."""
    await ns.create_pod(
        ns.pod(
            "deadline",
            containers=[ns.container("app", "sleep 3600")],
            activeDeadlineSeconds=5,
            terminationGracePeriodSeconds=2,
        )
    )
    await ns.create_pod(
        ns.pod("lowered", containers=[ns.container("app", "sleep 3600")], terminationGracePeriodSeconds=2)
    )
    await ns.create_pod(ns.pod("lowered-clean-exit", containers=[ns.container("app", SERVE)]))
    deadline = after(90)

    async def expires(name: str, *, lower: bool) -> None:
        if lower:
            await ns.wait_pod(name, container_running("app"), deadline=deadline)
            await ns.patch_pod(name, {"spec": {"activeDeadlineSeconds": 5}})
        pod = await ns.wait_pod(name, phase_is("Failed", "Succeeded"), deadline=deadline)
        status = pod["status"]
        assert (status["phase"], status.get("reason"), status.get("message")) == (
            "Failed",
            "DeadlineExceeded",
            DEADLINE_MESSAGE,
        )
        assert container_terminated("app")(pod), container_status(pod, "app")
        assert conditions(pod)["Ready"]["status"] == "False"
        events = await poll_until(
            deadline, lambda: ns.events(name), lambda es: any(e["reason"] == "DeadlineExceeded" for e in es)
        )
        (event,) = [e for e in events if e["reason"] == "DeadlineExceeded"]
        assert (event["type"], event["message"]) == ("Normal", DEADLINE_MESSAGE)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: expires("deadline", lower=False))
        nursery.start_soon(lambda: expires("lowered", lower=True))
        nursery.start_soon(lambda: expires("lowered-clean-exit", lower=True))
