"""Container log rotation on real containerd: a container printing faster than containerLogMaxSize per
round keeps at most containerLogMaxFiles files, and ``/containerLogs`` still serves its latest lines,
continuous across the rotated files, also while following (real clock, real processes)."""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import trio

from kubelet_trio.cri.remote import open_cri_runtime
from kubelet_trio.testing.env import LocalCriEnvironment, remove_all_pods
from kubelet_trio.testing.node import SimNode, open_node
from kubelet_trio.testing.registry import free_port

pytestmark = pytest.mark.containerd

NODE = "log-rotation"
MAX_SIZE = 4 * 1024
MAX_FILES = 3
MONITOR_INTERVAL = 1.0  # the configuration file's floor is 3s; the node takes any interval
# ~110 bytes a line, up to 100 lines a second (some 70 here): ~8 KiB per 1 s round, twice MAX_SIZE
SCRIPT = 'pad=$(printf "%0100d" 0); i=0; while true; do echo "line $i $pad"; i=$((i+1)); usleep 10000; done'
LINE = re.compile(r"^line (\d+) 0{100}$")


def numbers(text: str) -> list[int]:
    """The line numbers of a response; every line must be a whole line the container printed."""
    found = []
    for line in text.splitlines():
        match = LINE.match(line)
        assert match is not None, repr(line)
        found.append(int(match[1]))
    return found


def consecutive(found: list[int]) -> bool:
    return found == list(range(found[0], found[0] + len(found)))


@pytest.fixture
async def node(
    cri_env: LocalCriEnvironment, tmp_path: Path
) -> AsyncIterator[tuple[SimNode, httpx.AsyncClient]]:
    port = free_port()
    try:
        async with (
            open_cri_runtime(cri_env.endpoint, request_timeout=30) as runtime,
            open_node(
                runtime,
                NODE,
                read_only_port=port,
                address="127.0.0.1",
                pod_logs_dir=str(tmp_path / "logs"),
                root_dir=str(tmp_path / "root"),
                container_log_max_size=MAX_SIZE,
                container_log_max_files=MAX_FILES,
                container_log_monitor_interval=MONITOR_INTERVAL,
            ) as node,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client,
        ):
            yield node, client
    finally:
        with trio.move_on_after(60, shield=True):
            await remove_all_pods(cri_env.endpoint, NODE)


async def test_rotation_keeps_at_most_max_files_and_logs_stay_readable(
    node: tuple[SimNode, httpx.AsyncClient], cri_env: LocalCriEnvironment, tmp_path: Path
) -> None:
    sim_node, client = node
    (pod,) = await sim_node.apply(
        {
            "metadata": {"name": "chatty"},
            "spec": {
                "containers": [
                    {"name": "app", "image": cri_env.images.busybox, "command": ["sh", "-c", SCRIPT]}
                ]
            },
        }
    )
    with trio.fail_after(60):
        await sim_node.wait_for(
            pod, lambda s: any(c.state and c.state.running for c in s.container_statuses or ())
        )
    log_dir = tmp_path / "logs" / f"default_chatty_{pod.uid}" / "app"
    url = "/containerLogs/default/chatty/app"

    followed: list[str] = []

    async def follow(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with client.stream("GET", url, params={"follow": "true", "tailLines": "1"}) as response:
            task_status.started()
            async for chunk in response.aiter_text():
                followed.append(chunk)

    most = 0
    compressed = False
    async with trio.open_nursery() as nursery:
        await nursery.start(follow)
        with trio.move_on_after(6 * MONITOR_INTERVAL):  # several rotations
            while True:
                names = os.listdir(log_dir)
                most = max(most, len(names))
                compressed = compressed or any(n.endswith(".gz") for n in names)
                await trio.sleep(0.02)
        nursery.cancel_scope.cancel()  # the follower goes away

    assert compressed and 2 <= most <= MAX_FILES
    # followed through the rotations: every line once, in order (the last chunk may end mid-line)
    text = "".join(followed)
    followed_numbers = numbers(text[: text.rfind("\n") + 1])
    assert consecutive(followed_numbers) and len(followed_numbers) > 2 * MAX_SIZE // 110

    tail = numbers((await client.get(url, params={"tailLines": 5})).text)
    everything = numbers((await client.get(url)).text)
    assert len(tail) == 5 and consecutive(tail)
    # the rotated files (gzip'd and not) and the current one read as one log, nothing lost between them
    assert consecutive(everything) and everything[-1] >= tail[-1] >= followed_numbers[-1]
    assert len(everything) * 110 > MAX_SIZE  # more than the current file holds
