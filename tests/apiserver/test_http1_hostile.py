"""The API client's HTTP/1.1 (:mod:`kubelet_trio.client.http1`) against hostile servers: raw scripted
answers on loopback, one test per way an answer can be wrong, each saying what RFC 9112 (or RFC 9110)
asks of the client. Every answer is judged within :data:`BUDGET` seconds of real time: a clear error
naming the endpoint, or the right answer; never a 200 with wrong bytes, never a wait for the deadline."""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import os
import resource
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import trio

import kubelet_trio.client.http1 as http1
from kubelet_trio.client import ApiClientError, ApiUnavailable, KubeConfig, RetryPolicy, open_api_client
from kubelet_trio.client.watch import MAX_EVENT

#: Real seconds within which every answer here is judged (generous: the machine may be busy).
BUDGET = 15.0

#: What the server does for one request: writes to the stream, and raises :class:`Hangup` to end the
#: connection.
Act = Callable[[trio.SocketStream], Awaitable[None]]


class Hangup(Exception):
    """Ends the server's side of a connection."""


class Server:
    """Per connection, reads requests (a head, then a ``Content-Length`` body) and runs
    ``script(connection, request)`` for each; records the request heads and what was sent."""

    def __init__(self, script: Callable[[int, int], Act]) -> None:
        self.script = script
        self.accepted = 0
        self.heads: list[bytes] = []
        self.port = 0
        self.complete: list[bool] = []  # per streamed body: whether all of it was written

    async def handle(self, stream: trio.SocketStream) -> None:
        connection = self.accepted
        self.accepted += 1
        buffer = b""
        async with stream:
            with contextlib.suppress(Hangup, trio.BrokenResourceError, trio.ClosedResourceError):
                for n in range(1_000_000):
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
                    buffer = buffer[length:]
                    self.heads.append(head)
                    await self.script(connection, n)(stream)


def send(data: bytes) -> Act:
    """Answer, and keep the connection for the next request."""

    async def act(stream: trio.SocketStream) -> None:
        await stream.send_all(data)

    return act


def send_and_hold(data: bytes) -> Act:
    """Answer, then say nothing more, read nothing more, until the client hangs up."""

    async def act(stream: trio.SocketStream) -> None:
        await stream.send_all(data)
        while await stream.receive_some(65536):
            pass
        raise Hangup

    return act


def hang_up(_stream: trio.SocketStream) -> Awaitable[None]:
    raise Hangup


def head(*fields: str, status: str = "200 OK") -> bytes:
    return ("\r\n".join([f"HTTP/1.1 {status}", *fields]) + "\r\n\r\n").encode()


def answer(body: bytes, *fields: str) -> bytes:
    return head("Content-Type: application/json", f"Content-Length: {len(body)}", *fields) + body


OBJ = {"kind": "Pod", "metadata": {"name": "web"}}
RAW = json.dumps(OBJ).encode()


@pytest.fixture
def serve(nursery: trio.Nursery) -> Callable[[Callable[[int, int], Act]], Awaitable[Server]]:
    async def start(script: Callable[[int, int], Act]) -> Server:
        server = Server(script)
        serving = functools.partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1")
        [listener] = await nursery.start(serving)
        server.port = listener.socket.getsockname()[1]
        return server

    return start


Serve = Callable[[Callable[[int, int], Act]], Awaitable[Server]]


@contextlib.asynccontextmanager
async def open_pool(server: Server) -> AsyncIterator[http1.Http1Pool]:
    pool = http1.Http1Pool("127.0.0.1", server.port, None)
    try:
        yield pool
    finally:
        await pool.aclose()


async def refused(server: Server, match: str) -> str:
    """The pool's error for the server's answer (which holds the connection open after it, so only the
    client's reading of the answer can end the request); it names the endpoint and says ``match``."""
    async with open_pool(server) as pool:
        with trio.fail_after(BUDGET), pytest.raises(http1.TransportError) as caught:
            await pool.request("GET", "/api/v1/namespaces/default/pods/web", [], None)
        assert not pool.idle
    message = str(caught.value)
    assert message.startswith(f"127.0.0.1:{server.port}: ")
    assert match in message
    return message


