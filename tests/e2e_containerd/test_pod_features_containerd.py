"""Probes, hooks, container configuration and volumes on real containerd (real clock, real processes).

Pods get IPs on the environment's own CNI bridge and subnet, which the prober reaches directly.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
import trio
import trio_util

from kubelet_trio.api import Pod, PodStatus
from kubelet_trio.cri.remote import open_cri_runtime
from kubelet_trio.testing.env import LocalCriEnvironment, remove_all_pods
from kubelet_trio.testing.node import SimNode, open_node
from tests.prober.nodes import EventLog

pytestmark = pytest.mark.containerd

FOREVER = "sleep 3600 & wait"


@pytest.fixture
async def node(cri_env: LocalCriEnvironment, tmp_path: Path) -> AsyncIterator[SimNode]:
    try:
        async with (
            open_cri_runtime(cri_env.endpoint, request_timeout=30) as runtime,
            open_node(
                runtime,
                "features-node",
                root_dir=str(tmp_path / "root"),
                pod_logs_dir=str(tmp_path / "logs"),
                event_sink=EventLog(),
            ) as node,
        ):
            yield node
    finally:
        with trio.move_on_after(60, shield=True):
            await remove_all_pods(cri_env.endpoint)
        unmount_below(tmp_path)  # the node stopped with pods running: their tmpfs volumes are still mounted


def unmount_below(root: Path) -> None:
    prefix = str(root.resolve())
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for mountpoint in sorted((m for m in mounts if m.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", mountpoint], check=False, capture_output=True)


def events_of(node: SimNode, pod: str, reason: str) -> list[str]:
    log = node.kubelet.event_sink
    assert isinstance(log, EventLog)
    return [message for _, message in log.reasons(reason, pod)]


def sh(name: str, image: str, script: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": image, "command": ["sh", "-c", script], **extra}


def pod(name: str, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    labels = spec.pop("labels", None)
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = labels
    return {"metadata": metadata, "spec": {"containers": containers, **spec}}


def cstatus(status: PodStatus, name: str = "app") -> Any:
    for c in (status.container_statuses or ()) + (status.init_container_statuses or ()):
        if c.name == name:
            return c
    return None


def is_running(status: PodStatus, name: str = "app") -> bool:
    c = cstatus(status, name)
    return c is not None and c.state is not None and c.state.running is not None


def log_lines(node: SimNode, pod: Pod, container: str, instance: int = 0) -> list[str]:
    path = (
        Path(node.kubelet.config.pod_logs_dir)
        / f"{pod.namespace}_{pod.name}_{pod.uid}"
        / container
        / f"{instance}.log"
    )
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return [line.split(" ", 3)[3] if line.count(" ") >= 3 else "" for line in text.splitlines()]


async def eventually(check: Callable[[], bool], limit: float = 30) -> None:
    with trio.fail_after(limit):
        async with aclosing(trio_util.periodic(0.05)) as ticks:
            async for _ in ticks:
                if check():
                    return


async def wait_for(
    node: SimNode, pod: Pod, predicate: Callable[[PodStatus], bool], limit: float = 60
) -> PodStatus:
    with trio.fail_after(limit):
        return await node.wait_for(pod, predicate)


async def test_http_liveness_restarts_when_the_served_file_goes(
    node: SimNode, cri_env: LocalCriEnvironment
) -> None:
    serve = (
        "mkdir -p /www; echo ok > /www/healthz; (sleep 3; rm /www/healthz) & exec httpd -f -p 8080 -h /www"
    )
    liveness = {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 1, "failureThreshold": 2}
    (p,) = await node.apply(
        pod(
            "web-live",
            [
                sh(
                    "app",
                    cri_env.images.busybox,
                    serve,
                    ports=[{"name": "http", "containerPort": 8080}],
                    livenessProbe=liveness,
                )
            ],
        )
    )
    first = await wait_for(node, p, is_running)
    assert first.pod_ip and ipaddress.ip_address(first.pod_ip) in ipaddress.ip_network(cri_env.pod_subnet)
    status = await wait_for(node, p, lambda s: (cstatus(s).restart_count or 0) >= 1 and is_running(s))
    assert cstatus(status).last_state.terminated is not None
    assert any(
        m == "Liveness probe failed: HTTP probe failed with statuscode: 404"
        for m in events_of(node, "web-live", "Unhealthy")
    )
    assert "Container app failed liveness probe, will be restarted" in events_of(node, "web-live", "Killing")


async def test_exec_readiness_toggles_ready(node: SimNode, cri_env: LocalCriEnvironment) -> None:
    readiness = {"exec": {"command": ["cat", "/tmp/ready"]}, "periodSeconds": 1}
    (p,) = await node.apply(
        pod(
            "toggle",
            [sh("app", cri_env.images.busybox, f"touch /tmp/ready; {FOREVER}", readinessProbe=readiness)],
        )
    )
    status = await wait_for(node, p, lambda s: bool(cstatus(s)) and cstatus(s).ready is True)
    container_id = cstatus(status).container_id.partition("://")[2]
    runtime = node.kubelet.runtime
    await runtime.exec_sync(container_id, ["rm", "/tmp/ready"], 5)
    status = await wait_for(node, p, lambda s: cstatus(s).ready is False)
    assert {c.type: c.status for c in status.conditions}["Ready"] == "False"
    assert cstatus(status).restart_count == 0
    await runtime.exec_sync(container_id, ["touch", "/tmp/ready"], 5)
    status = await wait_for(node, p, lambda s: cstatus(s).ready is True)
    assert {c.type: c.status for c in status.conditions}["Ready"] == "True"


async def test_tcp_socket_probes(node: SimNode, cri_env: LocalCriEnvironment) -> None:
    serve = f"mkdir -p /www && httpd -p 8080 -h /www && {FOREVER}"
    good, bad = await node.apply(
        pod(
            "tcp-ok",
            [
                sh(
                    "app",
                    cri_env.images.busybox,
                    serve,
                    readinessProbe={"tcpSocket": {"port": 8080}, "periodSeconds": 1},
                )
            ],
        ),
        pod(
            "tcp-closed",
            [
                sh(
                    "app",
                    cri_env.images.busybox,
                    FOREVER,
                    readinessProbe={"tcpSocket": {"port": 9999}, "periodSeconds": 1},
                )
            ],
        ),
    )
    await wait_for(node, good, lambda s: bool(cstatus(s)) and cstatus(s).ready is True)
    await wait_for(node, bad, lambda s: is_running(s))
    await eventually(lambda: bool(events_of(node, "tcp-closed", "Unhealthy")))
    message = events_of(node, "tcp-closed", "Unhealthy")[0]
    assert message.startswith("Readiness probe failed: dial tcp ") and ":9999" in message
    probed = message.split("dial tcp ")[1].split(":")[0]
    assert ipaddress.ip_address(probed) in ipaddress.ip_network(cri_env.pod_subnet)
    status = node.status(bad)
    assert status is not None and cstatus(status).ready is False


async def test_hooks_through_a_shared_empty_dir(node: SimNode, cri_env: LocalCriEnvironment) -> None:
    app = sh(
        "app",
        cri_env.images.busybox,
        f"trap 'echo \"TERM $(date +%s)\" >> /shared/log; exit 0' TERM; {FOREVER}",
        volumeMounts=[{"name": "shared", "mountPath": "/shared"}],
        lifecycle={
            "postStart": {"exec": {"command": ["sh", "-c", "echo poststart >> /shared/log"]}},
            "preStop": {
                "exec": {"command": ["sh", "-c", 'echo "prestop $(date +%s)" >> /shared/log; sleep 2']}
            },
        },
    )
    (p,) = await node.apply(
        pod("hooks", [app], volumes=[{"name": "shared", "emptyDir": {}}], terminationGracePeriodSeconds=20)
    )
    status = await wait_for(node, p, is_running)
    assert status.phase == "Running"
    log = Path(node.kubelet._volume_manager.mounted_volumes(p.uid)["shared"].host_path) / "log"
    assert log.read_text() == "poststart\n"  # ran before the container was reported running
    seen: list[str] = []

    def copy() -> bool:
        with contextlib.suppress(FileNotFoundError):
            seen[:] = log.read_text().splitlines()
        return any(line.startswith("TERM") for line in seen)

    started = trio.current_time()
    await node.delete(p)
    await eventually(copy)
    assert [line.split()[0] for line in seen] == ["poststart", "prestop", "TERM"]
    prestop, term = int(seen[1].split()[1]), int(seen[2].split()[1])
    assert term - prestop >= 2  # SIGTERM only after the hook (which slept 2 s) returned
    with trio.fail_after(60):
        await node.wait_terminated(p)
    assert trio.current_time() - started < 20  # within the grace period
    assert not log.exists()  # the emptyDir is gone with the pod


async def test_env_downward_api_and_expansion_in_output(node: SimNode, cri_env: LocalCriEnvironment) -> None:
    script = (
        'echo "name=$POD_NAME ip=$POD_IP node=$NODE greet=$(GREETING) home=$$HOME"; '
        "cat /etc/podinfo/labels; echo; " + FOREVER
    )
    app = sh(
        "app",
        cri_env.images.busybox,
        script,
        env=[
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "GREETING", "value": "hello-$(POD_NAME)"},
        ],
        volumeMounts=[{"name": "podinfo", "mountPath": "/etc/podinfo"}],
    )
    (p,) = await node.apply(
        pod(
            "envy",
            [app],
            nodeName="features-node",
            labels={"app": "envy", "tier": "demo"},
            volumes=[
                {
                    "name": "podinfo",
                    "downwardAPI": {
                        "items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]
                    },
                }
            ],
        )
    )
    status = await wait_for(node, p, is_running)
    await eventually(lambda: len(log_lines(node, p, "app")) >= 3)
    lines = log_lines(node, p, "app")
    assert lines[0] == f"name=envy ip={status.pod_ip} node=features-node greet=hello-envy home=/root"
    assert lines[1:3] == ['app="envy"', 'tier="demo"']


async def test_empty_dir_host_path_memory_limit_and_user(
    node: SimNode, cri_env: LocalCriEnvironment, tmp_path: Path
) -> None:
    host = tmp_path / "host-data"
    host.mkdir()
    (host / "greeting").write_text("hello from the host\n")
    writer = sh(
        "writer",
        cri_env.images.busybox,
        f"echo shared-data > /out/file; cat /host/greeting; echo written > /host/back; {FOREVER}",
        volumeMounts=[{"name": "scratch", "mountPath": "/out"}, {"name": "host", "mountPath": "/host"}],
    )
    reader = sh(
        "reader",
        cri_env.images.busybox,
        "while [ ! -f /in/file ]; do sleep 0.1; done; cat /in/file; "
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes; id -u; "
        "grep ' /cache ' /proc/mounts | cut -d' ' -f3; " + FOREVER,
        volumeMounts=[
            {"name": "scratch", "mountPath": "/in", "readOnly": True},
            {"name": "cache", "mountPath": "/cache"},
        ],
        resources={"limits": {"memory": "64Mi", "cpu": "500m"}},
        securityContext={"runAsUser": 1234},
    )
    (p,) = await node.apply(
        pod(
            "volumes",
            [writer, reader],
            volumes=[
                {"name": "scratch", "emptyDir": {}},
                {"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
                {"name": "host", "hostPath": {"path": str(host), "type": "Directory"}},
            ],
        )
    )
    await wait_for(node, p, lambda s: is_running(s, "writer") and is_running(s, "reader"))
    await eventually(
        lambda: len(log_lines(node, p, "reader")) >= 4 and len(log_lines(node, p, "writer")) >= 1
    )
    assert log_lines(node, p, "writer")[0] == "hello from the host"
    assert (host / "back").read_text() == "written\n"
    assert log_lines(node, p, "reader")[:4] == ["shared-data", str(64 * 2**20), "1234", "tmpfs"]


async def test_termination_messages(node: SimNode, cri_env: LocalCriEnvironment) -> None:
    from_file, from_logs, ok = await node.apply(
        pod(
            "msg-file",
            [sh("app", cri_env.images.busybox, "echo ignored; printf bye > /dev/termination-log; exit 1")],
            restartPolicy="Never",
        ),
        pod(
            "msg-logs",
            [
                sh(
                    "app",
                    cri_env.images.busybox,
                    "echo first; echo last words; exit 2",
                    terminationMessagePolicy="FallbackToLogsOnError",
                )
            ],
            restartPolicy="Never",
        ),
        pod(
            "msg-ok",
            [
                sh(
                    "app",
                    cri_env.images.busybox,
                    "echo fine; exit 0",
                    terminationMessagePolicy="FallbackToLogsOnError",
                )
            ],
            restartPolicy="Never",
        ),
    )
    status = await wait_for(node, from_file, lambda s: s.phase == "Failed")
    terminated = cstatus(status).state.terminated
    assert (terminated.exit_code, terminated.message) == (1, "bye")
    status = await wait_for(node, from_logs, lambda s: s.phase == "Failed")
    assert cstatus(status).state.terminated.message == "first\nlast words\n"
    status = await wait_for(node, ok, lambda s: s.phase == "Succeeded")
    assert cstatus(status).state.terminated.message is None


async def test_config_error_leaves_other_pods_running(node: SimNode, cri_env: LocalCriEnvironment) -> None:
    broken, fine = await node.apply(
        pod(
            "broken",
            [
                sh(
                    "app",
                    cri_env.images.busybox,
                    FOREVER,
                    env=[{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
                )
            ],
        ),
        pod("fine", [sh("app", cri_env.images.busybox, FOREVER)]),
    )
    status = await wait_for(
        node,
        broken,
        lambda s: (
            bool(cstatus(s))
            and cstatus(s).state.waiting is not None
            and cstatus(s).state.waiting.reason == "CreateContainerConfigError"
        ),
    )
    assert 'secret "s" not found' in cstatus(status).state.waiting.message
    await wait_for(node, fine, is_running)
    assert os.geteuid() == 0
