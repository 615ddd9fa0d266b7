"""Probe handlers: exec, httpGet, tcpSocket and gRPC health checks (Go: ``pkg/probe/{exec,http,tcp,grpc}``).

Each returns ``(Result, output)``: ``FAILURE`` for anything the target did wrong (a non-zero exit, a
refused connection, a timeout, a 500); :class:`ProbeError` only when the probe could not be run at all
(the worker then throws the result away, like Go).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.prober.probe.result import ProbeError, Result

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "ProbeError": "kubelet_trio.prober.probe.result",
    "Result": "kubelet_trio.prober.probe.result",
}

__all__ = ["ProbeError", "Result"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