# -- wrong answers that must not come up as 200 ------------------------------------------------------


async def test_conflicting_content_lengths_are_an_error_not_a_spliced_answer(serve: Serve) -> None:
    """RFC 9112 6.3: a response with conflicting Content-Length values has invalid framing, an
    unrecoverable error: the client closes the connection and discards the response."""
    second = answer(b'{"kind": "Secret"}')
    reply = head("Content-Length: 2", f"Content-Length: {2 + len(second)}") + b"{}" + second
    server = await serve(lambda _c, _n: send_and_hold(reply))
    await refused(server, "conflicting Content-Length")


async def test_a_transfer_coding_before_chunked_is_an_error_not_a_body(serve: Serve) -> None:
    """RFC 9112 6.1, 7.4 and RFC 9110 10.1.4: the body is what is left once every transfer coding is
    undone, and codings other than chunked need the request's TE; this client sends none and cannot undo
    ``gzip``, so it has no body to hand up."""
    packed = gzip.compress(RAW)
    reply = head("Transfer-Encoding: gzip, chunked") + b"%x\r\n" % len(packed) + packed + b"\r\n0\r\n\r\n"
    server = await serve(lambda _c, _n: send_and_hold(reply))
    await refused(server, "Transfer-Encoding")


@pytest.mark.parametrize("status", ["2000 OK", "20 OK", "2x0 OK", "-200 OK"])
async def test_a_status_code_of_other_than_three_digits_is_an_error(serve: Serve, status: str) -> None:
    """RFC 9112 4: status-code = 3DIGIT; ``2000`` is no status, not 200."""
    reply = answer(RAW).replace(b"200 OK", status.encode(), 1)
    server = await serve(lambda _c, _n: send_and_hold(reply))
    await refused(server, "status line")


# -- answers that must not make the client wait for the deadline -------------------------------------


async def test_a_folded_field_line_is_part_of_the_field_before_it(serve: Serve) -> None:
    """RFC 9112 5.2: a user agent replaces each obs-fold in a response with SP before interpreting the
    field value; a folded ``Content-Length: 100`` belongs to the field above and frames nothing."""
    reply = head("Content-Length: 2", "X-Note: folded", " Content-Length: 100") + b"{}"
    server = await serve(lambda _c, _n: send_and_hold(reply))
    async with open_pool(server) as pool:
        with trio.fail_after(BUDGET):
            response = await pool.request("GET", "/a", [], None)
    assert (response.status_code, response.content) == (200, b"{}")
    assert response.headers.get("x-note") == "folded Content-Length: 100"


@pytest.mark.parametrize("size", [b"-2", b"5_0", b"0x5", b"+5", b" 5", b"5 5"])
async def test_a_chunk_size_that_is_not_hex_digits_is_an_error(serve: Serve, size: bytes) -> None:
    """RFC 9112 7.1: chunk-size = 1*HEXDIG; a sign, a ``0x`` prefix or an underscore is malformed
    framing, refused at once (never read as a size, never waited on)."""
    reply = head("Transfer-Encoding: chunked") + size + b"\r\n" + b"{}" + b"x" * 3 + b"\r\n0\r\n\r\n"
    server = await serve(lambda _c, _n: send_and_hold(reply))
    await refused(server, "chunk header")


async def test_bare_lf_line_endings_are_read(serve: Serve) -> None:
    """RFC 9112 2.2: a recipient MAY recognize a single LF as the line terminator of the start-line and
    fields; the client does, so such an answer is read at once, not waited on."""
    reply = b"HTTP/1.1 200 OK\nContent-Type: application/json\nContent-Length: %d\n\n" % len(RAW) + RAW
    server = await serve(lambda _c, _n: send_and_hold(reply))
    async with open_pool(server) as pool:
        with trio.fail_after(BUDGET):
            response = await pool.request("GET", "/a", [], None)
    assert (response.status_code, response.content) == (200, RAW)


