"""``/containerLogs``: exactly the lines a container printed; tail, limits, timestamps, previous, follow."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import trio
import trio.testing

from kubelet_trio.api.timefmt import rfc3339_nano
from kubelet_trio.server.container_logs import MAX_REQUESTS_PER_CONTAINER
from tests.server.harness import HttpNode, open_test_node, pod_manifest


def log_file(node: HttpNode, pod_name: str, container: str, instance: int = 0) -> Path:
    (pod_dir,) = node.logs_dir.glob(f"default_{pod_name}_*")
    return pod_dir / container / f"{instance}.log"


def append(node: HttpNode, path: Path, *records: str) -> None:
    """Write CRI records (``"F text"`` / ``"P part"``) as a runtime would."""
    stamp = rfc3339_nano(node.kubelet.wall_ns())
    with path.open("a") as f:
        for record in records:
            f.write(f"{stamp} stdout {record}\n")


async def test_logs_are_exactly_what_the_container_printed(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_test_node(tmp_path) as node, node.client() as client:
        (pod,) = await node.apply(
            pod_manifest("talk", {"app": 'print "one" "two" "three"; stderr "oops"; run'})
        )
        await node.wait_running(pod)
        url = "/containerLogs/default/talk/app"
        response = await client.get(url)
        assert (response.status_code, response.text) == (200, "one\ntwo\nthree\noops\n")
        assert (await client.get(url, params={"tailLines": 2})).text == "three\noops\n"
        assert (await client.get(url, params={"tail": "all"})).text == "one\ntwo\nthree\noops\n"
        assert (await client.get(url, params={"tailLines": 0})).text == ""
        assert (await client.get(url, params={"limitBytes": 6})).text == "one\ntw"
        assert (await client.get(url, params={"stream": "stderr"})).text == "oops\n"
        stamped = (await client.get(url, params={"timestamps": "true", "tailLines": 1})).text
        stamp, _, text = stamped.rstrip("\n").partition(" ")
        assert text == "oops" and stamp.endswith("Z") and stamp.startswith(str(node.kubelet.clock.now().year))


async def test_log_errors(autojump_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    async with open_test_node(tmp_path) as node, node.client() as client:
        (pod,) = await node.apply(pod_manifest("talk", {"app": 'print "hi"; run'}))
        await node.wait_running(pod)
        missing_pod = await client.get("/containerLogs/default/nope/app")
        assert (missing_pod.status_code, missing_pod.text) == (404, 'pod "nope" does not exist\n')
        missing_container = await client.get("/containerLogs/default/talk/nope")
        assert missing_container.status_code == 404
        assert missing_container.text == 'container "nope" not found in pod "talk"\n'
        no_previous = await client.get("/containerLogs/default/talk/app", params={"previous": "true"})
        assert no_previous.status_code == 400 and "previous terminated container" in no_previous.text
        bad = await client.get("/containerLogs/default/talk/app", params={"tailLines": "-1"})
        assert bad.status_code == 422 and "tailLines" in bad.json()["message"]
        assert (await client.post("/containerLogs/default/talk/app")).status_code == 405


async def test_previous_reads_the_instance_before(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_test_node(tmp_path) as node, node.client() as client:
        (pod,) = await node.apply(pod_manifest("crash", {"app": 'print "starting"; exit 1 after 5s'}))
        await node.kubelet.wait_for_status(
            pod.uid, lambda s: bool(s.container_statuses) and s.container_statuses[0].restart_count == 1
        )
        append(node, log_file(node, "crash", "app", 0), "F the first run said goodbye")
        url = "/containerLogs/default/crash/app"
        assert (
            await client.get(url, params={"previous": "1"})
        ).text == "starting\nthe first run said goodbye\n"
        assert (await client.get(url)).text == "starting\n"


async def test_follow_streams_new_lines_until_the_container_exits(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_test_node(tmp_path) as node, node.client() as client:
        (pod,) = await node.apply(
            pod_manifest("job", {"app": 'print "a" "b"; exit 0 after 10s'}, restart_policy="Never")
        )
        await node.wait_running(pod)
        bodies: dict[str, str] = {}
        ended: dict[str, float] = {}

        async def follow(name: str, params: dict[str, object]) -> None:
            response = await client.get("/containerLogs/default/job/app", params={"follow": "true", **params})
            bodies[name], ended[name] = response.text, trio.current_time()

        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow, "all", {})
            nursery.start_soon(follow, "tail", {"tailLines": 1})
            nursery.start_soon(follow, "limited", {"limitBytes": 5})
            await trio.sleep(2)
            path = log_file(node, "job", "app")
            append(node, path, "F c")
            await trio.sleep(1)
            append(node, path, "P d-first-", "P d-second-", "F d-last")
            # "limited" ended once it had 5 bytes; the others wait for the container to exit.
        assert bodies["all"] == "a\nb\nc\nd-first-d-second-d-last\n"
        assert bodies["tail"] == "b\nc\nd-first-d-second-d-last\n"
        assert bodies["limited"] == "a\nb\nc"
        assert ended["limited"] - start < 3
        # The container exits 10 s after it started; the end is seen at the next relist/sync.
        assert 8 <= ended["all"] - start <= 12


async def test_follow_ends_when_the_client_disconnects(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """In-process, a disconnect is a cancelled request: the streaming task must go away cleanly."""
    async with open_test_node(tmp_path) as node, node.client() as client:
        (pod,) = await node.apply(pod_manifest("web", {"app": 'print "x"; run'}))
        await node.wait_running(pod)
        with trio.move_on_after(30) as scope:
            await client.get("/containerLogs/default/web/app", params={"follow": "1"})
        assert scope.cancelled_caught  # it followed a running container until we gave up


def container_id(node: HttpNode, pod_uid: str, container: str = "app") -> str:
    return node.kubelet.container_instances(pod_uid, container)[0].id


async def test_a_fragment_without_newline_is_served_as_printed(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """``printf value-1``: containerd writes a ``P`` record; Go serves ``value-1``, no newline added."""
    async with open_test_node(tmp_path) as node, node.client() as client:
        (pod,) = await node.apply(pod_manifest("printf", {"app": "run"}))
        await node.wait_running(pod)
        await node.sim.write_log(container_id(node, pod.uid), "value-1")
        url = "/containerLogs/default/printf/app"
        assert (await client.get(url)).text == "value-1"
        await node.sim.write_log(container_id(node, pod.uid), " and more\nnext")
        assert (await client.get(url)).text == "value-1 and more\nnext"
        assert (await client.get(url, params={"tailLines": 1})).text == "next"


async def test_concurrent_requests_per_container_are_capped(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_test_node(tmp_path) as node, node.client() as client:
        (pod,) = await node.apply(pod_manifest("busy", {"app": 'print "x"; run'}))
        await node.wait_running(pod)
        url = "/containerLogs/default/busy/app"
        async with trio.open_nursery() as followers:
            for _ in range(MAX_REQUESTS_PER_CONTAINER):
                followers.start_soon(functools.partial(client.get, url, params={"follow": "true"}))
            await trio.testing.wait_all_tasks_blocked()
            refused = await client.get(url)
            assert refused.status_code == 429
            assert refused.headers["retry-after"] == "1"
            assert refused.text == (
                'too many log requests for container "app" in pod "busy" at once (at most 10);'
                " try again later\n"
            )
            followers.cancel_scope.cancel()  # the clients go away
        assert (await client.get(url)).text == "x\n"


async def test_follow_and_tail_across_rotations(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with (
        open_test_node(
            tmp_path,
            container_log_max_size=1000,
            container_log_max_files=3,
            container_log_monitor_interval=10,
        ) as node,
        node.client() as client,
    ):
        (pod,) = await node.apply(pod_manifest("chatty", {"app": "run"}, restart_policy="Never"))
        await node.wait_running(pod)
        cid = container_id(node, pod.uid)
        url = "/containerLogs/default/chatty/app"
        written = [f"line {i} " + "x" * 200 for i in range(45)]
        followed: list[str] = []

        async def follow() -> None:
            followed.append((await client.get(url, params={"follow": "true"})).text)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow)
            for line in written:
                await trio.sleep(1)
                await node.sim.write_log(cid, line + "\n")
            node.sim.crash_container(cid, 0)  # following ends with the container
        log_dir = log_file(node, "chatty", "app").parent
        assert len(os.listdir(log_dir)) == 3 and any(name.endswith(".gz") for name in os.listdir(log_dir))
        assert followed == ["".join(f"{line}\n" for line in written)]  # every line once, in order
        assert (await client.get(url, params={"tailLines": 12})).text == "".join(
            f"{line}\n" for line in written[-12:]
        )
        kept = (await client.get(url)).text.splitlines()
        assert kept == written[-len(kept) :] and len(kept) >= 12
