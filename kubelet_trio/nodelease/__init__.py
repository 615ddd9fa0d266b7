"""The node Lease heartbeat (Go: ``component-helpers/apimachinery/lease``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.nodelease.controller import LEASE_NAMESPACE, NodeLeaseController

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "LEASE_NAMESPACE": "kubelet_trio.nodelease.controller",
    "NodeLeaseController": "kubelet_trio.nodelease.controller",
}

__all__ = ["LEASE_NAMESPACE", "NodeLeaseController"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