async def test_an_endless_trailer_section_is_cut_off(serve: Serve) -> None:
    """RFC 9112 7.1.2 and RFC 9110 5.4: the trailer section ends with an empty line, and a client may
    bound the field lines it accepts; one that never ends is an error at the bound, not a wait."""

    def script(_c: int, _n: int) -> Act:
        async def act(stream: trio.SocketStream) -> None:
            await stream.send_all(head("Transfer-Encoding: chunked") + b"2\r\n{}\r\n0\r\n")
            while True:
                await stream.send_all(b"X-Trailer: more\r\n" * 64)

        return act

    server = await serve(script)
    await refused(server, "Receive buffer too long")


# -- connection management ---------------------------------------------------------------------------


@pytest.mark.parametrize("tokens", ["keep-alive, close", "close, keep-alive", "Keep-Alive ,CLOSE"])
async def test_a_close_token_among_others_ends_the_connection(serve: Serve, tokens: str) -> None:
    """RFC 9112 9.6: a client that receives a ``close`` connection option MUST cease sending requests
    on that connection, whatever other options come with it."""

    def script(connection: int, n: int) -> Act:
        if n:
            return hang_up  # a request on a connection the server said it would close: reset
        return send(answer(RAW, f"Connection: {tokens}") if connection == 0 else answer(RAW))

    server = await serve(script)
    async with open_pool(server) as pool:
        with trio.fail_after(BUDGET):
            for _ in range(2):
                assert (await pool.request("GET", "/a", [], None)).content == RAW
    assert server.accepted == 2


async def test_a_header_value_with_cr_or_lf_is_refused_before_sending(serve: Serve) -> None:
    """RFC 9110 5.5 and 2.2: a field value never contains CR, LF or NUL, and a sender MUST NOT generate
    what the grammar excludes; a value with them would put a field of its own on the wire."""
    server = await serve(lambda _c, _n: send(answer(RAW)))
    async with open_pool(server) as pool:
        with pytest.raises(http1.InvalidRequest, match="'Authorization'") as caught:
            await pool.request("GET", "/a", [("Authorization", "Bearer s3cr3t\r\nX-Injected: 1")], None)
    assert "s3cr3t" not in str(caught.value)  # the value may be a credential: it is not echoed
    config = KubeConfig(server=f"http://127.0.0.1:{server.port}", token="s3cr3t\r\nX-Injected: 1")
    async with open_api_client(config, qps=0) as client:
        with pytest.raises(ApiClientError) as api_caught:
            await client.get("/api/v1/namespaces/default/pods/web")
        assert not isinstance(api_caught.value, ApiUnavailable)  # not retried: it would fail again
        with pytest.raises(ApiClientError, match="watch /api/v1/pods"):
            async with client.open_watch("/api/v1/pods"):
                pass
    assert server.accepted == 0 and not server.heads


async def test_connections_are_reused_with_more_than_1024_descriptors_open(serve: Serve) -> None:
    """RFC 9112 9.3: a client keeps a persistent connection for the requests that follow. With more than
    1 024 descriptors open (where ``select()`` fails), 50 requests still take one connection."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 1400
    if soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {wanted}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    held: list[int] = []
    try:
        held.extend(os.open(os.devnull, os.O_RDONLY) for _ in range(1100))
        server = await serve(lambda _c, _n: send(answer(RAW)))
        async with open_pool(server) as pool:
            with trio.fail_after(BUDGET):
                for _ in range(50):
                    assert (await pool.request("GET", "/a", [], None)).content == RAW
            [connection] = pool.idle
            sock = connection.socket()
            assert sock is not None and sock.fileno() >= 1024
        assert server.accepted == 1
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# -- bounds: compression, bodies, watch events -------------------------------------------------------


@functools.cache
def bomb() -> bytes:
    """128 MiB of zeros as gzip: about 127 KB on the wire (made without holding the 128 MiB)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(1 << 20)
    return b"".join([*(packer.compress(block) for _ in range(128)), packer.flush()])


