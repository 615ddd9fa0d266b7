"""Graceful node shutdown (Go: ``pkg/kubelet/nodeshutdown``)."""

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
