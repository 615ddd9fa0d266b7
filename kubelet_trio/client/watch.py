"""Watch events: newline-delimited JSON ``{"type": ..., "object": ...}`` read off a streaming response.

The pump runs in the watch's own nursery (see ``ApiClient.open_watch``) and hands events over a channel.
The channel is unbounded on purpose: the pump must only ever wait *inside* httpx's chain of async
generators, so that cancelling it finishes them; parked on a full channel it would abandon them
half-way (Trio then warns when they are collected). A watch's volume is bounded by the server (one
node's pods) and by its ``timeoutSeconds``. A broken stream or an undecodable line ends the stream with a
synthetic ``ERROR`` event (code 503), so consumers handle "the server said so" and "the connection died"
on one path. A line that is not an event (not JSON, not an object with a ``type`` and an object as its
``object``) is also marked :attr:`WatchEvent.undecodable`: the reflector relists rather than re-watch from
where the server would send it again (client-go's reflector does the same after a decode error).
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
    from collections.abc import AsyncIterator

__all__ = [
    "ADDED",
    "BOOKMARK",
    "DELETED",
    "ERROR",
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
    lines: AsyncIterator[str | bytes],
    send: trio.MemorySendChannel[WatchEvent],
    broken: tuple[type[BaseException], ...],
) -> None:
    """Decode ``lines`` into events until the stream ends (closes ``send``); one of ``broken`` (the
    transport's errors) ends it with a synthetic ERROR event. Never blocks on ``send``."""
    with send, contextlib.suppress(trio.BrokenResourceError):
        failed = False
        try:
            async for line in lines:
                if failed or not line.strip():
                    continue  # after a bad line, drain: the consumer stops this watch
                try:
                    data = gojson.loads(line)
                    obj = data.get("object") or {}
                    if not isinstance(obj, dict):
                        raise TypeError(f"object is a {type(obj).__name__}")
                    event = WatchEvent(str(data["type"]), obj)
                except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
                    message = f"undecodable watch event: {type(err).__name__}: {err}"
                    send.send_nowait(WatchEvent.stream_error(message, undecodable=True))
                    failed = True
                    continue
                send.send_nowait(event)
        except broken as err:
            send.send_nowait(
                WatchEvent.stream_error(f"watch stream broken: {type(err).__name__}: {err}".rstrip(": "))
            )
