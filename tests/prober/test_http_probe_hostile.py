"""httpGet probes and hooks (:mod:`kubelet_trio.prober.probe.http` on :class:`kubelet_trio.client.http1.Get`)
against hostile and odd servers: raw scripted answers on loopback (real sockets, Trio's real clock), each
case judged as Go's prober judges it (``pkg/probe/http``, ``net/http``'s client), and what the request
looks like on the wire.

Go's rules, as the cases use them: no answer (refused, reset, a malformed head, a redirect loop) is a
failure whose output is the client's error, ``Get "<url>": ...``; the first 10 KiB of the body are the
output and no more is read; a body that breaks off, or the timeout while reading it, is an *error*
(``ProbeError``: the result is not counted, the prober retries up to 3 times); 200-399 is success, a
3xx that was not followed a success with a warning.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import trio
import trustme

from kubelet_trio.api import Container, HTTPGetAction, LifecycleHandler, Pod
from kubelet_trio.lifecycle.handlers import HandlerRunner, HookError
from kubelet_trio.prober import Prober
from kubelet_trio.prober.probe import ProbeError, Result
from kubelet_trio.prober.probe.http import BODY_TIMEOUT, HttpProbe, request_for_action
from kubelet_trio.prober.results import ProbeKind, ProbeResult
from kubelet_trio.sim.runtime import SimRuntime

#: Real seconds within which every case is judged (generous: the machine may be busy).
BUDGET = 15.0
KIB10 = 10 * 1024

#: What the server does with one connection, given the request head it read.
Script = Callable[["Server", trio.abc.Stream, bytes], Awaitable[None]]


class Server:
    """Reads one request head per connection and runs the script; records the heads."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.heads: list[bytes] = []
        self.written: list[int] = []  # per endless body: the bytes written before the client went away
        self.done = trio.Event()  # an endless body ended
        self.port = 0

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def fields(self, n: int = 0) -> list[tuple[str, str]]:
        """The ``n``-th request's fields, names lower-cased."""
        lines = self.heads[n].decode("latin-1").split("\r\n")[1:]
        return [(name.strip().lower(), value.strip()) for name, _, value in (x.partition(":") for x in lines)]

    def target(self, n: int = 0) -> str:
        return self.heads[n].split(b" ", 2)[1].decode()

    async def handle(self, stream: trio.abc.Stream) -> None:
        buffer = b""
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            async with stream:
                while b"\r\n\r\n" not in buffer:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    buffer += data
                self.heads.append(buffer.partition(b"\r\n\r\n")[0])
                await self.script(self, stream, self.heads[-1])


@contextlib.asynccontextmanager
async def serving(script: Script, *, tls: ssl.SSLContext | None = None) -> AsyncIterator[Server]:
    server = Server(script)
    async with trio.open_nursery() as nursery:
        if tls is None:
            [listener] = await nursery.start(
                functools.partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1")
            )
            server.port = listener.socket.getsockname()[1]
        else:
            [listener] = await nursery.start(
                functools.partial(trio.serve_ssl_over_tcp, server.handle, 0, tls, host="127.0.0.1")
            )
            server.port = listener.transport_listener.socket.getsockname()[1]
        yield server
        nursery.cancel_scope.cancel()


def send(data: bytes) -> Script:
    async def script(server: Server, stream: trio.abc.Stream, head: bytes) -> None:
        await stream.send_all(data)

    return script


def send_and_hold(data: bytes) -> Script:
    """Answer, then hold the connection open (only the client's reading can end the exchange)."""

    async def script(server: Server, stream: trio.abc.Stream, head: bytes) -> None:
        await stream.send_all(data)
        await trio.sleep_forever()

    return script


def endless(head_bytes: bytes, piece: bytes) -> Script:
    """The head, then ``piece`` again and again for as long as the client reads (at most 512 MiB);
    ``Server.written`` and ``Server.done`` say how far it got."""

    async def script(server: Server, stream: trio.abc.Stream, head: bytes) -> None:
        await stream.send_all(head_bytes)
        written = 0
        try:
            while written < 512 * 1024 * 1024:
                await stream.send_all(piece)
                written += len(piece)
        finally:
            server.written.append(written)
            server.done.set()

    return script


def answer(status: str = "200 OK", *fields: str, body: bytes = b"") -> bytes:
    lines = [f"HTTP/1.1 {status}", *fields]
    if not any(f.lower().startswith(("content-length", "transfer-encoding")) for f in fields):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def action(port: int, path: str = "/", **extra: object) -> HTTPGetAction:
    return HTTPGetAction.from_dict({"port": port, "path": path, **extra})


