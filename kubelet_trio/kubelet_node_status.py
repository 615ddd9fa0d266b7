"""The Node as the Kubelet knows it: the IPs it defaults to and the events it records about itself.

Go: ``pkg/kubelet/kubelet_node_status.go``. Registration and the status reports themselves are the
``nodestatus`` package's; what the Kubelet answers them (health, pressure, extended resources, the
``NodeHost`` protocol) stays on the :class:`~kubelet_trio.kubelet.Kubelet` class body.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kubelet_trio.logs import kv
from kubelet_trio.nodestatus.addresses import NodeAddressError, choose_node_ip, read_host_network

if TYPE_CHECKING:
    from kubelet_trio.images.gc import NodeEventSink

# the Kubelet's own logger, whichever of its modules writes the line
logger = logging.getLogger("kubelet_trio.kubelet")


def default_node_ips() -> tuple[str, ...]:
    """For an embedding that passes no node IPs: the default-route interface's address (no name lookup
    here; the daemon resolves the node name first, as Go: ``nodestatus.resolve_node_ips``)."""
    try:
        network = read_host_network()
        return (choose_node_ip(node_ip="", node_name="", hostname="", resolved=(), network=network),)
    except (NodeAddressError, OSError):
        return ("127.0.0.1",)


def record_node_event(sink: NodeEventSink | None, type_: str, reason: str, message: str) -> None:
    """Events about the Node (FreeDiskSpaceFailed, NodeShutdown, ...): logged, and to ``sink`` when there is
    one (API mode: the API server)."""
    logger.info("node event", extra=kv(type=type_, reason=reason, message=message))
    if sink is not None:
        sink(type_, reason, message)
