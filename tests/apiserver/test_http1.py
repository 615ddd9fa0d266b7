"""The API client's HTTP/1.1 requests (:mod:`kubelet_trio.client.http1`) against scripted servers on
loopback: answer framings, keep-alive and its limits, and connection failures."""

from __future__ import annotations

import functools
import gzip
import json
from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

from kubelet_trio.client import RetryPolicy, open_api_client
from kubelet_trio.client.errors import ApiUnavailable, Gone, NotFound
from kubelet_trio.client.http1 import Http1Pool, TransportError

#: The server's answer to request ``n`` (its head given); None hangs up instead, and an answer ending
#: with :data:`CLOSE` is sent without it and the connection then closed.
Script = Callable[[int, bytes], bytes | None]
CLOSE = b"<close>"


class Server:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.accepted = 0
        self.requests: list[bytes] = []
        self.port = 0

    async def handle(self, stream: trio.SocketStream) -> None:
        self.accepted += 1
        buffer = b""
        async with stream:
            try:
                while True:
                    while b"\r\n\r\n" not in buffer:
                        data = await stream.receive_some(65536)
                        if not data:
                            return
                        buffer += data
                    head, _, buffer = buffer.partition(b"\r\n\r\n")
                    length = 0
                    for line in head.split(b"\r\n")[1:]:
                        name, _, value = line.partition(b":")
                        if name.strip().lower() == b"content-length":
                            length = int(value)
                    while len(buffer) < length:
                        buffer += await stream.receive_some(65536)
                    body, buffer = buffer[:length], buffer[length:]
                    self.requests.append(head + b"\r\n\r\n" + body)
                    answer = self.script(len(self.requests) - 1, head)
                    if answer is None:
                        return  # hang up without answering
                    await stream.send_all(answer.removesuffix(CLOSE))
                    if answer.endswith(CLOSE):
                        return
            except trio.BrokenResourceError:
                return


Serve = Callable[[Script], Awaitable[Server]]


@pytest.fixture
def serve(nursery: trio.Nursery) -> Serve:
    async def start(script: Script) -> Server:
        server = Server(script)
        serving = functools.partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1")
        [listener] = await nursery.start(serving)
        server.port = listener.socket.getsockname()[1]
        return server

    return start


def answer(body: bytes, *extra: str, code: str = "200 OK") -> bytes:
    head = [f"HTTP/1.1 {code}", "Content-Type: application/json", *extra]
    if not any(h.lower().startswith(("transfer-encoding", "content-length")) for h in extra):
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def chunked(body: bytes, size: int = 7) -> bytes:
    out = b""
    for i in range(0, len(body), size):
        part = body[i : i + size]
        out += b"%x;ext=1\r\n" % len(part) + part + b"\r\n"
    return out + b"0\r\nX-Trailer: t\r\n\r\n"


OBJ = {"kind": "Pod", "metadata": {"name": "web", "labels": {"a": "b" * 300}}}
RAW = json.dumps(OBJ).encode()


async def test_answer_framings_are_read_and_the_connection_kept(serve: Serve) -> None:
    framings = [
        answer(RAW),
        answer(chunked(RAW), "Transfer-Encoding: chunked"),
        answer(gzip.compress(RAW), "Content-Encoding: gzip"),
        b"HTTP/1.1 100 Continue\r\n\r\n" + answer(RAW),
        answer(b"", code="204 No Content"),
        answer(RAW),
    ]
    server = await serve(lambda n, _head: framings[n])
    async with open_api_client(server=f"http://127.0.0.1:{server.port}", qps=0) as client:
        for n in range(4):  # the gzip answer to a list page, the only request that asks for it
            assert await client.get("/api/v1/namespaces/default/pods/web", listing=n == 2) == OBJ
        assert await client.delete("/api/v1/namespaces/default/pods/web") is None
        assert await client.merge_patch("/api/v1/namespaces/default/pods/web/status", {"a": 1}) == OBJ
        assert client.wire is not None and client.wire.opened == 1
    assert server.accepted == 1
    assert [n for n, request in enumerate(server.requests) if b"Accept-Encoding" in request] == [2]
    patch = server.requests[5]
    assert patch.startswith(b"PATCH /api/v1/namespaces/default/pods/web/status HTTP/1.1\r\n")
    assert b"\r\nContent-Type: application/merge-patch+json\r\n" in patch
    assert b"\r\nContent-Length: 8\r\n" in patch and patch.endswith(b'{"a": 1}')
    assert f"\r\nHost: 127.0.0.1:{server.port}\r\n".encode() in patch


