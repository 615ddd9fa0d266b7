"""The node Lease heartbeat (Go: ``component-helpers/apimachinery/lease``)."""

from __future__ import annotations

from kubelet_trio.nodelease.controller import LEASE_NAMESPACE, NodeLeaseController

__all__ = ["LEASE_NAMESPACE", "NodeLeaseController"]
