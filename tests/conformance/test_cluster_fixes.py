"""The kubelet differences the first real-cluster run exposed (issue 12's list), one scenario each,
through a real kube-apiserver on containerd: ephemeral containers (upstream ephemeral_containers.go),
activeDeadlineSeconds lowered on a running pod (pods.go), the downward API's defaults for unset limits
(downwardapi.go), podIP through a pod's end, pod sysctls (sysctl.go) and host-network pods
(kubelet_etc_hosts.go). Each test runs its cases concurrently."""

from __future__ import annotations

import socket
from typing import Any

import trio

from kubelet_trio.api import Quantity
from tests.conformance._helpers_f import wait_log, written_log
from tests.conformance.conftest import (
    Namespace,
    after,
    both,
    container_running,
    container_status,
    phase_is,
)

SERVE = "trap 'exit 0' TERM; while true; do sleep 1; done"  # exits 0 on SIGTERM
DEADLINE = ("Failed", "DeadlineExceeded", "Pod was active on the node longer than the specified deadline")
HOST_NETWORK_HEADER = "# Kubernetes-managed hosts file (host network)."


async def first_lines(ns: Namespace, name: str, container: str, lines: int, deadline: float) -> list[str]:
    """The container's first ``lines`` log lines, once it has printed them."""
    log = await wait_log(ns, name, container, lambda log: log.count("\n") >= lines, deadline=deadline)
    return log.splitlines()[:lines]


async def test_runtime_facing_fixes(ns: Namespace) -> None:
    """Ephemeral containers start in a running pod; pod sysctls are set; host-network pods run."""
    deadline = after(90)

    async def ephemeral_container() -> None:
        await ns.create_pod(ns.pod("debugged", containers=[ns.container("app", SERVE)]))
        pod = await ns.wait_pod("debugged", container_running("app", ready=True), deadline=deadline)
        before = container_status(pod, "app")
        debugger = ns.container("debugger", "echo polo; ps -o args | grep -c '[w]hile true'; sleep 3600")
        debugger.update(targetContainerName="app", stdin=True, tty=True)
        await ns.client.merge_patch(
            ns.path("pods", "debugged", "ephemeralcontainers"), {"spec": {"ephemeralContainers": [debugger]}}
        )
        pod = await ns.wait_pod("debugged", container_running("debugger"), deadline=deadline)
        status = container_status(pod, "debugger")
        assert status is not None and [s["name"] for s in pod["status"]["ephemeralContainerStatuses"]] == [
            "debugger"
        ]
        assert status["containerID"].startswith("containerd://") and status["restartCount"] == 0
        assert status["ready"] is False
        # It shares the target's PID namespace (sees its shell), and the pod was not restarted.
        assert await first_lines(ns, "debugged", "debugger", 2, deadline) == ["polo", "1"]
        after_app = container_status(await ns.get_pod("debugged"), "app")
        assert before is not None and after_app is not None
        assert (after_app["containerID"], after_app["restartCount"]) == (before["containerID"], 0)
        events = {(e["reason"], e["message"]) for e in await ns.events("debugged")}
        assert ("Started", "Started container debugger") in events

    async def sysctls() -> None:
        manifest = ns.pod(
            "sysctls",
            containers=[ns.container("c", "cat /proc/sys/kernel/shm_rmid_forced")],
            restartPolicy="Never",
            securityContext={"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]},
        )
        await ns.create_pod(manifest)
        await ns.wait_pod("sysctls", phase_is("Succeeded"), deadline=deadline)
        assert await written_log(ns, "sysctls", "c") == "1\n"

    async def host_network() -> None:
        manifest = ns.pod(
            "host-net",
            containers=[ns.container("c", "head -n 1 /etc/hosts; hostname; sleep 3600")],
            hostNetwork=True,
        )
        await ns.create_pod(manifest)
        pod = await ns.wait_pod(
            "host-net", both(phase_is("Running"), container_running("c")), deadline=deadline
        )
        assert pod["status"]["podIP"] == ns.cluster.node_ip == pod["status"]["hostIP"]
        lines = await first_lines(ns, "host-net", "c", 2, deadline)
        assert lines == [HOST_NETWORK_HEADER, socket.gethostname()]

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ephemeral_container)
        nursery.start_soon(sysctls)
        nursery.start_soon(host_network)