async def test_close_and_unframed_answers_end_the_connection(serve: Serve) -> None:
    def script(n: int, _head: bytes) -> bytes | None:
        if n == 0:
            return answer(RAW, "Connection: close")
        return None if n == 1 else answer(RAW)

    server = await serve(script)
    async with open_api_client(
        server=f"http://127.0.0.1:{server.port}", qps=0, retry=RetryPolicy(max_attempts=2, initial=0)
    ) as client:
        assert await client.get("/a") == OBJ  # Connection: close: the next request dials again
        assert await client.get("/b") == OBJ  # the server hangs up on the 2nd request: retried on a 3rd
        assert server.accepted == 3


async def test_an_idle_connection_the_server_closed_is_not_reused(serve: Serve) -> None:
    server = await serve(lambda n, _head: answer(RAW) + CLOSE if n == 0 else answer(RAW))
    pool = Http1Pool("127.0.0.1", server.port, None)
    try:
        assert (await pool.request("GET", "/a", [], None)).content == RAW
        [kept] = pool.idle  # nothing said the server would close it...
        sock = kept.socket()
        assert sock is not None
        await trio.lowlevel.wait_readable(sock)  # ...until its end of the stream arrives
        assert kept.peer_closed()
        assert (await pool.request("GET", "/a", [], None)).content == RAW
        assert pool.opened == 2 and server.accepted == 2
        [kept] = pool.idle
        assert not kept.peer_closed()
    finally:
        await pool.aclose()


async def test_idle_connections_expire_on_trio_time(
    serve: Serve, autojump_clock: trio.testing.MockClock
) -> None:
    server = await serve(lambda _n, _head: answer(RAW))
    pool = Http1Pool("127.0.0.1", server.port, None, keepalive_expiry=60.0, max_idle=1)
    try:
        await pool.request("GET", "/a", [], None)
        await trio.sleep(59)
        await pool.request("GET", "/a", [], None)
        assert pool.opened == 1
        await trio.sleep(61)
        await pool.request("GET", "/a", [], None)
        assert pool.opened == 2
        async with trio.open_nursery() as nursery:  # two at once: only one stays idle (max_idle)
            for _ in range(2):
                nursery.start_soon(pool.request, "GET", "/a", [], None)
        assert len(pool.idle) == 1
    finally:
        await pool.aclose()


async def test_connections_a_burst_left_idle_are_closed_once_expired(
    serve: Serve, autojump_clock: trio.testing.MockClock
) -> None:
    """A request every 10 s reuses the newest idle connection; the four others a burst of five left
    below it are closed when their minute is up, not kept until the server closes them."""
    server = await serve(lambda _n, _head: answer(RAW))
    pool = Http1Pool("127.0.0.1", server.port, None, keepalive_expiry=60.0)
    try:
        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(pool.request, "GET", "/a", [], None)
        assert pool.opened == 5 and len(pool.idle) == len(pool.open) == 5
        for _ in range(5):
            await trio.sleep(10)
            await pool.request("GET", "/a", [], None)
        assert len(pool.idle) == 5  # 50 s: none expired yet
        for _ in range(2):
            await trio.sleep(10)
            await pool.request("GET", "/a", [], None)
        assert len(pool.idle) == len(pool.open) == 1 and pool.opened == 5
    finally:
        await pool.aclose()


async def test_a_zero_keepalive_expiry_keeps_no_connection(serve: Serve) -> None:
    server = await serve(lambda _n, _head: answer(RAW))
    pool = Http1Pool("127.0.0.1", server.port, None, keepalive_expiry=0.0)
    try:
        for _ in range(2):
            assert (await pool.request("GET", "/a", [], None)).content == RAW
            assert pool.idle == [] and not pool.open
        assert pool.opened == 2
    finally:
        await pool.aclose()


async def test_max_connections_makes_requests_wait(serve: Serve) -> None:
    release = trio.Event()
    answered = 0

    async def slow_handle(stream: trio.SocketStream) -> None:
        nonlocal answered
        async with stream:
            await stream.receive_some(65536)
            await release.wait()
            answered += 1
            await stream.send_all(answer(RAW, "Connection: close"))

    async with trio.open_nursery() as nursery:
        [listener] = await nursery.start(functools.partial(trio.serve_tcp, slow_handle, 0, host="127.0.0.1"))
        pool = Http1Pool("127.0.0.1", listener.socket.getsockname()[1], None, max_connections=2)
        async with trio.open_nursery() as requests:
            for _ in range(3):
                requests.start_soon(pool.request, "GET", "/a", [], None)
            await trio.testing.wait_all_tasks_blocked()
            assert pool.opened == 2  # the third waits for a free connection
            release.set()
        assert pool.opened == 3 and answered == 3
        nursery.cancel_scope.cancel()


