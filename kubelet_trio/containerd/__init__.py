"""containerd started by kubelet-trio: its configuration, its pod network and its supervision.

The daemon's ``--container-runtime managed`` runs one (:func:`open_managed_containerd`); the test
environment (:mod:`kubelet_trio.testing.containerd`) starts the same configuration synchronously.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.containerd.config import (
        DEFAULT_SANDBOX_IMAGE,
        ContainerdLayout,
        cni_bin_dir,
        cni_conflist,
        render_config,
        write_config,
        write_registry_hosts,
    )
    from kubelet_trio.containerd.network import (
        PodNetwork,
        claim_network,
        clean_stale_networks,
        host_links,
        nat_rules,
    )
    from kubelet_trio.containerd.supervisor import ManagedContainerd, RestartBackoff, cri_plugin_ready

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "DEFAULT_SANDBOX_IMAGE": "kubelet_trio.containerd.config",
    "ContainerdLayout": "kubelet_trio.containerd.config",
    "cni_bin_dir": "kubelet_trio.containerd.config",
    "cni_conflist": "kubelet_trio.containerd.config",
    "render_config": "kubelet_trio.containerd.config",
    "write_config": "kubelet_trio.containerd.config",
    "write_registry_hosts": "kubelet_trio.containerd.config",
    "PodNetwork": "kubelet_trio.containerd.network",
    "claim_network": "kubelet_trio.containerd.network",
    "clean_stale_networks": "kubelet_trio.containerd.network",
    "host_links": "kubelet_trio.containerd.network",
    "nat_rules": "kubelet_trio.containerd.network",
    "ManagedContainerd": "kubelet_trio.containerd.supervisor",
    "RestartBackoff": "kubelet_trio.containerd.supervisor",
    "cri_plugin_ready": "kubelet_trio.containerd.supervisor",
}

__all__ = [
    "DEFAULT_SANDBOX_IMAGE",
    "ContainerdLayout",
    "ManagedContainerd",
    "PodNetwork",
    "RestartBackoff",
    "claim_network",
    "clean_stale_networks",
    "cni_bin_dir",
    "cni_conflist",
    "cri_plugin_ready",
    "host_links",
    "nat_rules",
    "open_managed_containerd",
    "render_config",
    "write_config",
    "write_registry_hosts",
]


@contextlib.asynccontextmanager
async def open_managed_containerd(
    root_dir: str | Path, *, sandbox_image: str = "", subnet: str | None = None
) -> AsyncIterator[ManagedContainerd]:
    """Run a supervised containerd under ``<root_dir>/containerd`` for the block; yields once it is
    ready. Leaving the block stops containerd (pods keep running under their shims)."""
    import trio  # here, not above: importing the package loads none of its stack

    from kubelet_trio.containerd.config import DEFAULT_SANDBOX_IMAGE
    from kubelet_trio.containerd.supervisor import ManagedContainerd

    managed = ManagedContainerd(
        Path(root_dir) / "containerd", sandbox_image=sandbox_image or DEFAULT_SANDBOX_IMAGE, subnet=subnet
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(managed.run)
        yield managed
        nursery.cancel_scope.cancel()


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
