"""Watch events: newline-delimited JSON ``{"type": ..., "object": ...}`` read off a streaming response.

The pump runs in the watch's own nursery (see ``ApiClient.open_watch``) and hands events over a channel.
The channel is unbounded on purpose: the pump must only ever wait *inside* the transport's chain of
async generators, so that cancelling it finishes them; parked on a full channel it would abandon them
half-way (Trio then warns when they are collected). A watch's volume is bounded by the server (one
node's pods) and by its ``timeoutSeconds``. A broken stream or an undecodable line ends the stream with a
synthetic ``ERROR`` event (code 503), so consumers handle "the server said so" and "the connection died"
on one path. A line that is not an event (not JSON, not an object with a ``type`` and an object as its
``object``), or longer than :data:`MAX_EVENT`, is also marked :attr:`WatchEvent.undecodable`: the
reflector relists rather than re-watch from where the server would send it again (client-go's reflector
does the same after a decode error).

Lines are cut from the body's pieces in linear time: one buffer, each byte searched for a newline once
(joining the rest to each new piece and splitting again cost 47 s of CPU on one 64 MiB line).
"""

from __future__ import annotations

import contextlib
import logging
import math
from typing import TYPE_CHECKING, Any

import attrs
import trio

from kubelet_trio.api import gojson
from kubelet_trio.client.errors import StatusError, status_error

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Callable

__all__ = [
    "ADDED",
    "BOOKMARK",
    "DELETED",
    "ERROR",
    "MAX_EVENT",
    "MODIFIED",
    "WATCH_BUFFER",
    "UndecodableEvent",
    "WatchEvent",
]

logger = logging.getLogger(__name__)

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
BOOKMARK = "BOOKMARK"
ERROR = "ERROR"
#: Events decoded ahead of the consumer: unbounded (see the module docstring).
WATCH_BUFFER = math.inf
#: Longest watch event (one line of JSON), as client-go's streaming decoder allows
#: (apimachinery ``runtime/serializer/streaming``: ``maxBytes`` 16 MiB, then ``ErrObjectTooLarge``).
#: etcd keeps objects of at most 1.5 MiB, so a longer line is not an object the server stores.
MAX_EVENT = 16 * 1024 * 1024


class UndecodableEvent(Exception):
    """The watch stream carried something that is not an event."""


@attrs.frozen
class WatchEvent:
    type: str
    object: dict[str, Any]
    #: A synthetic ERROR event for a line that is not an event (see the module docstring).
    undecodable: bool = False

    @property
    def resource_version(self) -> str | None:
        meta = self.object.get("metadata")
        return meta.get("resourceVersion") if isinstance(meta, dict) else None

    def error(self) -> StatusError:
        """The ``Status`` of an ERROR event as a typed error (``Gone`` for 410)."""
        code = self.object.get("code")
        return status_error(int(code) if isinstance(code, int) else 500, self.object)

    @classmethod
    def stream_error(cls, message: str, *, undecodable: bool = False) -> WatchEvent:
        return cls(
            ERROR,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "code": 503,
                "reason": "ServiceUnavailable",
                "message": message,
            },
            undecodable,
        )


async def pump_watch_events(
    pieces: AsyncGenerator[bytes, None],
    send: trio.MemorySendChannel[WatchEvent],
    broken: tuple[type[BaseException], ...],
    max_event: int = MAX_EVENT,
) -> None:
    """Cut the body's ``pieces`` into lines and decode them into events until the stream ends (closes
    ``send``); one of ``broken`` (the transport's errors) ends it with a synthetic ERROR event, a line
    longer than ``max_event`` with an undecodable one. Never blocks on ``send``."""
    with send, contextlib.suppress(trio.BrokenResourceError):
        try:
            async with contextlib.aclosing(pieces):  # closed also when a line too long ends it early
                complete = await _cut_lines(pieces, _EventDecoder(send).line, max_event)
        except broken as err:
            message = f"watch stream broken: {type(err).__name__}: {err}".rstrip(": ")
            send.send_nowait(WatchEvent.stream_error(message))
            return
        if not complete:
            message = f"watch event longer than {max_event} bytes"
            send.send_nowait(WatchEvent.stream_error(message, undecodable=True))


async def _cut_lines(
    pieces: AsyncGenerator[bytes, None], line: Callable[[bytearray], None], max_line: int
) -> bool:
    """Hand each line of ``pieces`` (the last one even without a newline) to ``line``; False when a line
    is longer than ``max_line``. One buffer, each byte searched once, consumed lines cut off its front
    (which a bytearray does without moving the rest)."""
    buffer = bytearray()
    async for piece in pieces:
        scanned = len(buffer)  # the bytes before have no newline
        buffer += piece
        start = 0
        while (end := buffer.find(b"\n", scanned)) >= 0 and end - start <= max_line:
            line(buffer[start:end])
            start = scanned = end + 1
        del buffer[:start]
        if len(buffer) > max_line:  # a line too long, complete or not
            return False
    line(buffer)
    return True


class _EventDecoder:
    """Lines to events; after an undecodable line, the rest is drained (the consumer stops this watch)."""

    def __init__(self, send: trio.MemorySendChannel[WatchEvent]) -> None:
        self.send = send
        self.failed = False

    def line(self, line: bytearray) -> None:
        if self.failed or not line.strip():
            return
        try:
            data = gojson.loads(bytes(line))
            obj = data.get("object") or {}
            if not isinstance(obj, dict):
                raise TypeError(f"object is a {type(obj).__name__}")
            event = WatchEvent(str(data["type"]), obj)
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
            message = f"undecodable watch event: {type(err).__name__}: {err}"
            self.send.send_nowait(WatchEvent.stream_error(message, undecodable=True))
            self.failed = True
            return
        self.send.send_nowait(event)