async def test_a_cancelled_request_closes_its_connection(serve: Serve) -> None:
    server = await serve(
        lambda n, _head: b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial" if n == 0 else answer(RAW)
    )
    pool = Http1Pool("127.0.0.1", server.port, None)
    try:
        with trio.move_on_after(0.5) as scope:
            await pool.request("GET", "/a", [], None)  # the rest of the body never comes
        assert scope.cancelled_caught and not pool.idle
        assert (await pool.request("GET", "/b", [], None)).content == RAW
        assert pool.opened == 2
    finally:
        await pool.aclose()


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (b"SSH-2.0-OpenSSH\r\n\r\n", "malformed answer: illegal status line"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "malformed answer: illegal header line"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "illegal chunk header"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", "malformed answer: bad Content-Length"),
        # gzip the request did not ask for is not decoded
        (b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc", "not asked for"),
    ],
)
async def test_an_answer_that_is_not_http_is_a_transport_error(
    serve: Serve, reply: bytes, message: str
) -> None:
    server = await serve(lambda _n, _head: reply)
    pool = Http1Pool("127.0.0.1", server.port, None)
    try:
        with pytest.raises(TransportError, match=rf"^127\.0\.0\.1:{server.port}: .*{message}"):
            await pool.request("GET", "/a", [], None)
        assert not pool.idle
    finally:
        await pool.aclose()
    async with open_api_client(
        server=f"http://127.0.0.1:{server.port}", qps=0, retry=RetryPolicy(max_attempts=2, initial=0)
    ) as client:
        with pytest.raises(ApiUnavailable, match=rf"GET /a: TransportError: .*{message}"):
            await client.get("/a")


async def test_a_refused_connection_is_unavailable_and_an_error_status_typed(serve: Serve) -> None:
    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        async with open_api_client(
            server=f"http://127.0.0.1:{port}", qps=0, retry=RetryPolicy(max_attempts=1)
        ) as client:
            with pytest.raises(ApiUnavailable, match=rf"GET /a: TransportError: connect 127.0.0.1:{port}"):
                await client.get("/a")
    status = json.dumps(
        {"kind": "Status", "code": 404, "reason": "NotFound", "message": 'pods "x" not found'}
    )
    server = await serve(lambda _n, _head: answer(status.encode(), code="404 Not Found"))
    async with open_api_client(server=f"http://127.0.0.1:{server.port}", qps=0) as client:
        with pytest.raises(NotFound, match='pods "x" not found'):
            await client.get("/api/v1/namespaces/default/pods/x")


def event(kind: str, name: str) -> bytes:
    return json.dumps({"type": kind, "object": {"metadata": {"name": name}}}).encode() + b"\n"


async def test_a_watch_streams_events_split_anywhere_and_a_cut_ends_it_with_an_error(serve: Serve) -> None:
    body = event("ADDED", "a") + event("MODIFIED", "a") + event("DELETED", "a")
    pieces = chunked(body, size=5).removesuffix(b"0\r\nX-Trailer: t\r\n\r\n")
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"

    def script(n: int, _head: bytes) -> bytes | None:
        if n == 0:  # a clean end of the watch (the server's timeoutSeconds)
            return head + chunked(body, size=5)
        return head + pieces + b'7\r\n{"type"' + CLOSE  # cut inside an event

    server = await serve(script)
    async with open_api_client(server=f"http://127.0.0.1:{server.port}", qps=0) as client:
        async with client.open_watch("/api/v1/pods", {"resourceVersion": "5"}) as events:
            got = [(e.type, e.object["metadata"]["name"]) async for e in events]
        assert got == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
        async with client.open_watch("/api/v1/pods") as events:
            got_events = [e async for e in events]
        assert [e.type for e in got_events] == ["ADDED", "MODIFIED", "DELETED", "ERROR"]
        assert "watch stream broken: TransportError" in got_events[-1].object["message"]
        assert not got_events[-1].undecodable
        assert client.wire is not None and not client.wire.idle  # watch connections are not kept
    assert server.requests[0].startswith(b"GET /api/v1/pods?resourceVersion=5&watch=true HTTP/1.1\r\n")
    assert b"Accept-Encoding" not in server.requests[0]


async def test_a_watch_refused_with_a_status_raises_it(serve: Serve) -> None:
    gone = json.dumps({"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}).encode()
    server = await serve(lambda _n, _head: answer(gone, code="410 Gone"))
    async with open_api_client(server=f"http://127.0.0.1:{server.port}", qps=0) as client:
        with pytest.raises(Gone, match="too old"):
            async with client.open_watch("/api/v1/pods", {"resourceVersion": "1"}):
                pass
