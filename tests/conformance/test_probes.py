"""Liveness and readiness probes (upstream: test/e2e/common/node/container_probe.go), with short delays
and periods so that every case runs at once in one pass: exec, httpGet and tcpSocket handlers,
initialDelaySeconds, failureThreshold and timeoutSeconds, as restart counts, lastState, Ready
transitions and Unhealthy/Killing events."""

from __future__ import annotations

import datetime
from typing import Any

from tests.conformance._helpers_f import gather, wait_event, watch_history
from tests.conformance.conftest import Namespace, after, container_running, container_status, restarted

SERVE = "mkdir -p /www; echo ok > /www/healthz; httpd -p 8080 -h /www;"  # httpd forks into the background
UNHEALTHY = ("exec-restart", "exec-timeout", "http-restart", "tcp-refused", "http-refused", "readiness-fails")
#: the first instance turns unhealthy after 3 s; the restarted one stays healthy (restartCount stays 1)
FIRST_RUN_ONLY = " if [ ! -e /data/ran ]; then touch /data/ran; sleep 3; {}; fi;"
GRACE = 1  # the busybox shell ignores SIGTERM as PID 1: a liveness kill waits this long, then SIGKILL


def exec_probe(*command: str, **fields: Any) -> dict[str, Any]:
    return {"exec": {"command": list(command)}, "periodSeconds": 1, **fields}


def http_probe(path: str, port: int, **fields: Any) -> dict[str, Any]:
    return {"httpGet": {"path": path, "port": port}, "periodSeconds": 1, **fields}


def tcp_probe(port: int, **fields: Any) -> dict[str, Any]:
    return {"tcpSocket": {"port": port}, "periodSeconds": 1, **fields}


def parse_time(value: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))


