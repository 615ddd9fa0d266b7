"""The manifest URL's client (``fetch_manifest_body``, :class:`kubelet_trio.client.http1.Get` as Go's
``http.Client``) against hostile and odd servers: raw scripted answers from in-memory peers under an
autojump MockClock (the 10 s timeout takes no time), and one real loopback server for the production
dialer. Each case ends in the answer's pods or one clear error, never a wait past the timeout and never
more than 10 MiB (decompressed) in memory.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import zlib
from collections.abc import AsyncIterator, Iterator

import pytest
import trio
import trio.testing

from kubelet_trio.api import MAX_MANIFEST_BYTES, ManifestError
from kubelet_trio.config import HttpSource, PodConfig, PodOperation
from kubelet_trio.config.http import USER_AGENT, ManifestFetchError, fetch_manifest_body
from kubelet_trio.runonce import fetch_manifest_url
from tests.config.conftest import fixed_now, no_update, summary
from tests.config.test_config_http_source import pod, recv
from tests.http_peers import PeerRequest, Peers, scripted

URL = "http://config.example/pods"
NODE = "node-1"
POD = json.dumps(pod("web")).encode()


def answer(status: str = "200 OK", *fields: str, body: bytes = b"") -> bytes:
    lines = [f"HTTP/1.1 {status}", *fields]
    if not any(f.lower().startswith(("content-length", "transfer-encoding")) for f in fields):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def fetch(peers: Peers, url: str = URL, headers: list[tuple[str, str]] | None = None) -> bytes:
    with trio.fail_after(10):  # the source's HTTP_TIMEOUT
        return await fetch_manifest_body(url, headers or [], connect=peers.connect)


async def test_a_server_that_never_answers_is_cut_at_10_s(autojump_clock: trio.testing.MockClock) -> None:
    """Go's ``http.Client{Timeout: 10s}``: run-once reports it, the source keeps its last set."""

    async def silent(request: PeerRequest) -> AsyncIterator[bytes]:
        await trio.sleep_forever()
        yield b""  # pragma: no cover

    peers = scripted(silent)
    start = trio.current_time()
    pods, errors = await fetch_manifest_url(URL, NODE, connect=peers.connect)
    assert trio.current_time() - start == 10
    assert pods == () and [e.message for e in errors] == ["cannot fetch: no response within 10s"]
    assert peers.closed == peers.opened == 1  # the connection was closed


