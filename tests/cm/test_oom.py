"""System OOM kills from the kernel log become Node events; the kubelet's own OOM score."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from kubelet_trio.cm.oom_score import apply_oom_score_adj
from kubelet_trio.cm.oom_watcher import OomInstance, OomParser, OOMWatcher

#: a global OOM on a 5.x+ kernel: no oom_memcg, so the summary line names no cgroup that ran out
SYSTEM_OOM = [
    "4,1001,5000000,-;stress invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0, "
    "oom_score_adj=0",
    "4,1002,5000001,-;CPU: 1 PID: 16713 Comm: stress Not tainted 5.15.0 #1",
    "6,1003,5000002,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,"
    "task_memcg=/user.slice,task=stress,pid=16713,uid=0",
    "3,1004,5000003,-;Out of memory: Killed process 16713 (stress) total-vm:826516kB, anon-rss:819296kB",
]
#: a container over its limit: the OOM cgroup is the pod's
MEMCG_OOM = [
    "4,2001,6000000,-;python invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=984",
    "6,2002,6000001,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=abc,mems_allowed=0,"
    "oom_memcg=/kubepods/burstable/podx,task_memcg=/kubepods/burstable/podx/abc,task=python,pid=51979,uid=0",
    "3,2003,6000002,-;Memory cgroup out of memory: Killed process 51979 (python) total-vm:72916kB",
]
LEGACY_MEMCG_OOM = [
    "4,3001,7000000,-;sh invoked oom-killer: gfp_mask=0x24000c0, order=0, oom_score_adj=1000",
    "6,3002,7000001,-;Task in /kubepods/besteffort/pody/def killed as a result of limit of "
    "/kubepods/besteffort/pody",
    "3,3003,7000002,-;Killed process 4242 (sh) total-vm:1000kB",
]


def parse(lines: list[str]) -> list[OomInstance]:
    parser = OomParser()
    found = []
    for line in lines:
        oom = parser.feed(line.partition(";")[2])
        if oom is not None:
            found.append(oom)
    return found


def test_parses_victim_and_cgroups() -> None:
    assert parse(SYSTEM_OOM) == [OomInstance(pid=16713, process_name="stress")]
    assert parse(MEMCG_OOM) == [
        OomInstance(
            pid=51979,
            process_name="python",
            container_name="/kubepods/burstable/podx/abc",
            victim_container_name="/kubepods/burstable/podx",
        )
    ]
    assert parse(LEGACY_MEMCG_OOM)[0].victim_container_name == "/kubepods/besteffort/pody"
    assert parse(["3,1,1,-;Killed process 1 (init)"]) == []  # no oom-killer line before it


async def test_only_system_ooms_become_node_events(tmp_path: Path) -> None:
    kmsg = tmp_path / "kmsg"
    kmsg.write_text("\n".join([*MEMCG_OOM, *SYSTEM_OOM, *LEGACY_MEMCG_OOM, " SUBSYSTEM=memory", ""]))
    events: list[tuple[str, str, str]] = []
    watcher = OOMWatcher(record=lambda *e: events.append(e), kmsg=str(kmsg))
    async with trio.open_nursery() as nursery:
        await nursery.start(watcher.run)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert events == [("Warning", "SystemOOM", "System OOM encountered, victim process: stress, pid: 16713")]


async def test_without_kmsg_the_watcher_starts_and_ends(tmp_path: Path) -> None:
    watcher = OOMWatcher(record=lambda *e: pytest.fail("no event expected"), kmsg=str(tmp_path / "absent"))
    async with trio.open_nursery() as nursery:
        await nursery.start(watcher.run)


def test_oom_score_adj_of_the_kubelet(tmp_path: Path) -> None:
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "oom_score_adj").write_text("0")
    assert apply_oom_score_adj(proc=str(tmp_path))
    assert (tmp_path / "self" / "oom_score_adj").read_text() == "-999"
    assert not apply_oom_score_adj(4242, -500, proc=str(tmp_path))  # no such process
    with pytest.raises(ValueError, match="invalid oom_score_adj"):
        apply_oom_score_adj(value=-1001, proc=str(tmp_path))
