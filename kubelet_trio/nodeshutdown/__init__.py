"""Graceful node shutdown (Go: ``pkg/kubelet/nodeshutdown``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.nodeshutdown.manager import (
        NODE_SHUTDOWN_MESSAGE,
        NODE_SHUTDOWN_REASON,
        SHUTTING_DOWN,
        NodeShutdownManager,
        PodTerminator,
        PriorityGroup,
        group_by_priority,
        migrate_config,
    )
    from kubelet_trio.nodeshutdown.trigger import ShutdownSocket, TriggerError, request_shutdown, socket_path

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "NODE_SHUTDOWN_MESSAGE": "kubelet_trio.nodeshutdown.manager",
    "NODE_SHUTDOWN_REASON": "kubelet_trio.nodeshutdown.manager",
    "SHUTTING_DOWN": "kubelet_trio.nodeshutdown.manager",
    "NodeShutdownManager": "kubelet_trio.nodeshutdown.manager",
    "PodTerminator": "kubelet_trio.nodeshutdown.manager",
    "PriorityGroup": "kubelet_trio.nodeshutdown.manager",
    "group_by_priority": "kubelet_trio.nodeshutdown.manager",
    "migrate_config": "kubelet_trio.nodeshutdown.manager",
    "ShutdownSocket": "kubelet_trio.nodeshutdown.trigger",
    "TriggerError": "kubelet_trio.nodeshutdown.trigger",
    "request_shutdown": "kubelet_trio.nodeshutdown.trigger",
    "socket_path": "kubelet_trio.nodeshutdown.trigger",
}

__all__ = [
    "NODE_SHUTDOWN_MESSAGE",
    "NODE_SHUTDOWN_REASON",
    "SHUTTING_DOWN",
    "NodeShutdownManager",
    "PodTerminator",
    "PriorityGroup",
    "ShutdownSocket",
    "TriggerError",
    "group_by_priority",
    "migrate_config",
    "request_shutdown",
    "socket_path",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