async def test_the_source_keeps_its_set_while_the_server_is_silent(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    state = {"silent": False}

    async def serve(request: PeerRequest) -> AsyncIterator[bytes]:
        if state["silent"]:
            await trio.sleep_forever()
        yield answer(body=POD)

    config = PodConfig(sources=("http",), now=fixed_now)
    source = HttpSource(URL, NODE, config.source_channel("http"), connect=scripted(serve).connect)
    await nursery.start(config.run)
    await nursery.start(source.run)
    assert summary(await recv(config.updates)) == (PodOperation.ADD, ("web-node-1",))
    state["silent"] = True
    assert await no_update(config.updates, 100)


def endless_body(head: bytes, piece: bytes, sent: list[int]) -> Iterator[bytes]:
    yield head
    while True:
        sent[0] += len(piece)
        yield piece


@pytest.mark.parametrize("framing", ["close-delimited", "chunked"])
async def test_an_endless_body_stops_just_past_10_mib(
    framing: str, autojump_clock: trio.testing.MockClock
) -> None:
    """Go reads at most ``maxConfigLength`` (10 MiB); so does this, then refuses the body."""
    sent = [0]
    if framing == "chunked":
        head, piece = answer("200 OK", "Transfer-Encoding: chunked"), b"10000\r\n" + b" " * 65536 + b"\r\n"
    else:
        head, piece = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", b" " * 65536
    peers = scripted(lambda request: endless_body(head, piece, sent))
    with pytest.raises(ManifestError, match="larger than the 10 MiB limit"):
        await fetch(peers)
    assert MAX_MANIFEST_BYTES < sent[0] <= MAX_MANIFEST_BYTES + 2 * len(piece)


async def test_gzip_is_asked_for_decoded_and_bounded_after_decoding(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Go's default transport asks for gzip and decodes it; the bound counts decoded bytes, so a small
    gzip bomb (1 GiB of zeros in about 1 MiB) stops at 10 MiB."""
    packed = gzip.compress(POD)
    peers = scripted(lambda request: [answer("200 OK", "Content-Encoding: gzip", body=packed)])
    assert await fetch(peers) == POD
    assert peers.requests[0].header("accept-encoding") == "gzip"

    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    sent = [0]

    def bomb(request: PeerRequest) -> Iterator[bytes]:
        yield b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nConnection: close\r\n\r\n"
        for _ in range(1024):  # 1 GiB of zeros, 1 MiB at a time
            piece = compressor.compress(bytes(1 << 20))
            sent[0] += len(piece)
            yield piece

    with pytest.raises(ManifestError, match="larger than the 10 MiB limit"):
        await fetch(scripted(bomb))
    assert sent[0] < 100_000  # stopped after about 10 MiB decoded, a few KiB on the wire

    truncated = scripted(lambda request: [answer("200 OK", "Content-Encoding: gzip", body=packed[:-8])])
    with pytest.raises(ManifestFetchError, match="gzip answer truncated"):
        await fetch(truncated)


GET = f'Get "{URL}": '
BODY = f"reading the body of {URL}: "


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # RFC 9112 4: HTTP-version SP 3DIGIT SP reason-phrase
        (b"HTTP/1.1 abc OK\r\n\r\n", GET + "malformed HTTP response: illegal status line"),
        (b"garbage\r\n\r\n", GET + "malformed HTTP response: illegal status line"),
        # RFC 9112 6.3: differing Content-Length values are an unrecoverable framing error
        (
            answer("200 OK", "Content-Length: 2", "Content-Length: 3", body=b"{}"),
            GET + "malformed HTTP response: conflicting Content-Length headers",
        ),
        # RFC 9112 6.1: chunked must be the final coding
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            GET + "malformed HTTP response: Only Transfer-Encoding: chunked is supported",
        ),
        # RFC 9112 7.1: chunk-size is 1*HEXDIG
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-2\r\n",
            BODY + "malformed HTTP response: illegal chunk header",
        ),
        # RFC 9112 8: a message shorter than its Content-Length is incomplete
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab",
            BODY + "malformed HTTP response: peer closed connection without sending complete message body",
        ),
        (b"", GET + "EOF"),  # closed before answering: Go's wording
    ],
)
async def test_a_malformed_answer_is_a_clear_error(
    raw: bytes, expected: str, autojump_clock: trio.testing.MockClock
) -> None:
    peers = scripted(lambda request: [raw])
    with pytest.raises(ManifestFetchError) as caught:
        await fetch(peers)
    assert str(caught.value).startswith(expected)
    assert peers.closed == 1


async def test_a_redirect_loop_stops_after_10_requests(autojump_clock: trio.testing.MockClock) -> None:
    peers = scripted(lambda request: [answer("302 Found", "Location: /pods")])
    with pytest.raises(ManifestFetchError) as caught:
        await fetch(peers)
    assert str(caught.value) == 'Get "/pods": stopped after 10 redirects'
    assert len(peers.requests) == 10 and peers.closed == 10


async def test_redirects_go_to_any_host_credentials_only_within_the_domain(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Go's ``http.Client``: any host is followed; ``Authorization`` and ``Cookie`` go to the same domain
    or a subdomain, and once dropped stay dropped; ``Referer`` names the previous URL; a
    ``--manifest-url-header`` Host is never sent (Go writes the URL's host)."""
    hops = {
        "config.example": "http://pods.config.example/a",
        "pods.config.example": "http://other.example/b",
        "other.example": "http://pods.config.example/c",
    }

    def serve(request: PeerRequest) -> list[bytes]:
        host = request.header("host") or ""
        if request.target == "/c":
            return [answer(body=POD)]
        return [answer("301 Moved Permanently", f"Location: {hops[host]}")]

    peers = scripted(serve)
    headers = [("Authorization", "Bearer t"), ("Cookie", "c=1"), ("X-Token", "x"), ("Host", "fake.example")]
    assert await fetch(peers, headers=headers) == POD
    seen = [
        (r.host, r.header("host"), r.header("authorization"), r.header("x-token")) for r in peers.requests
    ]
    assert seen == [
        ("config.example", "config.example", "Bearer t", "x"),
        ("pods.config.example", "pods.config.example", "Bearer t", "x"),  # a subdomain keeps them
        ("other.example", "other.example", None, "x"),  # another domain does not
        ("pods.config.example", "pods.config.example", None, "x"),  # and they stay dropped
    ]
    assert [r.header("referer") for r in peers.requests] == [
        None,
        URL,
        "http://pods.config.example/a",
        "http://other.example/b",
    ]
    assert {r.header("user-agent") for r in peers.requests} == {USER_AGENT}
    assert {r.header("connection") for r in peers.requests} == {"close"}


async def test_a_password_in_the_url_is_basic_auth_and_masked_in_errors(
    autojump_clock: trio.testing.MockClock,
) -> None:
    peers = scripted(lambda request: [answer("302 Found", "Location: ftp://x/")])
    with pytest.raises(ManifestFetchError) as caught:
        await fetch(peers, "http://user:secret@config.example/pods")
    assert peers.requests[0].header("authorization") == "Basic dXNlcjpzZWNyZXQ="
    assert str(caught.value) == 'Get "ftp://x/": unsupported protocol scheme "ftp"'
    peers.refuse = True
    with pytest.raises(ManifestFetchError) as caught:
        await fetch(peers, "http://user:secret@config.example/pods")
    assert "secret" not in str(caught.value)
    assert str(caught.value).startswith(
        'Get "http://user:***@config.example/pods": dial tcp config.example:80: '
    )


async def test_a_header_value_that_would_split_the_request_is_refused_before_sending(
    autojump_clock: trio.testing.MockClock,
) -> None:
    peers = scripted(lambda request: [answer(body=POD)])
    with pytest.raises(ManifestFetchError, match="invalid header field 'X-Evil'"):
        await fetch(peers, headers=[("X-Evil", "a\r\nInjected: yes")])
    assert peers.opened == 0


async def test_the_real_dialer_on_loopback() -> None:
    """The production path (``trio.open_tcp_stream``): a body read whole, the connection closed."""
    closed = trio.Event()

    async def handle(stream: trio.SocketStream) -> None:
        async with stream:
            data = b""
            while b"\r\n\r\n" not in data:
                data += await stream.receive_some(65536)
            await stream.send_all(answer(body=POD))
            assert await stream.receive_some(65536) == b""  # Connection: close: the client hangs up
            closed.set()

    async with trio.open_nursery() as nursery:
        [listener] = await nursery.start(functools.partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
        port = listener.socket.getsockname()[1]
        with trio.fail_after(10):
            assert await fetch_manifest_body(f"http://127.0.0.1:{port}/pods") == POD
            await closed.wait()
        nursery.cancel_scope.cancel()


async def test_https_is_verified() -> None:
    """Go's default transport verifies the server: a certificate from a CA the node does not trust is
    refused, one it trusts (here through ``ssl_context``) is accepted."""
    import ssl

    import trustme

    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)

    async def handle(stream: trio.SSLStream[trio.SocketStream]) -> None:
        with contextlib.suppress(trio.BrokenResourceError):  # the client that refused the handshake
            async with stream:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += await stream.receive_some(65536)
                await stream.send_all(answer(body=POD))

    async with trio.open_nursery() as nursery:
        serve = functools.partial(trio.serve_ssl_over_tcp, handle, 0, server_context, host="127.0.0.1")
        [listener] = await nursery.start(serve)
        url = f"https://127.0.0.1:{listener.transport_listener.socket.getsockname()[1]}/pods"
        trusting = ssl.create_default_context()
        ca.configure_trust(trusting)
        with trio.fail_after(10):
            assert await fetch_manifest_body(url, ssl_context=trusting) == POD
            with pytest.raises(ManifestFetchError, match="CERTIFICATE_VERIFY_FAILED"):
                await fetch_manifest_body(url)  # the system's trust store
        nursery.cancel_scope.cancel()
