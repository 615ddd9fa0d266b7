"""Fault isolation where outside bytes arrive: a failure while serving one peer is that peer's alone.

Structured concurrency propagates an exception up the nursery tree until something handles it, and for the
node's own work that is what we want: a bug in the sync loop should stop the node loudly. But an HTTP
connection, a streaming session, a gRPC stream, an API watch or a manifest file is driven by bytes someone
else chose, and an exception raised while handling them (a parser corner, a bug only that input reaches)
must not end the node. The Go kubelet gets this from ``net/http``, which recovers a panic per connection;
here each such place wraps its per-peer work in :func:`contain`: the error is logged once with the peer
(never a body or a credential), counted per boundary (``kubelet_trio_boundary_errors_total{boundary}`` on
``/metrics``), and the caller closes that peer. Cancellation always passes through.

A peer can also be refused before anything fails (a message over the size limit, a connection that never
completes its handshake, a request naming a path outside its directory): :func:`refused` counts it under
the same metric and logs it within a :class:`LogBudget`, so that a flood of bad peers costs a few lines.
Any text a peer chose that goes back into an error, a trailer or a log line passes through
:func:`truncate` first: its length is checked before anything is done with it.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from kubelet_trio.logs import kv

__all__ = [
    "BOUNDARIES",
    "MAX_ECHO",
    "MAX_MESSAGE",
    "BoundaryErrors",
    "Contained",
    "LogBudget",
    "contain",
    "refused",
    "summarise_refusals",
    "truncate",
]

logger = logging.getLogger(__name__)

#: The boundaries, by label value: where outside input reaches the node.
BOUNDARIES = (
    "http",  # a connection to the Kubelet API, read-only or healthz port
    "streaming",  # an exec/attach/port-forward session
    "grpc",  # a gRPC stream from the runtime or a plugin, or a connection to a server we serve
    "apiwatch",  # a list or watch of the API server
    "manifest",  # a static pod manifest file or URL
    "device-plugin-registration",  # a connection to the device plugin registration socket
    "pod-resources",  # a connection to the pod resources API socket
)

#: Characters of a peer's text kept when it is echoed (a resource name, an error a plugin sent): enough to
#: recognise it, too few to cost anything where it goes (HPACK's Huffman coder is quadratic in a header).
MAX_ECHO = 256
#: characters of a message around such an echo (Go's words and a truncated field or two)
MAX_MESSAGE = 4 * MAX_ECHO


def truncate(text: str, limit: int = MAX_ECHO) -> str:
    """``text`` if it has at most ``limit`` characters, else its first ``limit`` and its length:
    ``"<first 256 chars>... (524288 bytes)"`` (its UTF-8 length, as the peer sent it)."""
    if len(text) <= limit:
        return text
    size = len(text.encode("utf-8", "surrogatepass"))
    return f"{text[:limit]}... ({size} bytes)"


@attrs.define(eq=False)
class BoundaryErrors:
    """Counts of contained failures by boundary; the node's metrics read them at scrape time."""

    counts: Counter[str] = attrs.Factory(Counter)

    def record(self, boundary: str) -> None:
        self.counts[boundary] += 1


@attrs.define(eq=False)
class Contained:
    """What :func:`contain` caught (``error`` stays ``None`` when the body ended normally)."""

    error: Exception | None = None


@contextlib.contextmanager
def contain(
    boundary: str,
    errors: BoundaryErrors | None = None,
    *,
    on_error: Callable[[Exception], None] | None = None,
    **peer: Any,
) -> Iterator[Contained]:
    """Run the body as one peer's work: an ``Exception`` (or a group of them) is logged with ``peer``'s
    fields, counted under ``boundary``, passed to ``on_error`` and swallowed; ``Cancelled`` and other
    ``BaseException`` parts propagate. The caller then closes the peer (``result.error`` says so)."""
    result = Contained()
    try:
        yield result
    except* Exception as group:
        error: Exception = group.exceptions[0] if len(group.exceptions) == 1 else group
        result.error = error
        if errors is not None:
            errors.record(boundary)
        logger.error(
            "Peer failed; closing it",
            exc_info=error,
            extra=kv(boundary=boundary, **peer),
        )
        if on_error is not None:
            on_error(error)


@attrs.define(eq=False)
class LogBudget:
    """At most ``burst`` lines per ``period`` seconds for lines a peer can cause; the others are counted.

    The clock is the caller's (``trio.current_time()`` in Trio, ``loop.time()`` on an asyncio thread), so
    one budget serves either side; it is not thread-safe, so each budget stays on one thread.
    """

    period: float = 10.0
    burst: int = 5
    _window: float = -math.inf  # start of the current period
    _used: int = 0
    _suppressed: int = 0

    def _refill(self, now: float) -> None:
        if now - self._window >= self.period:
            self._window, self._used = now, 0

    def take(self, now: float) -> int | None:
        """``None``: do not log (the line is counted as suppressed); else log, adding the returned count
        of lines suppressed since the last one that was logged."""
        self._refill(now)
        if self._used >= self.burst:
            self._suppressed += 1
            return None
        self._used += 1
        suppressed, self._suppressed = self._suppressed, 0
        return suppressed

    def flush(self, now: float) -> int | None:
        """The count of suppressed lines, once the budget allows a line again (for a trailing summary);
        ``None`` when nothing was suppressed or the budget is still spent."""
        self._refill(now)
        if not self._suppressed or self._used >= self.burst:
            return None
        return self.take(now)


def refused(
    boundary: str,
    errors: BoundaryErrors | None,
    reason: str,
    *,
    budget: LogBudget | None = None,
    now: float = 0.0,
    **peer: Any,
) -> bool:
    """A peer refused at ``boundary`` (``reason``: a constant text): counted, and logged with ``peer``'s
    fields (text ones truncated to :data:`MAX_MESSAGE`) when ``budget`` allows (``now`` on the budget's
    clock). Returns whether it was logged: if not, the caller has :func:`summarise_refusals` called one
    ``budget.period`` later."""
    if errors is not None:
        errors.record(boundary)
    suppressed = 0 if budget is None else budget.take(now)
    if suppressed is None:
        return False
    fields = {
        key: truncate(value, MAX_MESSAGE) if isinstance(value, str) else value for key, value in peer.items()
    }
    if suppressed:
        fields["suppressed"] = suppressed
    logger.warning("Peer refused", extra=kv(boundary=boundary, reason=reason, **fields))
    return True


def summarise_refusals(boundary: str, budget: LogBudget, now: float) -> None:
    """One line for the refusals ``budget`` held back, if any (their count; the metric has them all)."""
    suppressed = budget.flush(now)
    if suppressed:
        logger.warning("Peers refused", extra=kv(boundary=boundary, suppressed=suppressed))
