"""Restart policies through a real kube-apiserver (upstream test/e2e/common/node/runtime.go "when starting
a container that exits"): exact restartCount, phase, readiness, state and lastState per policy, and the
CrashLoopBackOff wait between restarts."""

from __future__ import annotations

import re
from typing import Any

import trio

from tests.conformance.conftest import (
    Namespace,
    after,
    both,
    container_running,
    container_status,
    phase_is,
    restarted,
)

# The upstream script: the first run exits 1, the second exits 0, the third runs for good. The count
# lives in a memory-backed emptyDir, which outlives the container's restarts.
COUNTING = """\
f=/restart-count/restartCount
count=$(echo 'hello' >> $f ; wc -l $f | awk '{print $1}')
if [ $count -eq 1 ]; then exit 1; fi
if [ $count -eq 2 ]; then exit 0; fi
while true; do sleep 1; done
"""


def counting_pod(ns: Namespace, name: str, policy: str) -> dict[str, Any]:
    mount = [{"name": "restart-count", "mountPath": "/restart-count"}]
    return ns.pod(
        name,
        containers=[ns.container(name, COUNTING, volumeMounts=mount)],
        restartPolicy=policy,
        volumes=[{"name": "restart-count", "emptyDir": {"medium": "Memory"}}],
    )


def terminated(status: dict[str, Any], key: str) -> tuple[int, str]:
    """(exitCode, reason) of ``state`` or ``lastState``."""
    state = status[key].get("terminated")
    assert state is not None, f"{key} is not terminated: {status}"
    return state["exitCode"], state["reason"]


async def test_restart_policies_give_exact_restart_counts_and_last_state(ns: Namespace) -> None:
    for name, policy in (("rpa", "Always"), ("rpof", "OnFailure"), ("rpn", "Never")):
        await ns.create_pod(counting_pod(ns, name, policy))
    await ns.create_pod(ns.pod("crashing", containers=[ns.container("app", "exit 1")]))
    deadline = after(110)

    async def always() -> None:
        pod = await ns.wait_pod(
            "rpa", both(restarted("rpa", 2), container_running("rpa", ready=True)), deadline=deadline
        )
        status = container_status(pod, "rpa")
        assert status is not None
        assert pod["status"]["phase"] == "Running"
        assert (status["restartCount"], status["ready"], status["started"]) == (2, True, True)
        assert terminated(status, "lastState") == (0, "Completed")
        # It stays running: no third restart.
        await trio.sleep(3)
        assert container_status(await ns.get_pod("rpa"), "rpa") == status

    async def on_failure() -> None:
        pod = await ns.wait_pod("rpof", phase_is("Succeeded", "Failed"), deadline=deadline)
        status = container_status(pod, "rpof")
        assert status is not None
        assert pod["status"]["phase"] == "Succeeded"
        assert (status["restartCount"], status["ready"]) == (1, False)
        assert terminated(status, "state") == (0, "Completed")
        # (lastState is not asserted: once the pod is terminal the dead first run may already be collected)

    async def never() -> None:
        pod = await ns.wait_pod("rpn", phase_is("Succeeded", "Failed"), deadline=deadline)
        status = container_status(pod, "rpn")
        assert status is not None
        assert pod["status"]["phase"] == "Failed"
        assert (status["restartCount"], status["ready"]) == (0, False)
        assert terminated(status, "state") == (1, "Error")
        assert status["lastState"] == {}

    async def crash_loop() -> None:
        """Between restarts the container waits in CrashLoopBackOff, its last run kept in lastState."""

        def backing_off(pod: dict[str, Any]) -> bool:
            status = container_status(pod, "app") or {}
            waiting = status.get("state", {}).get("waiting") or {}
            return waiting.get("reason") == "CrashLoopBackOff" and status.get("restartCount", 0) >= 1

        pod = await ns.wait_pod("crashing", backing_off, deadline=deadline)
        status = container_status(pod, "app")
        assert status is not None
        assert pod["status"]["phase"] == "Running"
        # Go names the pod as format.Pod does: name_namespace(uid)
        uid = pod["metadata"]["uid"]
        expected = rf"back-off \d+s restarting failed container=app pod=crashing_{ns.name}\({uid}\)"
        assert re.fullmatch(expected, status["state"]["waiting"]["message"]), status["state"]["waiting"]
        assert terminated(status, "lastState") == (1, "Error")
        assert status["ready"] is False and status["started"] is False
        backoffs = [e for e in await ns.events("crashing") if e["reason"] == "BackOff"]
        assert backoffs and backoffs[0]["type"] == "Warning", await ns.events("crashing")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(always)
        nursery.start_soon(on_failure)
        nursery.start_soon(never)
        nursery.start_soon(crash_loop)
