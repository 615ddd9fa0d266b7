"""The Go kubelet 1.24 (``kubelet-go``, built by ``BUILD_ALL=1 build-envtest.sh``) as the reference tests run
it in kubelet-trio's place: one command line, so every reference run compares against the same settings."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = ["go_kubelet_command"]


def go_kubelet_command(
    binary: Path,
    *,
    kubeconfig: Path,
    root_dir: Path,
    cert_dir: Path,
    node: str,
    endpoint: str,
    port: int,
    healthz_port: int,
    read_only_port: int = 0,
    extra: Sequence[str] = (),
) -> list[str]:
    """Registering ``node`` with the API server of ``kubeconfig``, on the CRI runtime at ``endpoint``
    (``unix://...``); cgroups per QoS off and the host's NAT table left alone, as a test machine needs."""
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--root-dir={root_dir}",
        f"--cert-dir={cert_dir}",
        f"--hostname-override={node}",
        "--register-node=true",
        "--container-runtime=remote",
        f"--container-runtime-endpoint={endpoint}",
        "--cgroups-per-qos=false",
        "--enforce-node-allocatable=",
        "--cgroup-driver=cgroupfs",
        "--fail-swap-on=false",
        "--make-iptables-util-chains=false",  # leave the host's NAT table alone
        "--address=127.0.0.1",
        f"--port={port}",
        f"--read-only-port={read_only_port}",
        f"--healthz-port={healthz_port}",
        "--node-status-update-frequency=2s",
        *extra,
    ]
