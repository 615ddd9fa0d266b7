"""containerd started by kubelet-trio: its configuration, its pod network and its supervision.

The daemon's ``--container-runtime managed`` runs one (:func:`open_managed_containerd`); the test
environment (:mod:`kubelet_trio.testing.containerd`) starts the same configuration synchronously.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import trio

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
    host_routes,
    nat_rules,
)
from kubelet_trio.containerd.supervisor import ManagedContainerd, RestartBackoff, cri_plugin_ready

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
    "host_routes",
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
    managed = ManagedContainerd(
        Path(root_dir) / "containerd", sandbox_image=sandbox_image or DEFAULT_SANDBOX_IMAGE, subnet=subnet
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(managed.run)
        yield managed
        nursery.cancel_scope.cancel()
