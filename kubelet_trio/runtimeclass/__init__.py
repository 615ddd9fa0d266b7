"""RuntimeClasses from the API server, resolved to CRI runtime handlers (Go: ``pkg/kubelet/runtimeclass``)."""

from kubelet_trio.runtimeclass.manager import (
    RUNTIME_CLASSES_PATH,
    RuntimeClassesUnavailable,
    RuntimeClassManager,
    RuntimeClassNotFound,
)

__all__ = ["RUNTIME_CLASSES_PATH", "RuntimeClassManager", "RuntimeClassNotFound", "RuntimeClassesUnavailable"]