async def probe(server: Server, path: str = "/", limit: float = 1.0, **extra: object) -> tuple[Result, str]:
    """An httpGet probe of the server with the prober's timeout handling (``limit`` seconds)."""
    request = request_for_action(action(server.port, path, **extra), Container(name="app"), "127.0.0.1")
    http = HttpProbe(request)
    with trio.fail_after(BUDGET):
        with trio.move_on_after(limit):
            return await http.run()
        return http.timed_out()


# -- no answer: failures with Go's wording ----------------------------------------------------------------


async def silent(server: Server, stream: trio.abc.Stream, head: bytes) -> None:
    await trio.sleep_forever()


async def test_a_server_that_never_answers_fails_at_the_timeout_with_gos_message() -> None:
    """Go's client.Timeout while awaiting headers: a failure, ``Client.Timeout exceeded while awaiting
    headers``, at the timeout and not later."""
    async with serving(silent) as server:
        start = trio.current_time()
        result, output = await probe(server, "/healthz", limit=0.5)
        assert 0.5 <= trio.current_time() - start < 2
    assert result is Result.FAILURE
    assert output == (
        f'Get "{server.url("/healthz")}": context deadline exceeded '
        "(Client.Timeout exceeded while awaiting headers)"
    )


async def test_the_prober_times_out_a_silent_server_at_timeout_seconds() -> None:
    """Through the prober: ``timeoutSeconds: 1`` ends the probe after 1 s, counted as a failure."""
    events: list[str] = []
    prober = Prober(runtime=SimRuntime(), events=lambda pod, type_, reason, message: events.append(message))
    pod = Pod.from_dict({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}})
    async with serving(silent) as server:
        spec = {"httpGet": {"port": server.port, "path": "/"}, "timeoutSeconds": 1}
        container = Container.from_dict({"name": "app", "livenessProbe": spec})
        start = trio.current_time()
        with trio.fail_after(BUDGET):
            assert (
                await prober.probe(ProbeKind.LIVENESS, pod, container, "c", "127.0.0.1")
                is ProbeResult.FAILURE
            )
        assert 1 <= trio.current_time() - start < 3
    assert events == [f'Liveness probe failed: Get "{server.url()}": context deadline exceeded '
                      "(Client.Timeout exceeded while awaiting headers)"]  # fmt: skip


async def test_a_malformed_status_line_is_a_failure_naming_it() -> None:
    """RFC 9112 4: ``HTTP-version SP 3DIGIT SP reason``; Go: ``malformed HTTP status code``."""
    for line in (b"HTTP/1.1 abc OK", b"HTTP/1.1 2000 OK", b"garbage", b"HTTP/1.1 200"):
        async with serving(send_and_hold(line + b"\r\nContent-Length: 0\r\n\r\n")) as server:
            result, output = await probe(server, "/x")
        if line == b"HTTP/1.1 200":  # a status line without a reason phrase is valid (RFC 9112 4)
            assert result is Result.SUCCESS
            continue
        assert result is Result.FAILURE
        assert output.startswith(f'Get "{server.url("/x")}": malformed HTTP response: ')
        assert "status line" in output


async def test_conflicting_content_lengths_fail() -> None:
    """RFC 9112 6.3: differing Content-Length values are an unrecoverable framing error."""
    data = answer("200 OK", "Content-Length: 2", "Content-Length: 3", body=b"ok")
    async with serving(send_and_hold(data)) as server:
        result, output = await probe(server)
    assert result is Result.FAILURE and "malformed HTTP response" in output


async def test_a_head_without_end_fails_at_the_head_bound() -> None:
    """An answer head that never ends is read at most 64 KiB (h11's incomplete-event bound)."""
    data = b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * 200_000
    async with serving(send_and_hold(data)) as server:
        result, output = await probe(server)
    assert result is Result.FAILURE and "malformed HTTP response" in output


async def test_a_server_that_hangs_up_without_answering_fails() -> None:
    async def hang_up(server: Server, stream: trio.abc.Stream, head: bytes) -> None:
        await stream.aclose()

    async with serving(hang_up) as server:
        result, output = await probe(server)
    assert (result, output) == (Result.FAILURE, f'Get "{server.url()}": EOF')  # Go's wording


# -- the body: 10 KiB of output, no more read -------------------------------------------------------------


