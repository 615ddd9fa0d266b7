"""No API server answer can stop the node: what fails to decode in a list or watch is contained to that
pod (logged, counted, skipped) or to that watch (logged once, counted under ``apiwatch``, relisted after a
backoff), and the other pods go on. A scripted server (:mod:`tests.apiserver.scripted`), under MockClock."""

from __future__ import annotations

import json
import logging
import random
from typing import Any

import pytest
import trio
import trio.testing

from kubelet_trio.boundary import BoundaryErrors
from kubelet_trio.client.reflector import BACKOFF_INITIAL, ObjectReflector
from kubelet_trio.config import apiserver
from kubelet_trio.config.apiserver import ApiserverSource
from kubelet_trio.config.types import SourceSet
from kubelet_trio.logs import record_fields
from tests.apiserver.harness import pod_manifest
from tests.apiserver.scripted import Reply, Seen, scripted_api


class NoJitter(random.Random):
    """Backoffs and watch timeouts at their base values, so the schedule is exact."""

    def random(self) -> float:
        return 0.0


class ScriptedServer:
    """Answers lists with ``lists`` (the last one repeats) and watches with ``watches`` (then with watches
    that send nothing); records when each request came."""

    def __init__(self, lists: list[Any], watches: list[list[bytes]]) -> None:
        self.lists = lists
        self.watches = watches
        self.requests: list[tuple[str, float]] = []

    def handle(self, request: Seen) -> Reply:
        if request.query.get("watch") == "true":
            self.requests.append(("watch", trio.current_time()))
            return Reply(200, lines=tuple(self.watches.pop(0) if self.watches else []))
        self.requests.append(("list", trio.current_time()))
        body = self.lists.pop(0) if len(self.lists) > 1 else self.lists[0]
        return Reply.json(body)

    def times(self, kind: str) -> list[float]:
        return [at for what, at in self.requests if what == kind]


def pod(name: str, rv: str) -> dict[str, Any]:
    manifest = pod_manifest(name, {"app": "run"})
    manifest["metadata"].update(namespace="default", uid=f"uid-{name}", resourceVersion=rv)
    return manifest


def pod_list(rv: str, *pods: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": rv}, "items": list(pods)}


def event(kind: str, obj: Any) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode()


def error_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR]


async def run_source(
    server: ScriptedServer, errors: BoundaryErrors, sets: int
) -> tuple[ApiserverSource, list[list[str]]]:
    """Run the pod source until it published ``sets`` sets (and everything settled); their pod names."""
    published: list[list[str]] = []
    async with scripted_api(server.handle) as client:
        send, receive = trio.open_memory_channel[SourceSet](100)
        source = ApiserverSource(client, "node-1", send, rng=NoJitter(), boundary_errors=errors)
        async with trio.open_nursery() as nursery:
            await nursery.start(source.run)
            with trio.fail_after(60):
                while len(published) < sets:
                    published.append(sorted(p.name for p in (await receive.receive()).pods))
            await trio.sleep(10)  # anything else would happen now
            assert receive.statistics().current_buffer_used == 0, "more sets than expected"
            nursery.cancel_scope.cancel()
    return source, published


UNDECODABLE = {
    "not JSON": b"<html>502 Bad Gateway</html>",
    "not an object": b"[1, 2]",
    "object not an object": b'{"type": "ADDED", "object": ["web"]}',
    "no type": b'{"object": {}}',
    "nested past the stack": b"[" * 100_000,
}


@pytest.mark.parametrize("line", UNDECODABLE.values(), ids=UNDECODABLE.keys())
async def test_a_watch_line_that_is_not_an_event_is_contained_and_relists_after_a_backoff(
    line: bytes, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    server = ScriptedServer(
        [pod_list("10", pod("a", "9")), pod_list("20", pod("a", "9"), pod("b", "11"), pod("c", "15"))],
        [[line, event("ADDED", pod("never", "12"))]],
    )
    errors = BoundaryErrors()
    source, published = await run_source(server, errors, 2)
    assert published == [["a"], ["a", "b", "c"]]  # nothing after the line; the relist brought b and c
    assert source.lists == 2
    [first_watch, *_] = server.times("watch")
    assert server.times("list")[1] - first_watch == pytest.approx(BACKOFF_INITIAL)
    assert errors.counts == {"apiwatch": 1}
    [record] = error_records(caplog)
    assert record.getMessage() == "Peer failed; closing it"
    assert record_fields(record) == {"boundary": "apiwatch", "what": "pods of node node-1"}


async def test_a_list_of_unexpected_shape_is_contained_and_retried_after_a_backoff(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    server = ScriptedServer([{"items": 5}, pod_list("10", pod("a", "9"))], [])
    errors = BoundaryErrors()
    _, published = await run_source(server, errors, 1)
    assert published == [["a"]]
    assert server.times("list") == [0.0, pytest.approx(BACKOFF_INITIAL)]
    assert errors.counts == {"apiwatch": 1}
    assert len(error_records(caplog)) == 1


async def test_a_pod_the_model_cannot_read_is_skipped_and_counted(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    bad = pod("b", "11")
    bad["spec"]["containers"] = "not a list"
    server = ScriptedServer(
        [pod_list("10", pod("a", "9"))], [[event("ADDED", bad), event("ADDED", pod("c", "12"))]]
    )
    errors = BoundaryErrors()
    source, published = await run_source(server, errors, 2)
    assert published == [["a"], ["a", "c"]]
    assert source.lists == 1  # the watch went on
    assert errors.counts == {"apiwatch": 1}
    [record] = error_records(caplog)
    assert record.getMessage() == "ignoring undecodable pod"


async def test_an_unexpected_failure_decoding_one_pod_is_contained_to_it(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    strip = apiserver._without_managed_fields

    def corner(obj: Any) -> Any:
        if obj["metadata"]["name"] == "b":
            raise KeyError("a corner only this pod reaches")
        return strip(obj)

    monkeypatch.setattr(apiserver, "_without_managed_fields", corner)
    server = ScriptedServer(
        [pod_list("10", pod("a", "9"))], [[event("ADDED", pod("b", "11")), event("ADDED", pod("c", "12"))]]
    )
    errors = BoundaryErrors()
    source, published = await run_source(server, errors, 2)
    assert published == [["a"], ["a", "c"]]
    assert source.lists == 1
    assert errors.counts == {"apiwatch": 1}
    [record] = error_records(caplog)
    assert record.getMessage() == "Peer failed; closing it"
    assert str(record_fields(record)["pod"]) == "default/b"


async def test_the_object_reflector_contains_a_watch_line_that_is_not_an_event(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    node = {"metadata": {"name": "n1", "resourceVersion": "5"}, "spec": {}}
    server = ScriptedServer(
        [{"metadata": {"resourceVersion": "5"}, "items": [node]}],
        [[b'{"type": "MODIFIED", "object": "n1"}']],
    )
    errors = BoundaryErrors()
    async with scripted_api(server.handle) as client:
        reflector = ObjectReflector(client, "/api/v1/nodes", "n1", rng=NoJitter(), boundary_errors=errors)
        async with trio.open_nursery() as nursery:
            await nursery.start(reflector.run)
            await trio.sleep(10)
            nursery.cancel_scope.cancel()
    assert reflector.lists == 2
    assert reflector.value == node
    assert reflector.last_error is None  # the relist succeeded
    assert errors.counts == {"apiwatch": 1}
    assert len(error_records(caplog)) == 1
