"""A runtime-side streaming server (Go: ``pkg/kubelet/cri/streaming``): SPDY/3.1 sessions for exec,
attach (``v4.channel.k8s.io``) and port-forward (``portforward.k8s.io``) behind one-time URLs, for
runtimes that have no streaming server of their own (the simulated one)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.cri.streaming.remotecommand import ExecError, ExecIO, TerminalSize
    from kubelet_trio.cri.streaming.server import StreamingBackend, StreamingServer

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "ExecError": "kubelet_trio.cri.streaming.remotecommand",
    "ExecIO": "kubelet_trio.cri.streaming.remotecommand",
    "TerminalSize": "kubelet_trio.cri.streaming.remotecommand",
    "StreamingBackend": "kubelet_trio.cri.streaming.server",
    "StreamingServer": "kubelet_trio.cri.streaming.server",
}

__all__ = ["ExecError", "ExecIO", "StreamingBackend", "StreamingServer", "TerminalSize"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
