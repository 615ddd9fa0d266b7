"""Just enough ASGI for the kubelet's endpoints: requests, responses (whole or streamed), routing.

The endpoints are few and fixed, so a web framework would only add weight; any ASGI server can serve the
app (:mod:`kubelet_trio.httpserver.http11` does, see :mod:`kubelet_trio.server.serve`) and tests call it
in-process through ``httpx.ASGITransport``.

A handler that answers with :attr:`Response.upgrade` takes over the connection of an upgrade request
(exec, attach, port-forward) through the server's ``kubelet.upgrade`` extension; a request that is no
upgrade, or a server without the extension, gets 400 "Upgrade request required" as from the Go kubelet.

A streamed response runs its writer next to a task that listens for the client's disconnect and then
cancels the writer, so ``follow`` requests end when the client goes away.

Routes match the request path one segment at a time, each segment percent-decoded exactly once (so
``%2561pp`` names ``%61pp``, never ``app``), and a parameter that could lead a handler astray or be echoed
as a control byte (``/`` from ``%2F``, ``.``/``..``, a NUL or other control character) is answered 400.
A handler's unexpected exception is the server's to contain (it answers 500 and counts it).
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs
import trio

__all__ = ["UPGRADE_EXTENSION", "App", "Handler", "HttpError", "Request", "Response", "Route", "Write"]

Scope = Mapping[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Write = Callable[[bytes], Awaitable[None]]
TEXT = "text/plain; charset=utf-8"
JSON = "application/json"
#: The ASGI scope extension through which a handler takes over the connection (an HTTP upgrade); the
#: server (:mod:`kubelet_trio.httpserver.http11`) offers it. Defined here so that apps need no h11.
UPGRADE_EXTENSION = "kubelet.upgrade"


class HttpError(Exception):
    """Raised by a handler: answered with ``status`` and ``message`` (JSON when ``as_json``)."""

    def __init__(self, status: int, message: str, *, as_json: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.as_json = as_json


@attrs.frozen
class Request:
    method: str
    path: str
    query: Mapping[str, Sequence[str]]
    params: Mapping[str, str] = attrs.Factory(dict)
    #: The request's headers as sent (names lower-case), in order.
    headers: Sequence[tuple[str, str]] = ()
    #: Whether the connection can be taken over (an upgrade request on a server that hands it out).
    can_upgrade: bool = False
    #: The path as sent, percent-encoded (by default ``path`` encoded again): what routes match, decoding
    #: each segment once.
    raw_path: bytes = attrs.field(
        default=attrs.Factory(lambda self: urllib.parse.quote(self.path, safe="/").encode(), takes_self=True)
    )

    @classmethod
    def from_scope(cls, scope: Scope) -> Request:
        raw = scope.get("query_string", b"").decode("latin-1")
        path = scope["path"]
        raw_path = scope.get("raw_path")
        return cls(
            method=scope["method"],
            path=path,
            raw_path=bytes(raw_path) if raw_path else urllib.parse.quote(path, safe="/").encode(),
            query=urllib.parse.parse_qs(raw, keep_blank_values=True),
            headers=[(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope.get("headers", ())],
            can_upgrade=UPGRADE_EXTENSION in (scope.get("extensions") or {}),
        )

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None

    def arg(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None

    def flag(self, name: str) -> bool:
        """A boolean query parameter: present and not ``false``/``0`` (``?follow``, ``?follow=true``)."""
        value = self.arg(name)
        return value is not None and value.lower() not in ("false", "0")


@attrs.frozen
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = TEXT
    headers: Sequence[tuple[str, str]] = ()
    #: A streamed body: called with a ``write`` coroutine; ``body`` is sent first.
    stream: Callable[[Write], Awaitable[None]] | None = None
    #: Takes over the upgraded connection and writes the whole answer itself (status line included).
    upgrade: Callable[[trio.abc.Stream], Awaitable[None]] | None = None

    @classmethod
    def text(cls, text: str, status: int = 200) -> Response:
        return cls(status, text.encode(), TEXT)

    @classmethod
    def json(cls, obj: Any, status: int = 200) -> Response:
        return cls(status, json.dumps(obj, separators=(",", ":")).encode(), JSON)


Handler = Callable[[Request], Awaitable[Response]]


#: A parameter no handler should see: a separator decoded from ``%2F``, a control character.
_UNSAFE_PARAM = re.compile(r"[/\x00-\x1f\x7f]")
#: Control characters other than newline and tab, escaped where a 4xx message echoes request data.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_PARAM = re.compile(r"\{(\w+)\}")


def _segment(raw: bytes) -> str:
    return urllib.parse.unquote_to_bytes(raw).decode("utf-8", "replace")


def _invalid(value: str) -> bool:
    return value in (".", "..") or _UNSAFE_PARAM.search(value) is not None


def _printable(message: str) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", message)


@attrs.frozen
class Route:
    """``pattern`` with ``{name}`` segments (each matches one whole non-empty path segment)."""

    pattern: str
    handler: Handler
    methods: tuple[str, ...] = ("GET",)
    #: Per segment of the pattern: a literal, or the name of a parameter (``(True, name)``).
    _segments: tuple[tuple[bool, str], ...] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        segments = []
        for part in self.pattern.split("/"):
            param = _PARAM.fullmatch(part)
            segments.append((True, param.group(1)) if param else (False, part))
        object.__setattr__(self, "_segments", tuple(segments))

    def match(self, raw_path: bytes) -> dict[str, str] | None:
        """The parameters if the percent-encoded ``raw_path`` matches, each segment decoded once."""
        parts = raw_path.split(b"/")
        if len(parts) != len(self._segments):
            return None
        params: dict[str, str] = {}
        for (is_param, name), raw in zip(self._segments, parts, strict=True):
            value = _segment(raw)
            if is_param:
                if not value:
                    return None
                params[name] = value
            elif value != name:
                return None
        return params


@attrs.define(eq=False)
class App:
    """An ASGI application over a list of routes (first match wins)."""

    routes: Sequence[Route]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        request = Request.from_scope(scope)
        response = await self._dispatch(request)
        if response.upgrade is not None:
            if request.can_upgrade:
                stream = await scope["extensions"][UPGRADE_EXTENSION]["take"]()
                await response.upgrade(stream)
                return
            response = Response.text("Upgrade request required\n", 400)
        headers = [(b"content-type", response.content_type.encode())]
        headers += [(k.lower().encode(), v.encode()) for k, v in response.headers]
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        if response.stream is None:
            await send({"type": "http.response.body", "body": response.body})
            return
        await self._stream(response, receive, send)

    async def _dispatch(self, request: Request) -> Response:
        allowed: list[str] = []
        for route in self.routes:
            params = route.match(request.raw_path)
            if params is None:
                continue
            if request.method not in route.methods:  # case-sensitive: "get" is not GET
                allowed += route.methods
                continue
            invalid = [name for name, value in params.items() if _invalid(value)]
            if invalid:
                return Response.text(f"invalid {invalid[0]} in the request path\n", 400)
            try:
                return await route.handler(attrs.evolve(request, params=params))
            except HttpError as err:
                message = _printable(err.message) if err.status < 500 else err.message
                if err.as_json:
                    return Response.json({"message": message}, err.status)
                return Response.text(message + "\n", err.status)
        if allowed:
            return Response(
                405, b"Method Not Allowed\n", TEXT, [("Allow", ", ".join(dict.fromkeys(allowed)))]
            )
        return Response.text("404 page not found\n", 404)

    @staticmethod
    async def _stream(response: Response, receive: Receive, send: Send) -> None:
        assert response.stream is not None
        disconnected = False

        async def write(chunk: bytes) -> None:
            if chunk:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})

        async with trio.open_nursery() as nursery:

            async def watch_disconnect() -> None:
                nonlocal disconnected
                while (await receive())["type"] != "http.disconnect":
                    pass
                disconnected = True
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch_disconnect)
            await write(response.body)
            await response.stream(write)
            nursery.cancel_scope.cancel()
        if not disconnected:
            await send({"type": "http.response.body", "body": b""})

    @staticmethod
    async def _lifespan(receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
