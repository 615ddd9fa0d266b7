"""What the API client reports each request to (Go: ``k8s.io/client-go/tools/metrics``: ``RequestResult``
and ``RequestLatency``).

A Protocol, so the client does not depend on the metrics module; the node builder hands the client its
:class:`~kubelet_trio.metrics.KubeletMetrics`.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["ERROR_CODE", "RequestMetrics"]

#: The ``code`` of an attempt that got no HTTP answer (client-go: errors are unbounded strings).
ERROR_CODE = "<error>"


class RequestMetrics(Protocol):
    def request_result(self, code: str, method: str, host: str) -> None:
        """One attempt's answer: its HTTP status code, or :data:`ERROR_CODE` when none came."""
        ...

    def request_latency(self, verb: str, host: str, seconds: float) -> None:
        """A request's latency, retries included (watches: until the stream opened)."""
        ...