def is_ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or ()
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def test_liveness_and_readiness_probes(ns: Namespace) -> None:
    once = {"initialDelaySeconds": 1, "failureThreshold": 1}
    cases: dict[str, tuple[str, dict[str, Any]]] = {
        # name: (script, probes)
        "readiness-delay": ("sleep 600", {"readinessProbe": exec_probe("true", initialDelaySeconds=5)}),
        "readiness-fails": ("sleep 600", {"readinessProbe": exec_probe("false")}),
        "readiness-timeout": (
            "sleep 600",
            {"readinessProbe": exec_probe("sh", "-c", "sleep 10", timeoutSeconds=1)},
        ),
        "exec-restart": (
            "echo ok > /tmp/health;" + FIRST_RUN_ONLY.format("rm -f /tmp/health") + " sleep 600",
            {"livenessProbe": exec_probe("cat", "/tmp/health", timeoutSeconds=5, **once)},
        ),
        "exec-ok": (
            "echo ok > /tmp/health; sleep 600",
            {"livenessProbe": exec_probe("cat", "/tmp/health", **once)},
        ),
        "exec-timeout": (
            "sleep 600",
            {"livenessProbe": exec_probe("sh", "-c", "sleep 10", timeoutSeconds=1, **once)},
        ),
        "exec-threshold": (
            "sleep 600",
            {"livenessProbe": exec_probe("false", initialDelaySeconds=1, failureThreshold=3)},
        ),
        "exec-repeated": ("sleep 600", {"livenessProbe": exec_probe("false", **once)}),
        "http-restart": (
            SERVE + FIRST_RUN_ONLY.format("rm /www/healthz") + " sleep 600",
            {"livenessProbe": http_probe("/healthz", 8080, **once)},
        ),
        "http-ok": (SERVE + " sleep 600", {"livenessProbe": http_probe("/healthz", 8080, **once)}),
        "tcp-ok": (SERVE + " sleep 600", {"livenessProbe": tcp_probe(8080, **once)}),
        "tcp-refused": ("sleep 600", {"livenessProbe": tcp_probe(8081, **once)}),
        "http-refused": ("sleep 600", {"livenessProbe": http_probe("/healthz", 8081, **once)}),
    }
    deadline = after(100)
    async with watch_history(ns) as history:
        for name, (script, probes) in cases.items():
            await ns.create_pod(
                ns.pod(
                    name,
                    containers=[
                        ns.container(
                            "c", script, volumeMounts=[{"name": "data", "mountPath": "/data"}], **probes
                        )
                    ],
                    volumes=[{"name": "data", "emptyDir": {}}],
                    terminationGracePeriodSeconds=GRACE,
                )
            )
        restarting = (
            "exec-restart",
            "exec-timeout",
            "exec-threshold",
            "http-restart",
            "tcp-refused",
            "http-refused",
        )
        delayed, *_ = await gather(
            lambda: ns.wait_pod("readiness-delay", is_ready, deadline=deadline, what="Ready"),
            *(
                lambda name=name: ns.wait_pod(
                    name, lambda p: restarted("c", 1)(p) and container_running("c")(p), deadline=deadline
                )
                for name in restarting
            ),
            lambda: ns.wait_pod("exec-repeated", restarted("c", 2), deadline=deadline, what="2 restarts"),
        )
        unhealthy = await gather(
            *(lambda name=name: wait_event(ns, name, "Unhealthy", deadline=deadline) for name in UNHEALTHY)
        )
        final = {name: await ns.get_pod(name) for name in cases}

    # Readiness: not before the initial delay; a failing or timing-out probe never makes the pod Ready.
    ready_at = next(c for c in delayed["status"]["conditions"] if c["type"] == "Ready")["lastTransitionTime"]
    started_at = container_status(delayed, "c")["state"]["running"]["startedAt"]
    assert (parse_time(ready_at) - parse_time(started_at)).total_seconds() >= 5
    assert any(container_running("c", ready=False)(p) for p in history.of("readiness-delay"))
    for name in ("readiness-fails", "readiness-timeout"):
        assert not any(is_ready(p) for p in history.of(name)), name
        assert container_running("c", ready=False)(final[name]), final[name]["status"]

    # Restart counts: exactly one restart for one failure, none for passing probes (probed all along).
    counts = {name: container_status(pod, "c")["restartCount"] for name, pod in final.items()}
    for name in ("readiness-delay", "readiness-fails", "readiness-timeout", "exec-ok", "http-ok", "tcp-ok"):
        assert counts[name] == 0, (name, final[name]["status"])
    for name in ("exec-restart", "http-restart"):
        assert counts[name] == 1, (name, final[name]["status"])
    repeated = [(container_status(p, "c") or {}).get("restartCount", 0) for p in history.of("exec-repeated")]
    assert repeated == sorted(repeated) and repeated[-1] >= 2

    for name in restarting:
        last = container_status(final[name], "c")["lastState"]["terminated"]
        assert (last["exitCode"], last["reason"]) == (137, "Error"), (name, last)

    messages = dict(
        zip(
            UNHEALTHY,
            (e["message"] for e in unhealthy),
            strict=True,
        )
    )
    assert messages["exec-restart"].startswith(
        "Liveness probe failed: cat: can't open '/tmp/health': No such file or directory"
    )
    assert messages["exec-timeout"] == 'Liveness probe failed: command "sh -c sleep 10" timed out'
    assert messages["http-restart"] == "Liveness probe failed: HTTP probe failed with statuscode: 404"
    pod_ip = final["tcp-refused"]["status"]["podIP"]
    assert (
        messages["tcp-refused"]
        == f"Liveness probe failed: dial tcp {pod_ip}:8081: connect: connection refused"
    )
    assert messages["http-refused"] == (
        f'Liveness probe failed: Get "http://{final["http-refused"]["status"]["podIP"]}:8081/healthz": '
        f"dial tcp {final['http-refused']['status']['podIP']}:8081: connect: connection refused"
    )
    assert messages["readiness-fails"] == "Readiness probe failed: "

    # The threshold: three failures in a row before the kill, counted on one aggregated event.
    threshold_events = {e["reason"]: e for e in await ns.events("exec-threshold")}
    assert threshold_events["Unhealthy"]["count"] >= 3
    assert threshold_events["Killing"]["message"] == "Container c failed liveness probe, will be restarted"
