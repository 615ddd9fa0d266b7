"""API-mode scenarios (SimRuntime + the in-process fake API server, MockClock) for what a real cluster
showed: ephemeral containers added through the ``ephemeralcontainers`` subresource, an active deadline
lowered by a PATCH, and a finished pod's podIP as a watch sees it. Also the subresource's semantics in
the fake API server."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import pytest
import trio
import trio.testing

from kubelet_trio.client import Invalid
from kubelet_trio.clock import WallClock
from kubelet_trio.fsio import run_inline
from kubelet_trio.testing.fakeapi import FakeApi, FakeApiError, open_fake_api
from kubelet_trio.testing.pods import ExitZeroOnTerm
from tests.apiserver.harness import SIM, open_api_node, pod_manifest
from tests.apiserver.pod_status import api_container, phase, running

DEADLINE = ("Failed", "DeadlineExceeded", "Pod was active on the node longer than the specified deadline")
BUSYBOX = "registry.sim/busybox:1.36"
POD_PATH = "/api/v1/namespaces/default/pods/{}"
EPHEMERAL = POD_PATH + "/ephemeralcontainers"


@contextlib.contextmanager
def pod_history(api: FakeApi, name: str) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Every event a watch of pod ``name`` sees while the block runs (type, object)."""
    watcher = api.store.watch("pods", "default", None, field_selector=f"metadata.name={name}")
    events: list[tuple[str, dict[str, Any]]] = []
    try:
        yield events
    finally:
        with contextlib.suppress(trio.WouldBlock, trio.EndOfChannel):
            while True:
                events.append(watcher.receive.receive_nowait())
        api.store.stop_watch(watcher)


def ephemeral_status(api: FakeApi, name: str, container: str) -> dict[str, Any] | None:
    for status in api.pod(name).get("status", {}).get("ephemeralContainerStatuses") or ():
        if status["name"] == container:
            return dict(status)
    return None


# --- ephemeral containers ----------------------------------------------------------------------------


async def test_ephemeral_container_added_through_the_api(autojump_clock: trio.testing.MockClock) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock) as node:
        manifest = pod_manifest("web", {"app": "run"})
        manifest["metadata"]["annotations"][SIM + "debugger"] = 'print "debugging"; exit 0 after 20s'
        api.create_pod(manifest)
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "web"))
        before = api_container(api, "web", "app")

        pod = api.pod("web")
        pod["spec"]["ephemeralContainers"] = [
            {"name": "debugger", "image": BUSYBOX, "targetContainerName": "app", "stdin": True, "tty": True}
        ]
        await node.client.replace(EPHEMERAL.format("web"), pod)  # as kubectl debug does (PATCH works too)
        stored = api.pod("web")["spec"]["ephemeralContainers"][0]
        assert stored["terminationMessagePolicy"] == "File" and stored["imagePullPolicy"] == "IfNotPresent"

        with trio.fail_after(30):
            await api.wait_for(
                lambda: "running" in (ephemeral_status(api, "web", "debugger") or {}).get("state", {})
            )
        debugger = ephemeral_status(api, "web", "debugger")
        assert debugger is not None
        assert debugger["image"] == BUSYBOX and debugger["containerID"].startswith("containerd://")
        assert (debugger["ready"], debugger["restartCount"]) == (False, 0)
        assert "started" not in debugger
        after = api_container(api, "web", "app")
        assert (after["containerID"], after["restartCount"]) == (before["containerID"], 0)  # no restart
        # Events are sent on their own (queued, rate-limited), so the status may arrive first.
        with trio.fail_after(5):
            await api.wait_for(
                lambda: any(e["message"] == "Started container debugger" for e in api.events("default"))
            )

        # It ends after 20 s and stays terminated: ephemeral containers are never restarted.
        with trio.fail_after(60):
            await api.wait_for(
                lambda: "terminated" in (ephemeral_status(api, "web", "debugger") or {}).get("state", {})
            )
        await trio.sleep(120)
        debugger = ephemeral_status(api, "web", "debugger")
        assert debugger is not None and debugger["restartCount"] == 0
        assert debugger["state"]["terminated"]["exitCode"] == 0
        assert phase(api, "web") == "Running"


# --- activeDeadlineSeconds lowered by a PATCH --------------------------------------------------------


