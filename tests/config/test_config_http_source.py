"""The manifest-URL source through PodConfig, with in-memory peers (``tests.http_peers``) and a MockClock."""

from __future__ import annotations

import json
import logging
from typing import Any

import attrs
import httpx
import pytest
import trio

from kubelet_trio.config import HttpSource, PodConfig, PodOperation, PodUpdate, parse_manifest_url_headers
from kubelet_trio.logs import format_fields
from tests.config.conftest import fixed_now, no_update, summary
from tests.http_peers import from_handler

URL = "http://config.example/pods"
PERIOD = 20.0
ADD, REMOVE = PodOperation.ADD, PodOperation.REMOVE


def pod(name: str, image: str = "busybox:1.36") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": image}]},
    }


@attrs.define
class Server:
    """What the mock URL serves next, and what it was asked."""

    status: int = 200
    body: bytes = b""
    fail: bool = False
    hang: bool = False
    requests: list[httpx.Request] = attrs.field(factory=list)

    def serve(self, doc: Any, *, status: int = 200) -> None:
        self.body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
        self.status = status

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.fail:
            raise httpx.ConnectError("connection refused", request=request)
        if self.hang:
            await trio.sleep_forever()
        return httpx.Response(self.status, content=self.body)


async def recv(updates: trio.MemoryReceiveChannel[PodUpdate]) -> PodUpdate:
    with trio.fail_after(10 * PERIOD):
        return await updates.receive()


async def start(nursery: trio.Nursery, server: Server, **kwargs: Any) -> PodConfig:
    config = PodConfig(sources=("http",), now=fixed_now)
    source = HttpSource(
        URL, "node-1", config.source_channel("http"), connect=from_handler(server.handle).connect, **kwargs
    )
    await nursery.start(config.run)
    await nursery.start(source.run)
    return config


async def test_http_op_sequence(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    server = Server()
    server.serve(pod("web"))
    config = await start(
        nursery, server, headers=parse_manifest_url_headers(["a:hello,b:again", "b:beautiful"])
    )
    updates = config.updates
    first = await recv(updates)
    assert (summary(first), first.source) == ((ADD, ("web-node-1",)), "http")
    assert first.pods[0].annotations["kubernetes.io/config.source"] == "http"
    assert first.pods[0].spec.tolerations is None  # type: ignore[union-attr]  # only file pods get it
    assert config.sources_ready.value
    assert server.requests[0].headers.get_list("b") == ["again", "beautiful"]
    assert server.requests[0].headers["a"] == "hello"

    # The same body again: nothing.
    assert await no_update(updates, 2 * PERIOD)

    # A PodList: the unchanged pod keeps its UID, the new one is added.
    t0 = trio.current_time()
    server.serve({"apiVersion": "v1", "kind": "PodList", "items": [pod("web"), pod("worker")]})
    assert summary(await recv(updates)) == (ADD, ("worker-node-1",))
    assert trio.current_time() - t0 <= PERIOD

    # Failures keep the last good set and say why, naming the URL.
    with caplog.at_level(logging.WARNING, logger="kubelet_trio.config.http"):
        server.serve(b"oops", status=500)
        assert await no_update(updates, 2 * PERIOD)
        server.status = 200
        server.fail = True
        assert await no_update(updates, 2 * PERIOD)
        server.fail = False
        server.serve(b"{not json")
        assert await no_update(updates, 2 * PERIOD)
        server.serve({"apiVersion": "v1", "kind": "PodList", "items": [pod("web"), pod("Bad_Name")]})
        assert await no_update(updates, 2 * PERIOD)
        server.serve({"apiVersion": "v1", "kind": "ConfigMap"})
        assert await no_update(updates, 2 * PERIOD)
        server.hang = True
        assert await no_update(updates, 2 * PERIOD)
        server.hang = False
    text = "\n".join(f"{r.getMessage()} {format_fields(r)}" for r in caplog.records)
    for reason in ("HTTP status 500", "connection refused", "error(s) in the body", "no response within 10s"):
        assert reason in text
    assert f"url={URL}" in text

    # A List with one item changed: REMOVE both old, ADD the new web (its content, so UID, changed).
    server.serve({"apiVersion": "v1", "kind": "List", "items": [pod("web", image="busybox:1.37")]})
    assert [summary(await recv(updates)) for _ in range(2)] == [
        (REMOVE, ("web-node-1", "worker-node-1")),
        (ADD, ("web-node-1",)),
    ]

    # An empty body means no pods.
    server.serve(b"")
    assert summary(await recv(updates)) == (REMOVE, ("web-node-1",))


async def test_unreachable_at_start_is_not_ready(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    server = Server(fail=True)
    config = await start(nursery, server)
    assert await no_update(config.updates, 3 * PERIOD)
    assert not config.sources_ready.value
    server.fail = False
    server.serve(pod("late"))
    assert summary(await recv(config.updates)) == (ADD, ("late-node-1",))
    assert config.sources_ready.value


async def test_yaml_body(nursery: trio.Nursery, autojump_clock: trio.testing.MockClock) -> None:
    server = Server()
    server.serve(
        b"apiVersion: v1\nkind: Pod\nmetadata: {name: y}\nspec:\n  containers: [{name: c, image: i}]\n"
    )
    config = await start(nursery, server)
    assert summary(await recv(config.updates)) == (ADD, ("y-node-1",))


def test_parse_manifest_url_headers() -> None:
    assert parse_manifest_url_headers(["a:hello,b:again,c:world", "b:beautiful", " d : x:y ,"]) == {
        "a": ["hello"],
        "b": ["again", "beautiful"],
        "c": ["world"],
        "d": ["x:y"],
    }
    with pytest.raises(ValueError, match="malformed"):
        parse_manifest_url_headers(["novalue"])