@pytest.mark.parametrize("framing", ["close-delimited", "chunked", "content-length"])
async def test_an_endless_body_is_read_to_10_kib_and_the_result_decided(framing: str) -> None:
    """Go's ``ReadAtMost(body, 10 KiB)``: the output is the first 10 KiB; the rest is never read (the
    server finds the connection closed after at most a few socket buffers' worth)."""
    if framing == "chunked":
        head, piece = answer("200 OK", "Transfer-Encoding: chunked"), b"1000\r\n" + b"x" * 4096 + b"\r\n"
    elif framing == "content-length":
        head, piece = answer("200 OK", f"Content-Length: {1 << 40}"), b"x" * 4096
    else:  # no length at all: the body ends when the connection does
        head, piece = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", b"x" * 4096
    async with serving(endless(head, piece)) as server:
        assert await probe(server, limit=5) == (Result.SUCCESS, "x" * KIB10)
        with trio.fail_after(BUDGET):
            await server.done.wait()
    assert server.written[0] < 64 * 1024 * 1024  # the writer stopped: the client closed, not read on


async def test_an_endless_error_body_is_a_failure_decided_at_once() -> None:
    async with serving(endless(answer("500 Oops", "Transfer-Encoding: chunked"), b"4\r\nboom\r\n")) as server:
        start = trio.current_time()
        assert await probe(server, limit=5) == (Result.FAILURE, "HTTP probe failed with statuscode: 500")
        assert trio.current_time() - start < 2


async def test_a_body_that_stalls_is_an_error_at_the_timeout() -> None:
    """Go's client.Timeout also bounds the body read, whose error DoHTTPProbe returns as an error: the
    probe errored, its result is not counted."""
    async with serving(send_and_hold(answer("200 OK", "Content-Length: 100", body=b"partial"))) as server:
        request = request_for_action(action(server.port), Container(name="app"), "127.0.0.1")
        http = HttpProbe(request)
        with trio.fail_after(BUDGET):
            with trio.move_on_after(0.5):
                await http.run()
            with pytest.raises(ProbeError, match="while reading body") as caught:
                http.timed_out()
    assert str(caught.value) == BODY_TIMEOUT


async def test_a_body_that_breaks_off_is_an_error() -> None:
    async def short(server: Server, stream: trio.abc.Stream, head: bytes) -> None:
        await stream.send_all(answer("200 OK", "Content-Length: 100", body=b"only this"))
        await stream.aclose()

    async with serving(short) as server:
        request = request_for_action(action(server.port), Container(name="app"), "127.0.0.1")
        with (
            trio.fail_after(BUDGET),
            pytest.raises(ProbeError, match=r"reading the body of http://127\.0\.0\.1"),
        ):
            await HttpProbe(request).run()


async def test_a_gzip_body_that_was_not_asked_for_is_the_output_as_it_came() -> None:
    """Go's prober disables compression: no ``Accept-Encoding``, and a coded body is opaque output."""
    packed = gzip.compress(b"fine")
    data = answer("200 OK", "Content-Encoding: gzip", body=packed)
    async with serving(send_and_hold(data)) as server:
        result, output = await probe(server)
    assert result is Result.SUCCESS and output == packed.decode("utf-8", "replace")
    assert "accept-encoding" not in dict(server.fields())


async def test_informational_answers_are_skipped() -> None:
    data = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + answer(body=b"ok")
    async with serving(send_and_hold(data)) as server:
        assert await probe(server) == (Result.SUCCESS, "ok")


# -- redirects: Go's RedirectChecker(false) --------------------------------------------------------------


async def test_a_redirect_loop_stops_after_10_requests_with_gos_message() -> None:
    async with serving(send(answer("302 Found", "Location: /loop"))) as server:
        result, output = await probe(server, "/loop")
    assert (result, output) == (Result.FAILURE, 'Get "/loop": stopped after 10 redirects')
    assert len(server.heads) == 10


async def test_redirects_follow_the_host_name_not_the_port() -> None:
    """Go compares ``URL.Hostname()``: another port on the same host is followed, another name for the
    same address is not (the 3xx is the answer, a success with a warning)."""
    async with serving(send(answer(body=b"over here"))) as target:

        async def redirect(server: Server, stream: trio.abc.Stream, head: bytes) -> None:
            where = target.url("/moved") if b" /port " in head else f"http://localhost:{target.port}/x"
            await stream.send_all(answer("301 Moved", f"Location: {where}", body=b"elsewhere"))

        async with serving(redirect) as server:
            assert await probe(server, "/port") == (Result.SUCCESS, "over here")
            assert await probe(server, "/name") == (
                Result.WARNING,
                "Probe terminated redirects, Response body: elsewhere",
            )
    assert [target.target(n) for n in range(len(target.heads))] == ["/moved"]