@pytest.mark.parametrize(("exit_zero", "exit_code"), [(False, 143), (True, 0)])
async def test_lowered_deadline_fails_the_pod_with_its_reason(
    autojump_clock: trio.testing.MockClock, exit_zero: bool, exit_code: int
) -> None:
    clock = WallClock()
    sim = ExitZeroOnTerm(clock=clock, run_sync=run_inline) if exit_zero else None
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock, sim=sim):
        api.create_pod(pod_manifest("web", {"app": "run"}, activeDeadlineSeconds=3600))
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "web"))
        await trio.sleep(10)
        with pod_history(api, "web") as history:
            api.store.patch("pods", "default", "web", {"spec": {"activeDeadlineSeconds": 5}})
            with trio.fail_after(60):
                await api.wait_for(lambda: phase(api, "web") == "Failed")
            await trio.sleep(30)
        status = api.pod("web")["status"]
        assert (status["phase"], status.get("reason"), status.get("message")) == DEADLINE
        app = api_container(api, "web", "app")
        assert app["state"]["terminated"]["exitCode"] == exit_code
        # Every status a watcher saw from the first Failed on carries the reason.
        terminal = [
            (o["status"]["phase"], o["status"].get("reason"), o["status"].get("message"))
            for _, o in history
            if o["status"]["phase"] != "Running"
        ]
        assert terminal and terminal == [DEADLINE] * len(terminal)


# --- podIP of a finished pod -------------------------------------------------------------------------


async def test_pod_ip_never_disappears_from_a_finished_pod(autojump_clock: trio.testing.MockClock) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock):
        with pod_history(api, "job") as history:
            api.create_pod(pod_manifest("job", {"app": "exit 0 after 5s"}, restart_policy="Never"))
            with trio.fail_after(60):
                await api.wait_for(lambda: phase(api, "job") == "Succeeded")
            await trio.sleep(30)
        statuses = [o.get("status", {}) for _, o in history]
        first = next(i for i, s in enumerate(statuses) if s.get("podIP"))
        ip = statuses[first]["podIP"]
        seen = [(s.get("phase"), s.get("podIP"), s.get("podIPs")) for s in statuses[first:]]
        assert all((pod_ip, pod_ips) == (ip, [{"ip": ip}]) for _, pod_ip, pod_ips in seen), seen
        assert seen[-1][0] == "Succeeded"


# --- the fake API server's ephemeralcontainers subresource ------------------------------------------


async def test_ephemeralcontainers_subresource_semantics(autojump_clock: trio.testing.MockClock) -> None:
    async with open_fake_api() as api, api.client() as client:
        base = pod_manifest("p", {"app": "run"})
        with pytest.raises(
            FakeApiError, match=r"spec.ephemeralContainers: Forbidden: cannot be set on create"
        ):
            api.create_pod({**base, "spec": {**base["spec"], "ephemeralContainers": [{"name": "d"}]}})
        created = api.create_pod(base)
        path = EPHEMERAL.format("p")

        # Only spec.ephemeralContainers is taken from the body; it is defaulted; the pod is returned.
        body = await client.get(path)
        body["metadata"]["labels"] = {"ignored": "yes"}
        body["spec"]["containers"][0]["image"] = "ignored:1"
        body["spec"]["ephemeralContainers"] = [{"name": "d1", "image": BUSYBOX, "targetContainerName": "app"}]
        answer = await client.replace(path, body)
        stored = api.pod("p")
        assert answer == stored
        assert "labels" not in stored["metadata"]
        assert stored["spec"]["containers"][0]["image"] == BUSYBOX
        assert stored["spec"]["ephemeralContainers"] == [
            {
                "name": "d1",
                "image": BUSYBOX,
                "targetContainerName": "app",
                "imagePullPolicy": "IfNotPresent",
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
            }
        ]
        assert int(stored["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])

        # A merge patch adds a second one (the list is replaced whole: the first must stay in it).
        both = [*stored["spec"]["ephemeralContainers"], {"name": "d2", "image": BUSYBOX}]
        await client.merge_patch(path, {"spec": {"ephemeralContainers": both}})
        assert [c["name"] for c in api.pod("p")["spec"]["ephemeralContainers"]] == ["d1", "d2"]

        invalid = {
            "removed": ([], 'existing ephemeral containers "d1" may not be removed'),
            "changed": (
                [{**both[0], "image": "other:1"}, both[1]],
                'existing ephemeral containers "d1" may not be changed',
            ),
            "duplicate": (
                [*both, {"name": "app", "image": BUSYBOX}],
                "ephemeralContainers[2].name: Duplicate",
            ),
            "target": (
                [*both, {"name": "d3", "image": BUSYBOX, "targetContainerName": "nope"}],
                'ephemeralContainers[2].targetContainerName: Not found: "nope"',
            ),
            "ports": (
                [*both, {"name": "d3", "image": BUSYBOX, "ports": [{"containerPort": 80}]}],
                "ephemeralContainers[2].ports: Forbidden: cannot be set for an Ephemeral Container",
            ),
        }
        for containers, message in invalid.values():
            with pytest.raises(Invalid, match=re.escape(message)):
                await client.merge_patch(path, {"spec": {"ephemeralContainers": containers}})
        # The main resource cannot change them.
        with pytest.raises(Invalid, match="pod updates may not change ephemeral containers"):
            await client.merge_patch(
                "/api/v1/namespaces/default/pods/p", {"spec": {"ephemeralContainers": []}}
            )
        assert [c["name"] for c in api.pod("p")["spec"]["ephemeralContainers"]] == ["d1", "d2"]
