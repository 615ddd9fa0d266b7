"""A runtime-side streaming server (Go: ``pkg/kubelet/cri/streaming``): SPDY/3.1 sessions for exec,
attach (``v4.channel.k8s.io``) and port-forward (``portforward.k8s.io``) behind one-time URLs, for
runtimes that have no streaming server of their own (the simulated one)."""

from __future__ import annotations

from kubelet_trio.cri.streaming.remotecommand import ExecError, ExecIO, TerminalSize
from kubelet_trio.cri.streaming.server import StreamingBackend, StreamingServer

__all__ = ["ExecError", "ExecIO", "StreamingBackend", "StreamingServer", "TerminalSize"]
