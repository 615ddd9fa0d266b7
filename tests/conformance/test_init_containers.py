"""Init containers through a real kube-apiserver (upstream test/e2e/common/node/init_container.go): they run
one at a time, in order, before any app container; the Initialized condition and its text; a failing init
container under each restart policy. Every pod version the watch shows is checked against upstream's
invariants (``init_invariants``)."""

from __future__ import annotations

from typing import Any

import trio

from tests.conformance._helpers_f import written_log
from tests.conformance.conftest import (
    Namespace,
    after,
    both,
    container_running,
    container_status,
    phase_is,
)

#: seconds the watch follows a failed pod for the final status the kubelet writes after its cleanup
FINAL_STATUS_WINDOW = 15


def initialized(pod: dict[str, Any]) -> dict[str, Any]:
    (condition,) = [c for c in pod["status"].get("conditions") or () if c["type"] == "Initialized"]
    return condition


def init_invariants(pod: dict[str, Any]) -> None:
    """Upstream's ``initContainersInvariants``: once an init container is unfinished or failed, those after
    it wait; app containers wait with PodInitializing and no restarts until all init containers are done;
    Initialized is never Unknown and is True exactly when all init containers succeeded."""
    statuses = pod["status"].get("initContainerStatuses") or []
    all_done, failed = True, False
    for status in statuses:
        state = status["state"]
        if (failed or not all_done) and "waiting" not in state:
            raise AssertionError(
                f"{status['name']} ran after an unfinished or failed init container: {statuses}"
            )
        if "terminated" not in state:
            all_done = False
        elif state["terminated"]["exitCode"] != 0:
            all_done, failed = False, True
        elif not status["ready"]:
            raise AssertionError(f"{status['name']} succeeded but is not ready: {status}")
    if not all_done or failed:
        for status in pod["status"].get("containerStatuses") or ():
            waiting = status["state"].get("waiting") or {}
            assert waiting.get("reason") == "PodInitializing" and status["restartCount"] == 0, status
    if not statuses:
        return
    condition = initialized(pod)
    assert condition["lastTransitionTime"], condition
    assert condition["status"] == ("True" if all_done and not failed else "False"), (condition, statuses)


def check_history(history: list[dict[str, Any]]) -> None:
    assert history
    for pod in history:
        init_invariants(pod)
    # Initialized never goes back to False once True.
    states = [initialized(p)["status"] for p in history if p["status"].get("initContainerStatuses")]
    if "True" in states:
        assert "False" not in states[states.index("True") :], states


async def test_init_containers_run_in_order_before_the_app(ns: Namespace) -> None:
    """Each init container appends its name to a shared file; the app prints it."""
    mount = [{"name": "work", "mountPath": "/work"}]

    def manifest(name: str, policy: str, app_script: str) -> dict[str, Any]:
        return ns.pod(
            name,
            restartPolicy=policy,
            initContainers=[
                ns.container("init1", "echo init1 >> /work/order", volumeMounts=mount),
                ns.container("init2", "echo init2 >> /work/order", volumeMounts=mount),
            ],
            containers=[ns.container("run1", app_script, volumeMounts=mount)],
            volumes=[{"name": "work", "emptyDir": {}}],
        )

    await ns.create_pod(manifest("never", "Never", "cat /work/order"))
    await ns.create_pod(manifest("always", "Always", "cat /work/order; while true; do sleep 1; done"))
    deadline = after(90)

    async def check(name: str, done: Any, phase: str) -> None:
        history: list[dict[str, Any]] = []
        pod = await ns.wait_pod(name, done, deadline=deadline, seen=history)
        check_history(history)
        assert pod["status"]["phase"] == phase
        condition = initialized(pod)
        assert condition["status"] == "True", condition
        if phase == "Succeeded":
            assert condition.get("reason") == "PodCompleted", condition
        statuses = pod["status"]["initContainerStatuses"]
        assert [s["name"] for s in statuses] == ["init1", "init2"]
        for status in statuses:
            assert status["ready"] is True, status
            assert status["state"]["terminated"]["exitCode"] == 0, status
            assert status["state"]["terminated"]["reason"] == "Completed", status
            assert status["restartCount"] == 0 and status["containerID"].startswith("containerd://")
        first, second = (s["state"]["terminated"] for s in statuses)
        app = container_status(pod, "run1")
        assert app is not None
        app_started = (app["state"].get("running") or app["state"].get("terminated") or {})["startedAt"]
        assert first["finishedAt"] <= second["startedAt"] and second["finishedAt"] <= app_started
        assert await written_log(ns, name, "run1") == "init1\ninit2\n"
        assert await ns.logs(name, "init1") == ""

    async with trio.open_nursery() as nursery:
        nursery.start_soon(check, "never", phase_is("Succeeded", "Failed"), "Succeeded")
        nursery.start_soon(check, "always", both(phase_is("Running"), container_running("run1")), "Running")