async def test_gzip_is_not_asked_for_and_not_decoded_unless_the_request_asks(serve: Serve) -> None:
    """RFC 9110 12.5.3: without Accept-Encoding a server may choose any coding, which does not mean the
    client can process it: the client asks for gzip only for list pages, and refuses (never expands) a
    coding it did not ask for; asked for, gzip is decoded."""

    def script(_c: int, _n: int) -> Act:
        if len(server.heads) == 1:  # the first request, not asking for gzip
            return send(answer(bomb(), "Content-Encoding: gzip"))
        return send(answer(gzip.compress(RAW), "Content-Encoding: gzip"))

    server = await serve(script)
    async with open_pool(server) as pool:
        with trio.fail_after(BUDGET):
            with pytest.raises(http1.TransportError, match=f"127.0.0.1:{server.port}: .*not asked for"):
                await pool.request("GET", "/a", [], None)
            response = await pool.request("GET", "/list", [], None, compressed=True)
    assert response.content == RAW
    assert b"accept-encoding" not in server.heads[0].lower()
    assert b"\r\nAccept-Encoding: gzip" in server.heads[1]


async def test_a_gzip_bomb_asked_for_stops_at_the_bound(serve: Serve) -> None:
    """RFC 9110 8.4.1: a content coding is undone by the recipient, which may bound what it expands:
    127 KB that decode to 128 MiB stop at the request's bound, not in memory."""
    server = await serve(lambda _c, _n: send(answer(bomb(), "Content-Encoding: gzip")))
    async with open_pool(server) as pool:
        with trio.fail_after(BUDGET), pytest.raises(http1.AnswerTooLarge, match="8388608 bytes"):
            await pool.request("GET", "/list", [], None, compressed=True, max_body=8 * 1024 * 1024)


