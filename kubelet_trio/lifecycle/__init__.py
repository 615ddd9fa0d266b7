"""Container lifecycle hooks: postStart and preStop handlers (Go: ``pkg/kubelet/lifecycle/handlers.go``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.lifecycle.handlers import HandlerRunner, HookError

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "HandlerRunner": "kubelet_trio.lifecycle.handlers",
    "HookError": "kubelet_trio.lifecycle.handlers",
}

__all__ = ["HandlerRunner", "HookError"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
