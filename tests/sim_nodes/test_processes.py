"""``kubelet-trio sim-nodes`` as processes against the fake API server: node ranges from several commands
joining one cluster, worker processes under one supervisor, their shutdown and their restarts."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio_util

from kubelet_trio.cmd.sim_nodes import NODE_IP_BASE, pod_cidr
from kubelet_trio.cmd.sim_nodes_supervisor import relay_lines
from kubelet_trio.testing.fakeapi import ServedFakeApi, open_served_fake_api

#: Hang guards only: nothing here asserts how long anything takes.
START_LIMIT = 120.0
STOP_LIMIT = 60.0
WORKER_RUNNING = re.compile(rb'"worker running" worker=(\d+) pid=(\d+)')


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[ServedFakeApi]:
    async with open_served_fake_api(tmp_path / "kubeconfig") as served:
        served.seed_namespace("default")
        yield served


@attrs.define(eq=False)
class SimNodes:
    process: trio.Process
    log: list[bytes] = attrs.Factory(list)
    #: Worker number -> pid, from the supervisor's "worker running" lines (the latest run of each).
    workers: trio_util.AsyncValue[dict[int, int]] = attrs.Factory(lambda: trio_util.AsyncValue({}))
    terminated: bool = False

    def terminate(self) -> None:
        """SIGTERM, once (a second one while it stops would end it by the default action)."""
        if not self.terminated:
            self.terminated = True
            self.process.send_signal(signal.SIGTERM)

    def record(self, lines: bytes) -> None:
        for line in lines.splitlines(keepends=True):
            self.log.append(line)
            if found := WORKER_RUNNING.search(line):
                self.workers.value = {**self.workers.value, int(found[1]): int(found[2])}


@contextlib.asynccontextmanager
async def sim_nodes(api: ServedFakeApi, *args: str) -> AsyncIterator[SimNodes]:
    """``sim-nodes`` on ``api`` with ``args``, once it says its nodes run; SIGTERMed at the end if still
    running."""
    argv = [sys.executable, "-m", "kubelet_trio", "sim-nodes", "--kubeconfig", str(api.kubeconfig), *args]
    pipe = subprocess.PIPE
    process = await trio.lowlevel.open_process(argv, stdout=pipe, stderr=pipe)
    assert process.stdout is not None and process.stderr is not None
    sim = SimNodes(process)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(relay_lines, process.stderr, sim.record)
            first = b""
            with trio.fail_after(START_LIMIT):
                while not first.endswith(b"\n") and (chunk := await process.stdout.receive_some(1024)):
                    first += chunk
            assert first.endswith(b" nodes running\n"), b"".join(sim.log).decode()
            yield sim
            sim.terminate()
            with trio.fail_after(STOP_LIMIT):
                await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            with trio.move_on_after(STOP_LIMIT, shield=True):
                await process.wait()


def probed_pod(name: str, node: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "annotations": {"sim.kubelet-trio.io/app": 'exec cat /ready -> 0 "ok"'}},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "app",
                    "image": "busybox",
                    "readinessProbe": {"exec": {"command": ["cat", "/ready"]}, "periodSeconds": 1},
                }
            ],
        },
    }


def _ready(obj: dict[str, Any]) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def running_and_ready(api: ServedFakeApi, name: str) -> bool:
    if not api.has_pod(name):
        return False
    pod = api.pod(name)
    return pod["status"].get("phase") == "Running" and _ready(pod)


def nodes_ready(api: ServedFakeApi, names: set[str]) -> bool:
    nodes = {n["metadata"]["name"]: n for n in api.store.list("nodes", None)["items"]}
    return names <= nodes.keys() and all(_ready(nodes[name]) for name in names)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_two_commands_with_disjoint_ranges_join_one_cluster(api: ServedFakeApi) -> None:
    names = {f"sim-{i}" for i in range(4)}
    async with (
        sim_nodes(api, "--nodes", "2", "--processes", "1") as first,
        sim_nodes(api, "--node-count", "2", "--node-offset", "2", "--processes", "1") as second,
    ):
        with trio.fail_after(START_LIMIT):
            await api.wait_for(lambda: nodes_ready(api, names))
        nodes = api.store.list("nodes", None)["items"]
        assert sorted(n["metadata"]["name"] for n in nodes) == sorted(names)
        addresses = {
            n["metadata"]["name"]: n["status"]["addresses"][0]["address"] for n in nodes
        }  # InternalIP first
        assert addresses == {f"sim-{i}": str(NODE_IP_BASE + i) for i in range(4)}
        for name in sorted(names):
            api.create_pod(probed_pod(f"web-{name}", name))
        with trio.fail_after(START_LIMIT):
            await api.wait_for(lambda: all(running_and_ready(api, f"web-{n}") for n in names))
        for i in range(4):  # each ran on its own node, with an address from that node's pod CIDR
            pod = api.pod(f"web-sim-{i}")
            assert pod["spec"]["nodeName"] == f"sim-{i}"
            assert pod["status"]["podIP"].rsplit(".", 1)[0] == pod_cidr(i).rsplit(".", 1)[0]
        first.terminate()
        second.terminate()
    assert (first.process.returncode, second.process.returncode) == (0, 0)


async def test_workers_run_their_nodes_and_stop_with_the_supervisor(api: ServedFakeApi) -> None:
    names = {f"sim-{i}" for i in range(4)}
    async with sim_nodes(api, "--nodes", "4", "--processes", "2") as sim:
        with trio.fail_after(START_LIMIT):
            await api.wait_for(lambda: nodes_ready(api, names))
            await sim.workers.wait_value(lambda w: len(w) == 2)  # its log may lag its stdout
        workers = sim.workers.value
        assert sorted(workers) == [0, 1]
        assert sim.process.pid not in workers.values()
        log = b"".join(sim.log)
        for worker, pid in workers.items():  # each worker's own lines reached the supervisor's log
            assert re.search(rb"^I\d{4} [\d:.]+ +%d .*\"kubelet started\"" % pid, log, re.MULTILINE), worker
        sim.terminate()
    assert sim.process.returncode == 0
    assert all(gone(pid) for pid in workers.values())  # no orphans
    stopped = [line for line in sim.log if b'"stopping"' in line]
    assert {int(line.split()[2]) for line in stopped} == {sim.process.pid, *workers.values()}


async def test_a_killed_worker_is_restarted_and_its_nodes_come_back(api: ServedFakeApi) -> None:
    names = {f"sim-{i}" for i in range(4)}
    async with sim_nodes(api, "--nodes", "4", "--processes", "2") as sim:
        with trio.fail_after(START_LIMIT):
            await api.wait_for(lambda: nodes_ready(api, names))
            await sim.workers.wait_value(lambda w: len(w) == 2)
        killed = sim.workers.value[0]  # sim-0 and sim-1
        other = sim.workers.value[1]
        os.kill(killed, signal.SIGKILL)
        with trio.fail_after(START_LIMIT):
            await sim.workers.wait_value(lambda w: w[0] != killed)
        assert sim.workers.value[1] == other  # the other worker ran on
        assert b'"worker exited; restarting" worker=0 exit="SIGKILL"' in b"".join(sim.log)
        # The restarted worker owns sim-0 and sim-1 again: they are Ready and run a pod bound to them.
        api.create_pod(probed_pod("after-restart", "sim-1"))
        with trio.fail_after(START_LIMIT):
            await api.wait_for(lambda: nodes_ready(api, names) and running_and_ready(api, "after-restart"))
        assert sorted(n["metadata"]["name"] for n in api.store.list("nodes", None)["items"]) == sorted(names)
        restarted = sim.workers.value[0]
        sim.terminate()
    assert sim.process.returncode == 0
    assert gone(killed) and gone(restarted) and gone(other)
