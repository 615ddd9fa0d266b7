"""What a real cluster showed, on real containerd behind the fake API server (loopback HTTP, real clock,
absolute deadlines): pod sysctls reach the sandbox, host-network pods start (no sandbox hostname) with the
node's /etc/hosts, and an ephemeral container added through the API starts in a running pod, in its
target's PID namespace, without restarting it."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet_trio.testing.env import LocalCriEnvironment
from kubelet_trio.testing.fakeapi import FakeApi
from tests.apiserver.harness import open_containerd_api_node
from tests.apiserver.pod_status import api_container, phase, running

pytestmark = pytest.mark.containerd

NODE = "ctr-fixes-node"
HOST_NETWORK_HEADER = "# Kubernetes-managed hosts file (host network)."


def manifest(name: str, image: str, script: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "app", "image": image, "command": ["sh", "-c", script]}],
            **spec,
        },
    }


def terminated(api: FakeApi, name: str) -> dict[str, Any] | None:
    if not api.has_pod(name):
        return None
    statuses = api.pod(name).get("status", {}).get("containerStatuses") or ()
    for status in statuses:
        if status["name"] == "app" and "terminated" in status.get("state", {}):
            return dict(status["state"]["terminated"])
    return None


def ephemeral_terminated(api: FakeApi, name: str, container: str) -> dict[str, Any] | None:
    for status in api.pod(name).get("status", {}).get("ephemeralContainerStatuses") or ():
        if status["name"] == container and "terminated" in status.get("state", {}):
            return dict(status["state"]["terminated"])
    return None


async def test_sysctls_host_network_and_ephemeral_containers(
    cri_env: LocalCriEnvironment, tmp_path: Path
) -> None:
    image = cri_env.images.busybox
    with trio.fail_after(240):
        async with open_containerd_api_node(cri_env, tmp_path, NODE) as (api, client, _runtime, _node):
            # Pod sysctls: set in the pod's IPC namespace by the runtime, seen by the container.
            api.create_pod(
                manifest(
                    "sysctls",
                    image,
                    "cat /proc/sys/kernel/shm_rmid_forced > /dev/termination-log",
                    restartPolicy="Never",
                    securityContext={"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]},
                )
            )
            # A host-network pod: its sandbox has no hostname of its own, its /etc/hosts is the node's.
            api.create_pod(
                manifest(
                    "host-net",
                    image,
                    "{ head -n 1 /etc/hosts; hostname; } > /dev/termination-log",
                    restartPolicy="Never",
                    hostNetwork=True,
                )
            )
            # A long-running pod to debug.
            api.create_pod(manifest("web", image, "sleep 3600"))

            await api.wait_for(lambda: phase(api, "sysctls") == "Succeeded")
            sysctls = terminated(api, "sysctls")
            assert sysctls is not None and (sysctls["exitCode"], sysctls.get("message")) == (0, "1\n")

            await api.wait_for(lambda: phase(api, "host-net") == "Succeeded")
            host_net = terminated(api, "host-net")
            assert host_net is not None and host_net["exitCode"] == 0, host_net
            assert host_net.get("message") == f"{HOST_NETWORK_HEADER}\n{socket.gethostname()}\n"
            assert api.pod("host-net")["status"]["podIP"] == "192.0.2.10"  # the node's address

            # An ephemeral container added through the subresource: started in the running pod, in the
            # PID namespace of its target (it sees `sleep 3600`), and the pod is not restarted.
            await api.wait_for(lambda: running(api, "web"))
            before = api_container(api, "web", "app")
            pod = api.pod("web")
            pod["spec"]["ephemeralContainers"] = [
                {
                    "name": "debugger",
                    "image": image,
                    "command": ["sh", "-c", "ps -o args > /dev/termination-log"],
                    "targetContainerName": "app",
                }
            ]
            await client.replace("/api/v1/namespaces/default/pods/web/ephemeralcontainers", pod)
            await api.wait_for(lambda: ephemeral_terminated(api, "web", "debugger") is not None)
            debugger = ephemeral_terminated(api, "web", "debugger")
            assert debugger is not None and debugger["exitCode"] == 0, debugger
            assert "sleep 3600" in debugger.get("message", ""), debugger
            statuses = api.pod("web")["status"]["ephemeralContainerStatuses"]
            assert [(s["name"], s["restartCount"], s["ready"]) for s in statuses] == [("debugger", 0, False)]
            assert statuses[0]["containerID"].startswith("containerd://")
            after = api_container(api, "web", "app")
            assert (after["containerID"], after["restartCount"]) == (before["containerID"], 0)
            assert "running" in after["state"]
            await trio.sleep(1)  # events are posted from a queue
            reasons = [
                (e["reason"], e["message"])
                for e in api.events("default")
                if e["involvedObject"]["name"] == "web" and e["reason"] == "Started"
            ]
            assert ("Started", "Started container debugger") in reasons
