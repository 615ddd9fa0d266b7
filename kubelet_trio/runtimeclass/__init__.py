"""RuntimeClasses from the API server, resolved to CRI runtime handlers (Go: ``pkg/kubelet/runtimeclass``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.runtimeclass.manager import (
        RUNTIME_CLASSES_PATH,
        RuntimeClassesUnavailable,
        RuntimeClassManager,
        RuntimeClassNotFound,
    )

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "RUNTIME_CLASSES_PATH": "kubelet_trio.runtimeclass.manager",
    "RuntimeClassesUnavailable": "kubelet_trio.runtimeclass.manager",
    "RuntimeClassManager": "kubelet_trio.runtimeclass.manager",
    "RuntimeClassNotFound": "kubelet_trio.runtimeclass.manager",
}

__all__ = ["RUNTIME_CLASSES_PATH", "RuntimeClassManager", "RuntimeClassNotFound", "RuntimeClassesUnavailable"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
