"""Container lifecycle hooks: postStart and preStop handlers (Go: ``pkg/kubelet/lifecycle/handlers.go``)."""

from __future__ import annotations

from kubelet_trio.lifecycle.handlers import HandlerRunner, HookError

__all__ = ["HandlerRunner", "HookError"]
