"""Property: whatever bytes a client sends, however they are split, delayed or cut off, the server answers
or closes that connection (under every timeout, on the virtual clock), nothing escapes it, nothing is
logged as a failure, and the next well-formed client is served."""

from __future__ import annotations

import itertools
import logging
from typing import Any

import hypothesis.strategies as st
import trio
import trio.testing
from hypothesis import HealthCheck, event, given, settings

from kubelet_trio.httpserver.asgi import App, Request, Response, Route
from kubelet_trio.httpserver.http11 import MAX_HEADER_BYTES
from tests.httpserver.wire import CLOSING_GET, MemoryListener, read_to_eof, serving

#: Longer than any way of serving one connection can take (timeouts included), in virtual seconds.
BOUND = 10 * 3600

FRAGMENTS = [
    b"GET ",
    b"POST ",
    b"get ",
    b"G\x00T ",
    b"/x/a",
    b"/x/%2F",
    b"/x/%00",
    b"/x/%zz",
    b"/read",
    b"/up",
    b"?q=1",
    b" HTTP/1.1\r\n",
    b" HTTP/1.0\r\n",
    b" HTTP/2.0\r\n",
    b"Host: h\r\n",
    b"Content-Length: 5\r\n",
    b"Content-Length: -1\r\n",
    b"Content-Length: 99999999999999999999\r\n",
    b"Content-Length: 5, 6\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"Transfer-Encoding: gzip\r\n",
    b"Connection: close\r\n",
    b"Connection: upgrade\r\nUpgrade: SPDY/3.1\r\n",
    b"Expect: 100-continue\r\n",
    b" folded\r\n",
    b"\r\n",
    b"5\r\nhello\r\n",
    b"0\r\n\r\n",
    b"ffffffffffffffffffff\r\n",
    b"zz\r\n",
    b"hello",
    b"\x00",
    b"\xff\xfe",
    b"\r",
    b"\n",
    b" ",
]
WELL_FORMED = [
    b"GET /x/a HTTP/1.1\r\nHost: h\r\n\r\n",
    b"POST /read HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello",
    b"POST /x/a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"POST /up HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: SPDY/3.1\r\n\r\nafter",
    b"GET /x/a HTTP/1.0\r\n\r\n",
]


def _mutated(base: bytes, at: int, junk: bytes, drop: int) -> bytes:
    at %= len(base) + 1
    return base[:at] + junk + base[at + drop :]


requests = st.one_of(
    st.binary(max_size=200),
    st.lists(st.sampled_from(FRAGMENTS), max_size=14).map(b"".join),
    st.lists(st.sampled_from(WELL_FORMED), min_size=1, max_size=3).map(b"".join),  # pipelined
    st.builds(
        _mutated,
        st.sampled_from(WELL_FORMED),
        st.integers(0, 200),
        st.binary(max_size=4) | st.sampled_from(FRAGMENTS),
        st.integers(0, 3),
    ),
    st.integers(MAX_HEADER_BYTES - 64, MAX_HEADER_BYTES + 70_000).map(
        lambda n: b"GET /x/a HTTP/1.1\r\nHost: h\r\nX-Big: " + b"a" * n + b"\r\n\r\n"
    ),
)


@st.composite
def sessions(draw: st.DrawFn) -> tuple[list[bytes], list[float], str]:
    """The bytes in chunks, a pause before each chunk, and how the client ends: it closes (anywhere,
    perhaps mid-request), half-closes, or just stays and reads."""
    data = draw(requests)
    cut = draw(st.sampled_from([len(data), len(data), len(data)]) | st.integers(0, len(data)))
    data = data[:cut]
    splits = sorted(set(draw(st.lists(st.integers(0, len(data)), max_size=6))))
    bounds = [0, *splits, len(data)]
    chunks = [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    pauses = draw(st.lists(st.sampled_from([0.0, 0.0, 1.0, 59.0, 61.0, 95.0]), min_size=len(chunks)))
    ending = draw(st.sampled_from(["close", "half-close", "stay"]))
    return chunks, pauses[: len(chunks)], ending


async def _name(request: Request) -> Response:
    return Response.text(request.params["name"])


ROUTER = App([Route("/x/{name}", _name, ("GET", "POST")), Route("/ok", _name)])


async def fuzz_app(scope: Any, receive: Any, send: Any) -> None:
    """Reads the body on ``/read``, takes the connection on ``/up`` (echoing for a while), else routes."""
    if scope["path"] == "/ok":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
    elif scope["path"] == "/read":
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})
    elif scope["path"] == "/up" and "kubelet.upgrade" in scope["extensions"]:
        stream = await scope["extensions"]["kubelet.upgrade"]["take"]()
        await stream.send_all(b"HTTP/1.1 101 Switching Protocols\r\n\r\n")
        with trio.move_on_after(100):
            while data := await stream.receive_some():
                await stream.send_all(data)
    else:
        await ROUTER(scope, receive, send)


class _Failures(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def _client(listener: MemoryListener, chunks: list[bytes], pauses: list[float], ending: str) -> bytes:
    """What the server answered before it closed (or the client did)."""
    stream = await listener.connect()
    received: list[bytes] = []

    async def read() -> None:
        received.append(await read_to_eof(stream))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read)
        try:
            for chunk, pause in zip(chunks, pauses, strict=True):
                await trio.sleep(pause)
                await stream.send_all(chunk)
            if ending == "half-close":
                await stream.send_eof()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the server closed first
        if ending == "close":
            await stream.aclose()
            nursery.cancel_scope.cancel()
    # "stay" and "half-close" end here only once the server has closed
    await stream.aclose()
    return b"".join(received)


async def _session(chunks: list[bytes], pauses: list[float], ending: str) -> bytes:
    with trio.fail_after(BOUND):
        async with serving(fuzz_app) as (server, listener):
            first = await _client(listener, chunks, pauses, ending)
            event(f"first client: {first[:12]!r} ({ending})")
            second = await listener.connect()
            await second.send_all(CLOSING_GET)
            answer = await read_to_eof(second)
            await trio.testing.wait_all_tasks_blocked()
            assert server.connections == 0
            return answer


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
@given(sessions())
def test_any_bytes_get_an_answer_or_a_close_and_the_server_serves_on(
    session: tuple[list[bytes], list[float], str],
) -> None:
    failures = _Failures()
    logging.getLogger("kubelet_trio").addHandler(failures)
    try:
        answer = trio.run(_session, *session, clock=trio.testing.MockClock(autojump_threshold=0))
    finally:
        logging.getLogger("kubelet_trio").removeHandler(failures)
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(b"\r\n\r\nok")
    assert not failures.records, [r.getMessage() for r in failures.records]
