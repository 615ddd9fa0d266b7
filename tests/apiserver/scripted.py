"""A scripted API server for client tests: a function from each request to its answer, served through the
fake API server's loopback, so the client under test is the production one (its h11 pool, on a socket)."""

from __future__ import annotations

import contextlib
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

import attrs
import trio

from kubelet_trio.client import ApiClient, open_api_client
from kubelet_trio.client.kubeconfig import KubeConfig
from kubelet_trio.testing.fakeapi import open_loopback


@attrs.frozen
class Seen:
    """A request as the server received it (header names lower-cased)."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes


@attrs.frozen
class Reply:
    """An answer: ``body`` whole, or with ``lines`` a streamed one (each line, then nothing more until the
    client goes away, as a watch that sends no more events)."""

    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    lines: tuple[bytes, ...] | None = None

    @classmethod
    def json(cls, obj: Any, status: int = 200, headers: tuple[tuple[str, str], ...] = ()) -> Reply:
        return cls(status, json.dumps(obj).encode(), (("content-type", "application/json"), *headers))


Handler = Callable[[Seen], "Reply | Awaitable[Reply]"]


@attrs.define
class _App:
    handler: Handler

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        seen = Seen(
            scope["method"],
            scope["path"],
            dict(parse_qsl(scope["query_string"].decode(), keep_blank_values=True)),
            {k.decode().lower(): v.decode() for k, v in scope["headers"]},
            body,
        )
        reply = self.handler(seen)
        if inspect.isawaitable(reply):
            reply = await reply
        assert isinstance(reply, Reply)
        headers = [(k.encode(), v.encode()) for k, v in reply.headers]
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        if reply.lines is None:
            await send({"type": "http.response.body", "body": reply.body})
            return
        for line in reply.lines:
            await send({"type": "http.response.body", "body": line + b"\n", "more_body": True})
        await trio.sleep_forever()


@contextlib.asynccontextmanager
async def scripted_api(
    handler: Handler, config: KubeConfig | None = None, server: str | None = None, **kwargs: Any
) -> AsyncIterator[ApiClient]:
    """An API client (for ``config``, or ``server``, by default ``http://api``) whose server answers every
    request with ``handler(request)``; ``kwargs`` go to :func:`~kubelet_trio.client.open_api_client`."""
    server = server or (None if config else "http://api")
    async with (
        open_loopback(_App(handler)) as loopback,
        open_api_client(config, server=server, connect=loopback.connect, **kwargs) as client,
    ):
        yield client
