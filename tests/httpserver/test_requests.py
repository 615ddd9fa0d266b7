"""What the server and the router make of a request: reason phrases, case-sensitive methods, one
percent-decoding of the path, path parameters no handler should see, control bytes never echoed."""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing

from kubelet_trio.httpserver.asgi import App, HttpError, Request, Response, Route
from kubelet_trio.httpserver.http11 import MAX_HEADER_BYTES
from tests.httpserver.wire import ask, read_to_eof, serving


async def echo_params(request: Request) -> Response:
    if "fail" in request.query:
        raise HttpError(400, f"bad value {request.arg('fail')!s}")
    return Response.json({"path": request.path, "params": dict(request.params)})


APP = App(
    [
        Route("/healthz", echo_params),
        Route("/containerLogs/{namespace}/{pod}/{container}", echo_params),
        Route("/run/{namespace}/{pod}/{container}", echo_params, ("POST",)),
    ]
)


def get(target: str, method: str = "GET") -> bytes:
    return f"{method} {target} HTTP/1.1\r\nHost: kubelet\r\nConnection: close\r\n\r\n".encode()


@pytest.mark.parametrize(
    ("request_bytes", "status_line"),
    [
        (get("/healthz"), b"HTTP/1.1 200 OK"),
        (get("/nowhere"), b"HTTP/1.1 404 Not Found"),
        (get("/run/ns/pod/app"), b"HTTP/1.1 405 Method Not Allowed"),
        (b"GET /healthz HTTP/1.1\r\nHost: kubelet\r\nBad header\r\n\r\n", b"HTTP/1.1 400 Bad Request"),
    ],
)
async def test_status_lines_carry_reason_phrases(
    autojump_clock: trio.testing.MockClock, request_bytes: bytes, status_line: bytes
) -> None:
    async with serving(APP) as (_, listener):
        client = await listener.connect()
        await client.send_all(request_bytes)
        assert (await read_to_eof(client)).split(b"\r\n", 1)[0] == status_line


async def test_a_status_without_a_phrase_is_worded_as_net_http_does(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def app(scope: object, receive: object, send: object) -> None:
        await send({"type": "http.response.start", "status": 599, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b""})  # type: ignore[operator]

    async with serving(app) as (_, listener):
        answer = await ask(listener, get("/"))
        assert (answer.status, answer.reason) == (599, b"status code 599")


async def test_methods_are_case_sensitive(autojump_clock: trio.testing.MockClock) -> None:
    """Any token is a method to net/http, and "get" is not GET: the router answers 405 where the path
    exists (as go-restful does); a method that is no token is a malformed request line (400)."""
    async with serving(APP) as (_, listener):
        assert (await ask(listener, get("/healthz"))).status == 200
        lower = await ask(listener, get("/healthz", "get"))
        assert (lower.status, lower.headers[b"allow"]) == (405, b"GET")
        assert (await ask(listener, get("/nowhere", "get"))).status == 404
        assert (await ask(listener, get("/healthz", "G(T"))).status == 400
        assert (await ask(listener, get("/run/ns/pod/app", "post"))).status == 405
        assert (await ask(listener, get("/run/ns/pod/app", "POST"))).status == 200


@pytest.mark.parametrize(
    ("target", "path", "container"),
    [
        ("/containerLogs/ns/pod/app", "/containerLogs/ns/pod/app", "app"),
        ("/containerLogs/ns/pod/%61pp", "/containerLogs/ns/pod/app", "app"),
        # decoded once: %25 is a "%", and what follows it stays as it is
        ("/containerLogs/ns/pod/%2561pp", "/containerLogs/ns/pod/%61pp", "%61pp"),
        ("/containerLogs/ns/pod/%252e%252e%252f", "/containerLogs/ns/pod/%2e%2e%2f", "%2e%2e%2f"),
        ("/%63ontainerLogs/ns/pod/app", "/containerLogs/ns/pod/app", "app"),
    ],
)
async def test_the_path_is_percent_decoded_once(
    autojump_clock: trio.testing.MockClock, target: str, path: str, container: str
) -> None:
    async with serving(APP) as (_, listener):
        answer = await ask(listener, get(target))
        assert answer.status == 200
        assert json.loads(answer.body) == {
            "path": path,
            "params": {"namespace": "ns", "pod": "pod", "container": container},
        }


@pytest.mark.parametrize(
    ("target", "name"),
    [
        ("/containerLogs/ns/pod/a%2Fb", "container"),
        ("/containerLogs/ns/pod/%2e%2e", "container"),
        ("/containerLogs/ns/./app", "pod"),
        ("/containerLogs/../pod/app", "namespace"),
        ("/containerLogs/ns/pod/app%00", "container"),
        ("/containerLogs/ns/pod/a%0d%0ab", "container"),
        ("/containerLogs/ns/pod/%7f", "container"),
    ],
)
async def test_path_parameters_no_handler_should_see_are_refused(
    autojump_clock: trio.testing.MockClock, target: str, name: str
) -> None:
    async with serving(APP) as (_, listener):
        answer = await ask(listener, get(target))
        assert (answer.status, answer.body) == (400, f"invalid {name} in the request path\n".encode())


@pytest.mark.parametrize(
    "target",
    ["/nowhere/%00", "/containerLogs/ns/pod/app?fail=%00%1b%0d", "/containerLogs/ns/pod//app%00"],
)
async def test_control_bytes_are_never_echoed_raw(
    autojump_clock: trio.testing.MockClock, target: str
) -> None:
    async with serving(APP) as (_, listener):
        client = await listener.connect()
        await client.send_all(get(target))
        raw = await read_to_eof(client)
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.split(b" ", 2)[1] in (b"400", b"404")
    assert not any((byte < 0x20 and byte not in b"\n\t") or byte == 0x7F for byte in body)


async def test_an_error_message_has_its_control_characters_escaped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with serving(APP) as (_, listener):
        answer = await ask(listener, get("/containerLogs/ns/pod/app?fail=%00x%1b"))
        assert (answer.status, answer.body) == (400, b"bad value \\x00x\\x1b\n")


async def test_a_head_over_the_limit_is_answered_431(autojump_clock: trio.testing.MockClock) -> None:
    async with serving(APP) as (_, listener):
        huge = (
            b"GET /healthz HTTP/1.1\r\nHost: kubelet\r\nX-Big: " + b"a" * 2 * MAX_HEADER_BYTES + b"\r\n\r\n"
        )
        answer = await ask(listener, huge)
        assert (answer.status, answer.reason, answer.headers[b"connection"]) == (
            431,
            b"Request Header Fields Too Large",
            b"close",
        )
        assert (await ask(listener, get("/healthz"))).status == 200


async def test_a_client_that_expects_100_continue_is_told_to_go_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def app(scope: object, receive: object, send: object) -> None:
        body = b""
        while True:
            message = await receive()  # type: ignore[operator]
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": body})  # type: ignore[operator]

    async with serving(app) as (_, listener):
        stream = await listener.connect()
        await stream.send_all(
            b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"
        )
        assert await stream.receive_some() == b"HTTP/1.1 100 Continue\r\n\r\n"
        await stream.send_all(b"hello")
        raw = await read_to_eof(stream)
        assert raw.startswith(b"HTTP/1.1 200 OK\r\n") and raw.endswith(b"hello")
