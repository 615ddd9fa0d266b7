"""``/containerLogs``: exactly the lines a container printed; tail, limits, timestamps, previous, follow."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from kubelet_trio.clock import rfc3339_nano
from kubelet_trio.logs_reader import LogLine, LogParser, read_log
from tests.server.harness import HttpNode, open_test_node, pod_manifest


def log_file(node: HttpNode, pod_name: str, container: str, instance: int = 0) -> Path:
    (pod_dir,) = node.logs_dir.glob(f"default_{pod_name}_*")
    return pod_dir / container / f"{instance}.log"


def append(node: HttpNode, path: Path, *records: str) -> None:
    """Write CRI records (``"F text"`` / ``"P part"``) as a runtime would."""
    stamp = rfc3339_nano(node.kubelet.clock.wall_ns())
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
        await node.kubelet.status_manager.wait_for(
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


def test_parser_joins_partial_records_and_skips_garbage(tmp_path: Path) -> None:
    parser = LogParser()
    lines = parser.feed(b"2024-01-01T00:00:00Z stdout P hel")
    assert lines == []
    lines = parser.feed(
        b"lo\n2024-01-01T00:00:01Z stderr F err\nnot a record\n2024-01-01T00:00:02Z stdout F  world"
    )
    assert lines == [LogLine("2024-01-01T00:00:01Z", "stderr", "err")]
    lines = parser.feed(b"\n")
    assert lines == [LogLine("2024-01-01T00:00:00Z", "stdout", "hello world")]
    path = tmp_path / "0.log"
    path.write_bytes(
        b"2024-01-01T00:00:00Z stdout F a\n2024-01-01T00:00:00Z stdout F \n2024-01-01T00:00:00Z stdout P tail"
    )
    assert [line.text for line in read_log(str(path))] == ["a", "", "tail"]
