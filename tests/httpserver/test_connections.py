"""Each connection is served on its own: idle and slow clients are closed on time, nothing of one request
is handed to the app again, and a failure while serving one client is logged, counted and answered 500
without touching the server or any other client. Time is virtual (``autojump_clock``)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.testing

from kubelet_trio.boundary import BoundaryErrors
from kubelet_trio.httpserver.http11 import (
    IDLE_TIMEOUT,
    MAX_DRAIN_BYTES,
    READ_TIMEOUT,
    STREAM_WRITE_TIMEOUT,
    WRITE_TIMEOUT,
    HttpServer,
)
from kubelet_trio.logs import record_fields
from tests.httpserver.wire import CLOSING_GET, Client, ask, counting_app, read_to_eof, serving


async def test_a_silent_connection_is_closed_and_the_server_serves_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls: list[str] = []
    async with serving(counting_app(calls)) as (server, listener):
        silent = await listener.connect()
        start = trio.current_time()
        assert await read_to_eof(silent) == b""
        assert trio.current_time() - start == IDLE_TIMEOUT
        assert (await ask(listener, CLOSING_GET)).status == 200
        assert calls == ["GET /ok"]
        assert server.connections == 0


async def test_a_kept_alive_connection_idles_out_without_a_replay(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls: list[str] = []
    async with serving(counting_app(calls)) as (_, listener):
        stream = await listener.connect()
        client = Client(stream)
        assert (await client.request("POST", "/run/ns/pod/app?cmd=date")).status == 200
        assert (await client.request("GET", "/pods")).status == 200
        start = trio.current_time()
        assert await read_to_eof(stream) == b""  # not a second answer to either request
        assert trio.current_time() - start == IDLE_TIMEOUT
        assert calls == ["POST /run/ns/pod/app", "GET /pods"]
        assert (await ask(listener, CLOSING_GET)).status == 200


async def test_a_head_sent_slowly_is_cut_off_when_the_idle_time_is_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls: list[str] = []
    async with serving(counting_app(calls)) as (_, listener):
        stream = await listener.connect()
        start = trio.current_time()
        closed_at: list[float] = []

        async def watch() -> None:
            await read_to_eof(stream)
            closed_at.append(trio.current_time() - start)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            await stream.send_all(b"GET /slow HTTP/1.1\r\n")
            with trio.move_on_after(3 * IDLE_TIMEOUT):
                while not closed_at:  # a header byte every 10 s, never the end of the head
                    await trio.sleep(10)
                    try:
                        await stream.send_all(b"x")
                    except trio.BrokenResourceError:
                        break
        assert closed_at == [IDLE_TIMEOUT]
        assert calls == []


async def test_a_body_that_stops_coming_is_a_disconnect_for_the_app(
    autojump_clock: trio.testing.MockClock,
) -> None:
    received: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        while not received or received[-1].get("more_body"):
            received.append(await receive())
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async with serving(app) as (_, listener):
        stream = await listener.connect()
        await stream.send_all(b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nhello")
        start = trio.current_time()
        raw = await read_to_eof(stream)
        assert trio.current_time() - start == READ_TIMEOUT
        assert received == [
            {"type": "http.request", "body": b"hello", "more_body": True},
            {"type": "http.disconnect"},
        ]
        assert raw.startswith(b"HTTP/1.1 200 OK\r\n")  # answered, then closed: the body is unfinished


async def test_a_client_that_does_not_read_its_response_is_dropped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls: list[str] = []
    async with serving(counting_app(calls, lambda _: b"x" * 100_000)) as (server, listener):
        stream = await listener.connect(lockstep=True)
        await stream.send_all(b"GET /big HTTP/1.1\r\nHost: h\r\n\r\n")
        await trio.sleep(WRITE_TIMEOUT - 1)
        assert server.connections == 1
        await trio.sleep(2)
        assert server.connections == 0
        assert (await ask(listener, CLOSING_GET)).status == 200


async def test_a_streamed_response_may_wait_for_its_reader_for_hours(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def follow(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for line in (b"one\n", b"two\n"):
            await send({"type": "http.response.body", "body": line, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    request = b"GET /containerLogs/ns/pod/app?follow=true HTTP/1.1\r\nHost: h\r\n\r\n"
    async with serving(follow) as (server, listener):
        paused = await listener.connect(lockstep=True)
        await paused.send_all(request)
        await trio.sleep(2 * 3600)  # a reader that stops for a while (kubectl logs -f into a paused pager)
        assert server.connections == 1
        raw = await read_to_eof(paused)  # then everything, and the idle close after it
        assert raw.startswith(b"HTTP/1.1 200 OK\r\n") and raw.endswith(b"two\n\r\n0\r\n\r\n")

        gone = await listener.connect(lockstep=True)
        await gone.send_all(request)
        await trio.sleep(STREAM_WRITE_TIMEOUT - 1)
        assert server.connections == 1
        await trio.sleep(2)
        assert server.connections == 0


async def test_an_unread_body_is_drained_to_keep_the_connection(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """As an app that answers 401 before reading anything does."""
    calls: list[str] = []
    async with serving(counting_app(calls)) as (_, listener):
        stream = await listener.connect()
        client = Client(stream)
        assert (await client.request("POST", "/one", body=b"a" * 1000)).status == 200
        assert (await client.request("POST", "/two", body=b"b" * MAX_DRAIN_BYTES)).status == 200
        assert calls == ["POST /one", "POST /two"]


async def test_an_unread_body_too_big_to_drain_closes_the_connection(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls: list[str] = []
    async with serving(counting_app(calls)) as (_, listener):
        stream = await listener.connect()
        size = 2 * MAX_DRAIN_BYTES
        head = f"POST /big HTTP/1.1\r\nHost: h\r\nContent-Length: {size}\r\n\r\n".encode()
        await stream.send_all(head + b"x" * size + b"GET /next HTTP/1.1\r\nHost: h\r\n\r\n")
        start = trio.current_time()
        raw = await read_to_eof(stream)
        assert trio.current_time() == start  # closed at once, not after a timeout
        assert raw.startswith(b"HTTP/1.1 200 OK\r\n") and raw.count(b"HTTP/1.1") == 1
        assert calls == ["POST /big"]


async def test_an_unread_body_that_stops_coming_closes_the_connection(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls: list[str] = []
    async with serving(counting_app(calls)) as (_, listener):
        stream = await listener.connect()
        await stream.send_all(b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\nabc")
        start = trio.current_time()
        assert (await read_to_eof(stream)).startswith(b"HTTP/1.1 200 OK\r\n")
        assert trio.current_time() - start == READ_TIMEOUT
        assert calls == ["POST /x"]


async def test_an_app_that_fails_gets_its_client_a_500_and_nobody_else_hurt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """On loopback sockets, so that the log names the peer; real time, bounded."""
    gate = trio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["path"] == "/slow":
            await gate.wait()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"slow"})
            return
        raise KeyError("a corner only this request reaches")

    errors = BoundaryErrors()
    with trio.fail_after(10), caplog.at_level(logging.ERROR):
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        server = HttpServer(app, errors=errors)
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run, listeners)
            sibling = await trio.open_tcp_stream("127.0.0.1", port)
            await sibling.send_all(b"GET /slow HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
            failing = await trio.open_tcp_stream("127.0.0.1", port)
            await failing.send_all(b"GET /fail?token=s3cret HTTP/1.1\r\nHost: h\r\n\r\n")
            raw = await read_to_eof(failing)  # answered, then closed
            client_port = failing.socket.getsockname()[1]
            gate.set()
            assert (await read_to_eof(sibling)).endswith(b"slow")
            later = await trio.open_tcp_stream("127.0.0.1", port)
            await later.send_all(b"GET /slow HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
            assert (await read_to_eof(later)).startswith(b"HTTP/1.1 200 OK\r\n")
            for stream in (sibling, failing, later):
                await stream.aclose()
            nursery.cancel_scope.cancel()
    assert raw.startswith(b"HTTP/1.1 500 Internal Server Error\r\n")
    assert errors.counts == {"http": 1}
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert record.getMessage() == "Peer failed; closing it"
    assert record_fields(record) == {
        "boundary": "http",
        "peer": f"127.0.0.1:{client_port}",
        "request": "GET /fail",  # no query: it may carry a token
    }
    assert isinstance(record.exc_info and record.exc_info[1], KeyError)


async def test_a_failure_before_anything_was_written_is_still_answered_500(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        raise RuntimeError("after the start, before the body")

    errors = BoundaryErrors()
    with caplog.at_level(logging.ERROR):
        async with serving(app, errors=errors) as (_, listener):
            answer = await ask(listener, b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n")
    assert (answer.status, answer.body) == (500, b"500 Internal Server Error")
    assert errors.counts == {"http": 1}
    assert len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 1


async def test_a_failure_after_the_response_began_closes_the_connection(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"partial", "more_body": True})
        async with trio.open_nursery() as nursery:  # a group, as from a streamed response's tasks
            nursery.start_soon(_raise)
            await trio.sleep_forever()

    errors = BoundaryErrors()
    with caplog.at_level(logging.ERROR):
        async with serving(app, errors=errors) as (_, listener):
            stream = await listener.connect()
            await stream.send_all(b"GET /logs HTTP/1.1\r\nHost: h\r\n\r\n")
            raw = await read_to_eof(stream)
    assert raw.startswith(b"HTTP/1.1 200 OK\r\n") and b"partial" in raw and not raw.endswith(b"0\r\n\r\n")
    assert errors.counts == {"http": 1}
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert record.getMessage() == "Peer failed; closing it"


async def _raise() -> None:
    raise ValueError("broken stream")


async def test_a_client_that_goes_away_is_no_failure(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    async def follow(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        while True:
            await send({"type": "http.response.body", "body": b"line\n", "more_body": True})
            await trio.sleep(1)

    errors = BoundaryErrors()
    with caplog.at_level(logging.WARNING):
        async with serving(follow, errors=errors) as (server, listener):
            stream = await listener.connect()
            await stream.send_all(b"GET /logs HTTP/1.1\r\nHost: h\r\n\r\n")
            received = b""
            while b"line" not in received:
                received += await stream.receive_some()
            await stream.aclose()
            await trio.sleep(5)
            assert server.connections == 0
    assert not errors.counts
    assert not caplog.records