async def test_status_facing_fixes(ns: Namespace) -> None:
    """A lowered activeDeadlineSeconds fails the pod with its reason whatever the exit; a finished pod
    keeps its podIP; unset limits read as the node's allocatable."""
    deadline = after(90)

    async def lowered_deadline() -> None:
        await ns.create_pod(ns.pod("deadline", containers=[ns.container("app", SERVE)]))
        await ns.wait_pod("deadline", container_running("app"), deadline=deadline)
        await ns.patch_pod("deadline", {"spec": {"activeDeadlineSeconds": 5}})
        history: list[dict[str, Any]] = []
        pod = await ns.wait_pod("deadline", phase_is("Failed", "Succeeded"), deadline=deadline, seen=history)
        await trio.sleep(3)  # the statuses written after the containers stopped
        history.append(await ns.get_pod("deadline"))
        terminal = [
            (s["phase"], s.get("reason"), s.get("message"))
            for s in (p["status"] for p in history)
            if s["phase"] not in ("Pending", "Running")
        ]
        assert terminal == [DEADLINE] * len(terminal), terminal
        app = container_status(pod, "app")
        assert app is not None and app["state"]["terminated"]["exitCode"] == 0

    async def pod_ip_at_the_end() -> None:
        await ns.create_pod(
            ns.pod("short", containers=[ns.container("app", "sleep 2")], restartPolicy="Never")
        )
        history: list[dict[str, Any]] = []
        await ns.wait_pod("short", phase_is("Succeeded"), deadline=deadline, seen=history)
        await trio.sleep(3)
        history.append(await ns.get_pod("short"))
        statuses = [p["status"] for p in history]
        first = next(i for i, s in enumerate(statuses) if s.get("podIP"))
        ip = statuses[first]["podIP"]
        seen = [(s["phase"], s.get("podIP"), s.get("podIPs")) for s in statuses[first:]]
        assert all(pod_ips == [{"ip": ip}] and pod_ip == ip for _, pod_ip, pod_ips in seen), seen

    async def allocatable_defaults() -> None:
        def limit(name: str, resource: str) -> dict[str, Any]:
            return {"name": name, "valueFrom": {"resourceFieldRef": {"resource": resource}}}

        container = ns.container(
            "c",
            "echo $MEMORY_LIMIT; cat /etc/podinfo/memory_limit; echo; echo $CPU_LIMIT",
            env=[limit("MEMORY_LIMIT", "limits.memory"), limit("CPU_LIMIT", "limits.cpu")],
            volumeMounts=[{"name": "podinfo", "mountPath": "/etc/podinfo"}],
        )
        volume = {
            "name": "podinfo",
            "downwardAPI": {
                "items": [
                    {
                        "path": "memory_limit",
                        "resourceFieldRef": {"containerName": "c", "resource": "limits.memory"},
                    }
                ]
            },
        }
        await ns.create_pod(
            ns.pod("defaults", containers=[container], volumes=[volume], restartPolicy="Never")
        )
        await ns.wait_pod("defaults", phase_is("Succeeded"), deadline=deadline)
        memory_env, memory_file, cpu = (await written_log(ns, "defaults", "c")).splitlines()
        node = await ns.client.get(f"/api/v1/nodes/{ns.cluster.node}")
        allocatable, capacity = node["status"]["allocatable"], node["status"]["capacity"]
        expected = Quantity(allocatable["memory"]).int_value()
        assert memory_env == memory_file == str(expected)
        # Capacity less the default memory.available<100Mi hard eviction threshold, not capacity itself.
        assert expected == Quantity(capacity["memory"]).int_value() - 100 * 2**20
        assert cpu == str(-(-Quantity(allocatable["cpu"]).milli_value() // 1000))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lowered_deadline)
        nursery.start_soon(pod_ip_at_the_end)
        nursery.start_soon(allocatable_defaults)
