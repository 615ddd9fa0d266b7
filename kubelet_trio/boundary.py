"""Fault isolation where outside bytes arrive: a failure while serving one peer is that peer's alone.

Structured concurrency propagates an exception up the nursery tree until something handles it, and for the
node's own work that is what we want: a bug in the sync loop should stop the node loudly. But an HTTP
connection, a streaming session, a gRPC stream, an API watch or a manifest file is driven by bytes someone
else chose, and an exception raised while handling them (a parser corner, a bug only that input reaches)
must not end the node. The Go kubelet gets this from ``net/http``, which recovers a panic per connection;
here each such place wraps its per-peer work in :func:`contain`: the error is logged once with the peer
(never a body or a credential), counted per boundary (``kubelet_trio_boundary_errors_total{boundary}`` on
``/metrics``), and the caller closes that peer. Cancellation always passes through.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from kubelet_trio.logs import kv

__all__ = ["BOUNDARIES", "BoundaryErrors", "Contained", "contain"]

logger = logging.getLogger(__name__)

#: The boundaries, by label value: where outside input reaches the node.
BOUNDARIES = (
    "http",  # a connection to the Kubelet API, read-only or healthz port
    "streaming",  # an exec/attach/port-forward session
    "grpc",  # a gRPC stream from the runtime or a plugin, or a connection to a server we serve
    "apiwatch",  # a list or watch of the API server
    "manifest",  # a static pod manifest file or URL
)


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