async def test_a_redirect_without_location_or_of_another_kind_is_the_answer() -> None:
    for status, fields in (("302 Found", ()), ("300 Multiple Choices", ("Location: /x",))):
        async with serving(send_and_hold(answer(status, *fields, body=b"here"))) as server:
            assert await probe(server) == (Result.WARNING, "Probe terminated redirects, Response body: here")
            assert len(server.heads) == 1


async def test_a_redirect_to_another_scheme_fails_as_go_does() -> None:
    async with serving(send(answer("302 Found", "Location: ftp://127.0.0.1/file"))) as server:
        assert await probe(server) == (
            Result.FAILURE,
            'Get "ftp://127.0.0.1/file": unsupported protocol scheme "ftp"',
        )


# -- the request on the wire -----------------------------------------------------------------------------


async def test_the_request_is_gos_probe_request() -> None:
    """``Connection: close`` (keep-alive disabled), no ``Accept-Encoding`` (compression disabled), the
    probe's headers under their canonical names (a name given twice sent twice), the custom ``Host``;
    across a relative redirect the same fields plus ``Referer``, as Go's client sends them."""

    async def script(server: Server, stream: trio.abc.Stream, head: bytes) -> None:
        if head.startswith(b"GET /start "):
            await stream.send_all(answer("307 Temporary Redirect", "Location: /end?q=1"))
        else:
            await stream.send_all(answer(body=b"ok"))

    headers = [
        {"name": "x-probe", "value": "1"},
        {"name": "X-Probe", "value": "2"},
        {"name": "Host", "value": "svc.example"},
    ]
    async with serving(script) as server:
        assert await probe(server, "/start", httpHeaders=headers) == (Result.SUCCESS, "ok")
    first, second = server.fields(0), server.fields(1)
    assert server.target(1) == "/end?q=1"
    for fields in (first, second):
        assert ("host", "svc.example") in fields  # a relative Location keeps the custom Host
        assert ("user-agent", "kube-probe/1.36") in fields and ("accept", "*/*") in fields
        assert ("connection", "close") in fields
        assert [v for k, v in fields if k == "x-probe"] == ["1", "2"]
        assert "accept-encoding" not in dict(fields)
    assert "referer" not in dict(first)
    assert dict(second)["referer"] == server.url("/start")


async def test_https_probes_skip_certificate_checks() -> None:
    """scheme HTTPS: TLS without verification (a self-signed certificate for another name passes)."""
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("not-this-host.example").configure_cert(context)
    async with serving(send_and_hold(answer(body=b"secure")), tls=context) as server:
        assert await probe(server, scheme="HTTPS") == (Result.SUCCESS, "secure")
        result, output = await probe(server, scheme="HTTP")  # plain HTTP to a TLS port: no answer
    assert result is Result.FAILURE and output.startswith(f'Get "{server.url()}": ')


async def test_refused_is_gos_dial_error() -> None:
    from tests.prober.servers import closed_port

    port = closed_port()
    request = request_for_action(action(port), Container(name="app"), "127.0.0.1")
    with trio.fail_after(BUDGET):
        assert await HttpProbe(request).run() == (
            Result.FAILURE,
            f'Get "http://127.0.0.1:{port}/": dial tcp 127.0.0.1:{port}: connect: connection refused',
        )


# -- lifecycle hooks: the same client --------------------------------------------------------------------


async def no_ips(pod: Pod) -> list[str]:
    return []


async def hook(server: Server, path: str) -> None:
    runner = HandlerRunner(runtime=SimRuntime(), pod_ips=no_ips, host_override="127.0.0.1")
    pod = Pod.from_dict({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}})
    handler = LifecycleHandler.from_dict({"httpGet": {"port": server.port, "path": path}})
    with trio.fail_after(BUDGET):
        await runner.run(pod, Container(name="app"), "cid", handler)


async def test_a_hook_succeeds_on_any_status_and_asks_for_gzip() -> None:
    """Go's hook client is a default transport (gzip asked for) and does not check the status."""
    async with serving(send_and_hold(answer("503 Unavailable", body=b"x" * 100_000))) as server:
        await hook(server, "/hook")
    fields = dict(server.fields())
    assert fields["user-agent"] == "kube-lifecycle/1.36" and fields["accept-encoding"] == "gzip"


async def test_a_hook_redirect_loop_fails_with_gos_message() -> None:
    async with serving(send(answer("302 Found", "Location: /again"))) as server:
        with pytest.raises(HookError) as caught:
            await hook(server, "/again")
    assert str(caught.value) == (
        'HTTP lifecycle hook (/again) for Container "app" in Pod "p_ns(u)" failed - error: '
        'Get "/again": stopped after 10 redirects'
    )
    assert len(server.heads) == 10
