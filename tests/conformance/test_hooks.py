"""postStart and preStop hooks, exec and httpGet (upstream: test/e2e/common/node/lifecycle_hook.go): each
hook calls a handler pod by its IP, and the handler's log shows the call. The handler is busybox httpd
with a CGI script (from a configMap) that writes ``GET /echo?<query>`` to httpd's stderr."""

from __future__ import annotations

from typing import Any

from tests.conformance._helpers_f import gather, terminated_state, wait_event, wait_log
from tests.conformance.conftest import Namespace, after, container_running, phase_is

ECHO_CGI = """#!/bin/sh
echo "GET /echo?$QUERY_STRING" >&2
printf 'Content-Type: text/plain\\r\\n\\r\\nok\\n'
"""
STOPPABLE = "trap 'exit 0' TERM; sleep 600 & wait"  # SIGTERM ends it at once (sh ignores it as PID 1)


async def start_handler(ns: Namespace) -> str:
    """The handler pod; its IP once it serves."""
    await ns.client.create(ns.path("configmaps"), {"metadata": {"name": "echo"}, "data": {"echo": ECHO_CGI}})
    await ns.create_pod(
        ns.pod(
            "handler",
            containers=[
                ns.container(
                    "httpd",
                    "exec httpd -f -p 8080 -h /www",
                    volumeMounts=[{"name": "cgi", "mountPath": "/www/cgi-bin"}],
                    readinessProbe={"tcpSocket": {"port": 8080}, "periodSeconds": 1},
                )
            ],
            volumes=[{"name": "cgi", "configMap": {"name": "echo", "defaultMode": 0o755}}],
        )
    )
    pod = await ns.wait_pod("handler", container_running("httpd", ready=True), deadline=after(60))
    return str(pod["status"]["podIP"])


def exec_hook(ip: str, msg: str) -> dict[str, Any]:
    return {"exec": {"command": ["sh", "-c", f"wget -q -O- 'http://{ip}:8080/cgi-bin/echo?msg={msg}'"]}}


def http_hook(ip: str, msg: str) -> dict[str, Any]:
    return {"httpGet": {"host": ip, "port": 8080, "path": f"/cgi-bin/echo?msg={msg}"}}


async def test_lifecycle_hooks_reach_another_pod(ns: Namespace) -> None:
    ip = await start_handler(ns)
    hooks = {
        "poststart-exec": {"postStart": exec_hook(ip, "poststart-exec")},
        "poststart-http": {"postStart": http_hook(ip, "poststart-http")},
        "prestop-exec": {"preStop": exec_hook(ip, "prestop-exec")},
        "prestop-http": {"preStop": http_hook(ip, "prestop-http")},
    }
    deadline = after(90)
    for name, lifecycle in hooks.items():
        await ns.create_pod(ns.pod(name, containers=[ns.container("c", STOPPABLE, lifecycle=lifecycle)]))
    await gather(
        *(lambda name=name: ns.wait_pod(name, container_running("c"), deadline=deadline) for name in hooks)
    )

    def calls(log: str, msg: str) -> int:
        return log.splitlines().count(f"GET /echo?msg={msg}")

    log = await wait_log(
        ns,
        "handler",
        "httpd",
        lambda log: calls(log, "poststart-exec") and calls(log, "poststart-http"),
        deadline=deadline,
        what="postStart calls",
    )
    assert calls(log, "prestop-exec") == calls(log, "prestop-http") == 0  # nothing stopped yet

    for name in ("prestop-exec", "prestop-http"):
        await ns.delete_pod(name, grace_period_seconds=15)
    await gather(
        *(
            lambda name=name: ns.wait_pod_gone(name, deadline=deadline)
            for name in ("prestop-exec", "prestop-http")
        )
    )
    log = await ns.logs("handler", "httpd")
    assert {
        msg: calls(log, msg) for msg in ("poststart-exec", "poststart-http", "prestop-exec", "prestop-http")
    } == {
        "poststart-exec": 1,
        "poststart-http": 1,
        "prestop-exec": 1,
        "prestop-http": 1,
    }


async def test_failing_post_start_hook_kills_the_container(ns: Namespace) -> None:
    """A postStart hook that fails kills its container (event FailedPostStartHook; SIGKILL once the
    grace period is over, as ``sleep`` ignores SIGTERM as PID 1); with restartPolicy Never the pod
    fails."""
    hook = {"postStart": {"exec": {"command": ["sh", "-c", "exit 3"]}}}
    await ns.create_pod(
        ns.pod(
            "poststart-fails",
            containers=[ns.container("c", "exec sleep 600", lifecycle=hook)],
            restartPolicy="Never",
            terminationGracePeriodSeconds=1,
        )
    )
    deadline = after(60)
    pod = await ns.wait_pod("poststart-fails", phase_is("Failed"), deadline=deadline)
    assert terminated_state(pod, "c")["exitCode"] == 137
    # Go keeps the hook's output out of the event (it could hold secrets); the kill names the hook.
    event = await wait_event(ns, "poststart-fails", "FailedPostStartHook", deadline=deadline)
    assert (event["type"], event["message"]) == ("Warning", "PostStartHook failed")
    killing = await wait_event(ns, "poststart-fails", "Killing", deadline=deadline)
    assert killing["message"] == "FailedPostStartHook"