async def test_an_answer_over_the_bound_is_refused_by_its_length_or_as_it_arrives(serve: Serve) -> None:
    """RFC 9112 6.3: the framing says how long a body is, not that the client must hold it: a declared
    length over the bound is refused at once, a chunked body when it passes the bound (the API client's
    bound on an object: 64 MiB), and neither is retried."""
    total = 80 * 1024 * 1024
    piece = b"x" * 65536

    def script(connection: int, _n: int) -> Act:
        if connection == 0:
            return send_and_hold(head("Content-Length: 10000000000"))

        async def act(stream: trio.SocketStream) -> None:
            server.complete.append(False)
            await stream.send_all(head("Transfer-Encoding: chunked"))
            for _ in range(total // len(piece)):
                await stream.send_all(b"%x\r\n" % len(piece) + piece + b"\r\n")
            await stream.send_all(b"0\r\n\r\n")
            server.complete[-1] = True
            raise Hangup

        return act

    server = await serve(script)
    message = await refused(server, "10000000000 bytes")
    assert "allowed" in message
    async with open_api_client(server=f"http://127.0.0.1:{server.port}", qps=0) as client:
        with trio.fail_after(BUDGET), pytest.raises(ApiUnavailable, match="67108864 bytes allowed"):
            await client.get("/api/v1/namespaces/default/pods/web")
    assert server.accepted == 2  # the first connection, then one attempt
    assert server.complete == [False]  # the client stopped reading: it held at most the bound


def watch_head() -> bytes:
    return head("Content-Type: application/json", "Transfer-Encoding: chunked")


async def test_a_64_mib_watch_line_is_refused_in_linear_time(serve: Serve) -> None:
    """RFC 9112 7.1 frames the watch body; each event is one line of JSON, at most 16 MiB as client-go
    decodes them. One 64 MiB line ends the watch with an undecodable ERROR event (a relist) after the
    first 16 MiB, within the budget; the quadratic framing took 47 s of CPU on it."""
    piece = b"y" * 65536

    def script(_c: int, _n: int) -> Act:
        async def act(stream: trio.SocketStream) -> None:
            start = b'{"type": "ADDED", "object": {"x": "'
            await stream.send_all(watch_head() + b"%x\r\n%b\r\n" % (len(start), start))
            for _ in range(64 * 1024 * 1024 // len(piece)):
                await stream.send_all(b"%x\r\n" % len(piece) + piece + b"\r\n")
            while await stream.receive_some(65536):
                pass
            raise Hangup

        return act

    server = await serve(script)
    async with open_api_client(server=f"http://127.0.0.1:{server.port}", qps=0) as client:
        with trio.fail_after(BUDGET):
            async with client.open_watch("/api/v1/pods") as events:
                got = [event async for event in events]
    assert [(e.type, e.undecodable) for e in got] == [("ERROR", True)]
    assert f"longer than {MAX_EVENT} bytes" in got[0].object["message"]


async def test_a_large_watch_event_in_small_pieces_is_framed_in_linear_time(serve: Serve) -> None:
    """RFC 9112 7.1.3: the content is the chunks' data concatenated, whatever the chunk sizes; a 12 MiB
    event sent in 12 288 chunks of 1 KiB is one event, framed in time linear in its size (joining and
    splitting again on each piece is quadratic: hours for this one)."""
    big = {"metadata": {"name": "big"}, "data": "z" * (12 << 20)}
    body = json.dumps({"type": "ADDED", "object": big}).encode() + b"\n"

    def script(_c: int, _n: int) -> Act:
        async def act(stream: trio.SocketStream) -> None:
            chunks = [body[i : i + 1024] for i in range(0, len(body), 1024)]
            await stream.send_all(watch_head())
            for start in range(0, len(chunks), 256):
                batch = chunks[start : start + 256]
                await stream.send_all(b"".join(b"%x\r\n%b\r\n" % (len(c), c) for c in batch))
            await stream.send_all(b"0\r\n\r\n")
            while await stream.receive_some(65536):
                pass
            raise Hangup

        return act

    server = await serve(script)
    async with open_api_client(server=f"http://127.0.0.1:{server.port}", qps=0) as client:
        with trio.fail_after(BUDGET):
            async with client.open_watch("/api/v1/pods") as events:
                got = [event async for event in events]
    assert [(e.type, e.object["metadata"]["name"]) for e in got] == [("ADDED", "big")]
    assert len(got[0].object["data"]) == 12 << 20


async def test_a_broken_answer_is_not_retried_into_a_hang(serve: Serve) -> None:
    """RFC 9112 6.3: a response whose framing is invalid is an error; the API client reports it as
    unavailable, naming the server, after its retries, well within its deadline."""
    server = await serve(lambda _c, _n: send_and_hold(answer(RAW).replace(b"200", b"2000", 1)))
    retry = RetryPolicy(max_attempts=3, initial=0.01)
    async with open_api_client(server=f"http://127.0.0.1:{server.port}", qps=0, retry=retry) as client:
        with trio.fail_after(BUDGET), pytest.raises(ApiUnavailable, match=f"127.0.0.1:{server.port}"):
            await client.get("/api/v1/namespaces/default/pods/web")
    assert server.accepted == 3


async def test_the_api_client_asks_for_gzip_for_list_pages_only(serve: Serve) -> None:
    """RFC 9110 12.5.3: Accept-Encoding states what the client can decode; the API client states gzip
    for a page of a list (a GET with ``limit``, as the reflectors' lists), where kube-apiserver
    compresses answers over 128 KiB, and nothing for single objects and watches."""
    listing = {"kind": "PodList", "metadata": {"resourceVersion": "7"}, "items": [OBJ]}

    def script(_c: int, _n: int) -> Act:
        if b"accept-encoding: gzip" in server.heads[-1].lower():
            return send(answer(gzip.compress(json.dumps(listing).encode()), "Content-Encoding: gzip"))
        return send(answer(RAW))

    server = await serve(script)
    async with open_api_client(server=f"http://127.0.0.1:{server.port}", qps=0) as client:
        with trio.fail_after(BUDGET):
            assert await client.get("/api/v1/pods", {"limit": "500"}) == listing
            assert await client.get("/api/v1/namespaces/default/pods/web") == OBJ
            assert await client.merge_patch("/api/v1/namespaces/default/pods/web", {"a": 1}) == OBJ
    assert [b"\r\nAccept-Encoding: gzip\r\n" in h + b"\r\n" for h in server.heads] == [True, False, False]
