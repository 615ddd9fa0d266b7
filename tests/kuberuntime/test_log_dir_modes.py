"""Pod log directories are 0755 and container log files 0640, as with Go's kubelet over containerd, whatever
the umask: a service manager's umask 0 must not leave ``/var/log/pods`` writable by everyone, nor a
umask of 077 hide it from the log agents."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from trio.testing import MockClock

from kubelet_trio.testing.node import open_sim_node
from kubelet_trio.testing.pods import pod_manifest


@pytest.fixture(params=[0o000, 0o077], ids=["umask-000", "umask-077"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_pod_log_directories_are_0755_and_log_files_0640(
    autojump_clock: MockClock, tmp_path: Path, umask: int
) -> None:
    root = tmp_path / "pod-logs"  # made by the kubelet too, as /var/log/pods would be
    async with open_sim_node(pod_logs_dir=str(root)) as node:
        [pod] = await node.apply(pod_manifest("web", {"app": 'print "up"; run'}))
        await node.wait_for_phase(pod, "Running")
        await trio.sleep(1)
        pod_dir = root / f"default_web_{pod.uid}"
        log = pod_dir / "app" / "0.log"
        assert log.read_text().endswith(" stdout F up\n")
        assert (mode(root), mode(pod_dir), mode(pod_dir / "app")) == (0o755, 0o755, 0o755)
        assert mode(log) == 0o640
