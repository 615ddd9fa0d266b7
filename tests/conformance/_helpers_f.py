"""Helpers for the conformance scenarios on probes, hooks, expansion, termination messages, security
contexts, the downward API, configMaps/secrets, volume updates, subPaths, /etc/hosts, DNS and logs.

There is no ``kubectl exec`` here, so a scenario reads what a container sees from its logs: a container
prints and exits (:func:`run_to_completion`), or prints in a loop and the test polls its log
(:func:`wait_log`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar

import attrs
import trio
import trio_util

from kubelet_trio.client import NotFound
from tests.conformance.conftest import Namespace, WaitTimeout, after, container_status, phase_is

T = TypeVar("T")

LOG_POLL = 1.0  # seconds between two reads of a container log (no watch exists for logs)
EMPTY_LOG_GRACE = 10.0  # how long a finished container's empty log is read again
#: a line of ``timestamps=true`` output: RFC3339 with nanoseconds, one space, the line
TIMESTAMPED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z (.*)$")


async def gather(*calls: Callable[[], Awaitable[T]]) -> list[T]:
    """Run ``calls`` concurrently in one nursery; their results in order (the first failure cancels
    the rest)."""
    results: list[Any] = [None] * len(calls)

    async def one(i: int, call: Callable[[], Awaitable[T]]) -> None:
        results[i] = await call()

    async with trio.open_nursery() as nursery:
        for i, call in enumerate(calls):
            nursery.start_soon(one, i, call)
    return results


async def run_to_completion(
    ns: Namespace, manifest: Mapping[str, Any], *, container: str | None = None, deadline: float | None = None
) -> tuple[dict[str, Any], str]:
    """Create a pod (``restartPolicy: Never`` unless set) and wait until it has finished; the finished
    pod and the log of ``container`` (default: its first container)."""
    manifest = {**manifest, "spec": {"restartPolicy": "Never", **manifest["spec"]}}
    name = manifest["metadata"]["name"]
    container = container or manifest["spec"]["containers"][0]["name"]
    await ns.create_pod(manifest)
    pod = await ns.wait_pod(
        name, phase_is("Succeeded", "Failed"), deadline=deadline or after(90), what="pod finished"
    )
    return pod, await written_log(ns, name, container)


async def written_log(ns: Namespace, name: str, container: str) -> str:
    """The log of a container that has printed: containerd reports a container running, or a quick one
    exited, before its log writer has drained the output pipe (seen in CI: a finished `cat` and a running
    `echo` with empty logs), so an empty log is read again for a while."""
    log = await ns.logs(name, container)
    with trio.move_on_after(EMPTY_LOG_GRACE):
        while not log:
            await trio.sleep(LOG_POLL)
            log = await ns.logs(name, container)
    return log


async def output_of(
    ns: Namespace, manifest: Mapping[str, Any], *, deadline: float | None = None, succeeded: bool = True
) -> str:
    """The log of a pod's first container once the pod has finished (Succeeded unless told otherwise)."""
    pod, log = await run_to_completion(ns, manifest, deadline=deadline)
    expected = "Succeeded" if succeeded else "Failed"
    name = manifest["metadata"]["name"]
    assert pod["status"]["phase"] == expected, f"{name}: {pod['status']}\nlog: {log!r}"
    return log


async def wait_log(
    ns: Namespace,
    name: str,
    container: str,
    check: Callable[[str], bool],
    *,
    deadline: float | None = None,
    what: str = "",
) -> str:
    """The container's log once ``check(log)`` holds; polled every :data:`LOG_POLL` seconds."""
    deadline = deadline or after(60)
    log = ""
    with trio.move_on_at(deadline):
        async with contextlib.aclosing(trio_util.periodic(LOG_POLL)) as ticks:
            async for _ in ticks:
                with contextlib.suppress(AssertionError):  # not started yet: the kubelet has no log
                    log = await ns.logs(name, container)
                if check(log):
                    return log
    raise WaitTimeout(
        f"pod {ns.name}/{name} container {container}: {what or 'log condition'} not met; log:\n{log}"
    )


def last_values(log: str) -> dict[str, str]:
    """``KEY=value`` lines of a looping container's log, the last value of each key winning."""
    values: dict[str, str] = {}
    for line in log.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key] = value
    return values


def waiting_reason(pod: Mapping[str, Any], container: str) -> str | None:
    return ((container_status(pod, container) or {}).get("state", {}).get("waiting") or {}).get("reason")


def waiting_is(container: str, reason: str) -> Callable[[dict[str, Any]], bool]:
    return lambda pod: waiting_reason(pod, container) == reason


def terminated_state(pod: Mapping[str, Any], container: str) -> dict[str, Any]:
    """The ``state.terminated`` of a container (an AssertionError when it has not terminated)."""
    state = (container_status(pod, container) or {}).get("state", {})
    assert "terminated" in state, f"{container} has not terminated: {state}"
    return dict(state["terminated"])


async def wait_event(
    ns: Namespace, name: str, reason: str, *, deadline: float | None = None
) -> dict[str, Any]:
    """The first event of ``reason`` recorded for object ``name`` (polled: events have no watch here
    that the tests would share)."""
    deadline = deadline or after(60)
    seen: list[dict[str, Any]] = []
    with trio.move_on_at(deadline):
        async with contextlib.aclosing(trio_util.periodic(LOG_POLL)) as ticks:
            async for _ in ticks:
                seen = await ns.events(name)
                for event in seen:
                    if event["reason"] == reason:
                        return event
    summary = [(e["reason"], e.get("message")) for e in seen]
    raise WaitTimeout(f"{ns.name}/{name}: no {reason} event; events: {summary}")


@attrs.define(eq=False)
class PodHistory:
    """Every version of some pods seen by a watch, in order (to assert that something never happened)."""

    versions: dict[str, list[dict[str, Any]]] = attrs.Factory(dict)

    def of(self, name: str) -> list[dict[str, Any]]:
        return self.versions.get(name, [])


@contextlib.asynccontextmanager
async def watch_history(ns: Namespace) -> AsyncIterator[PodHistory]:
    """Record every pod version of the namespace while the block runs."""
    history = PodHistory()

    async def follow() -> None:
        while True:
            listed = await ns.client.get(ns.path("pods"))
            for pod in listed.get("items") or ():
                history.versions.setdefault(pod["metadata"]["name"], []).append(pod)
            params = {"resourceVersion": listed["metadata"]["resourceVersion"], "timeoutSeconds": "60"}
            async with ns.client.open_watch(ns.path("pods"), params) as events:
                async for event in events:
                    if event.type not in ("ADDED", "MODIFIED"):
                        break
                    history.versions.setdefault(event.object["metadata"]["name"], []).append(event.object)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(follow)
        yield history
        nursery.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def other_namespace(ns: Namespace, suffix: str = "other") -> AsyncIterator[str]:
    """A second namespace next to ``ns`` (deleted afterwards); its name."""
    name = f"{ns.name}-{suffix}"
    await ns.client.create("/api/v1/namespaces", {"metadata": {"name": name}})
    try:
        yield name
    finally:
        with trio.move_on_after(30, shield=True), contextlib.suppress(NotFound):
            await ns.client.delete(f"/api/v1/namespaces/{name}")


async def node_allocatable(ns: Namespace) -> dict[str, str]:
    node = await ns.client.get(f"/api/v1/nodes/{ns.cluster.node}")
    return dict(node["status"]["allocatable"])
