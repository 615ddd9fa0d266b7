"""Termination messages (upstream: test/e2e/common/node/runtime.go "should report termination message"):
read from the file at ``terminationMessagePath`` (at most its last 4096 bytes), or with
``FallbackToLogsOnError`` from the last 80 lines / 2048 bytes of the log when the container failed and
left the file empty."""

from __future__ import annotations

from typing import Any

from tests.conformance._helpers_f import gather, run_to_completion, terminated_state
from tests.conformance.conftest import Namespace, after

FALLBACK = {"terminationMessagePolicy": "FallbackToLogsOnError"}


async def test_termination_messages(ns: Namespace) -> None:
    cases: dict[str, tuple[str, dict[str, Any]]] = {
        # name: (script, container fields)
        "file-default-path": ("printf DONE > /dev/termination-log", {}),
        "non-root-custom-path": (
            "printf DONE > /dev/termination-custom-log",
            {
                "terminationMessagePath": "/dev/termination-custom-log",
                "securityContext": {"runAsUser": 1000},
            },
        ),
        "file-policy-ignores-logs": ("echo LOG; exit 1", {}),
        "fallback-on-error": ("echo -n DONE; false", FALLBACK),
        "fallback-on-error-lines": ("echo a; echo b; printf DONE; false", FALLBACK),
        "fallback-success-no-file": ("printf OK", FALLBACK),
        "fallback-success-with-file": ("printf OK > /dev/termination-log", FALLBACK),
        "fallback-file-wins": ("printf FILE > /dev/termination-log; echo LOG; exit 1", FALLBACK),
        "fallback-last-80-lines": ("for i in $(seq 1 100); do echo line-$i; done; exit 1", FALLBACK),
        "file-last-4096-bytes": (
            "head -c 1000 /dev/zero | tr '\\0' A > /dev/termination-log;"
            " head -c 4096 /dev/zero | tr '\\0' B >> /dev/termination-log",
            {},
        ),
    }
    deadline = after(90)
    pods = await gather(
        *(
            lambda name=name, script=script, fields=fields: run_to_completion(
                ns, ns.pod(name, containers=[ns.container("c", script, **fields)]), deadline=deadline
            )
            for name, (script, fields) in cases.items()
        )
    )
    results = {
        name: (pod["status"]["phase"], terminated_state(pod, "c").get("message", ""))
        for name, (pod, _log) in zip(cases, pods, strict=True)
    }
    assert results == {
        "file-default-path": ("Succeeded", "DONE"),
        "non-root-custom-path": ("Succeeded", "DONE"),
        "file-policy-ignores-logs": ("Failed", ""),
        "fallback-on-error": ("Failed", "DONE"),
        "fallback-on-error-lines": ("Failed", "a\nb\nDONE"),
        "fallback-success-no-file": ("Succeeded", ""),
        "fallback-success-with-file": ("Succeeded", "OK"),
        "fallback-file-wins": ("Failed", "FILE"),
        "fallback-last-80-lines": ("Failed", "".join(f"line-{i}\n" for i in range(21, 101))),
        "file-last-4096-bytes": ("Succeeded", "B" * 4096),
    }