async def test_a_failing_init_container_under_each_restart_policy(ns: Namespace) -> None:
    """Always and OnFailure retry the failed init container and never start the app; Never fails the pod."""
    for name, policy in (("always", "Always"), ("on-failure", "OnFailure")):
        await ns.create_pod(
            ns.pod(
                name,
                restartPolicy=policy,
                initContainers=[ns.container("init1", "exit 1"), ns.container("init2", "true")],
                containers=[ns.container("run1", "while true; do sleep 1; done")],
            )
        )
    await ns.create_pod(
        ns.pod(
            "never",
            restartPolicy="Never",
            initContainers=[ns.container("init1", "true"), ns.container("init2", "exit 1")],
            containers=[ns.container("run1", "true")],
        )
    )
    deadline = after(110)

    async def retried(name: str) -> None:
        history: list[dict[str, Any]] = []

        def restarted_three_times(pod: dict[str, Any]) -> bool:
            return int((container_status(pod, "init1") or {}).get("restartCount", 0)) >= 3

        pod = await ns.wait_pod(name, restarted_three_times, deadline=deadline, seen=history)
        check_history(history)
        assert pod["status"]["phase"] == "Pending"
        condition = initialized(pod)
        assert (condition["status"], condition["reason"], condition["message"]) == (
            "False",
            "ContainersNotInitialized",
            "containers with incomplete status: [init1 init2]",
        )
        init1, init2 = pod["status"]["initContainerStatuses"]
        assert init1["lastState"]["terminated"]["exitCode"] == 1
        assert init2["state"]["waiting"]["reason"] == "PodInitializing"
        (app,) = pod["status"]["containerStatuses"]
        assert app["state"]["waiting"]["reason"] == "PodInitializing" and app["restartCount"] == 0

    async def fails() -> None:
        history: list[dict[str, Any]] = []
        await ns.wait_pod("never", phase_is("Failed", "Succeeded"), deadline=deadline, seen=history)
        # Then the kubelet cleans up and writes the pod's final status (Go TerminatePod): the app
        # container that never ran is still waiting there, not "ContainerStatusUnknown" (Go 1.24 and
        # 1.33 alike). Nothing marks that write, so the watch goes on for a while (no extra time: the
        # retried pods take longer).
        with trio.move_on_after(FINAL_STATUS_WINDOW):
            await ns.wait_pod("never", lambda _: False, deadline=deadline, seen=history)
        check_history(history)
        pod = history[-1]
        assert pod["status"]["phase"] == "Failed"
        condition = initialized(pod)
        assert (condition["status"], condition["reason"], condition["message"]) == (
            "False",
            "ContainersNotInitialized",
            "containers with incomplete status: [init2]",
        )
        init1, init2 = pod["status"]["initContainerStatuses"]
        assert init1["state"]["terminated"]["exitCode"] == 0 and init1["ready"] is True
        assert init2["state"]["terminated"]["exitCode"] == 1 and init2["restartCount"] == 0
        assert init2["state"]["terminated"]["reason"] == "Error", init2
        (app,) = pod["status"]["containerStatuses"]
        assert app["state"] == {"waiting": {"reason": "PodInitializing"}}, app

    async with trio.open_nursery() as nursery:
        nursery.start_soon(retried, "always")
        nursery.start_soon(retried, "on-failure")
        nursery.start_soon(fails)
