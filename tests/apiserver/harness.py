"""Helpers of the API-mode tests; the node itself is :mod:`kubelet_trio.testing.apinode` (public).

::

    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock) as node:
        api.create_pod(manifest)           # the scheduler's part: spec.nodeName = node.name
        await api.wait_for(lambda: api.pod("web")["status"]["phase"] == "Running")
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import trio
import trio_util

from kubelet_trio.apimode import ApiModeOptions, open_kubeconfig_client
from kubelet_trio.client import ApiClient
from kubelet_trio.cri.remote import open_cri_runtime
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.fsio import run_in_thread
from kubelet_trio.testing.apinode import MACHINE, ApiNode, node_ready, open_api_node, write_kubeconfig
from kubelet_trio.testing.env import LocalCriEnvironment, remove_all_pods
from kubelet_trio.testing.fakeapi import FakeApi, open_fake_api, serve_fake_api
from kubelet_trio.testing.pods import pod_manifest as sim_pod_manifest

__all__ = [
    "MACHINE",
    "SIM",
    "ApiNode",
    "FakeApi",
    "eventually",
    "node_ready",
    "open_api_node",
    "open_containerd_api_node",
    "open_fake_api",
    "pod_manifest",
    "serve_fake_api",
    "write_kubeconfig",
]

SIM = "sim.kubelet-trio.io/"


def pod_manifest(
    name: str,
    containers: Mapping[str, str],
    *,
    node: str = "node-1",
    restart_policy: str = "Always",
    **spec: Any,
) -> dict[str, Any]:
    """A pod bound to ``node`` whose containers follow SimRuntime scripts (``run``, ``exit 1 after 5s``)."""
    return sim_pod_manifest(name, containers, node=node, restart_policy=restart_policy, **spec)


async def eventually(check: Callable[[], bool], limit: float, period: float = 1.0) -> None:
    """Poll ``check`` every ``period`` seconds until it holds (for state the store does not see)."""
    with trio.fail_after(limit):
        async with contextlib.aclosing(trio_util.periodic(period)) as ticks:
            async for _ in ticks:
                if check():
                    return


@contextlib.asynccontextmanager
async def open_containerd_api_node(
    cri_env: LocalCriEnvironment,
    tmp_path: Path,
    node_name: str,
    *,
    options: ApiModeOptions | None = None,
    **node_options: Any,
) -> AsyncIterator[tuple[FakeApi, ApiClient, Runtime, Any]]:
    """An API-mode node on real containerd behind the fake API server, reached over loopback HTTP through
    a kubeconfig; every pod of the runtime is removed afterwards."""
    try:
        async with open_fake_api() as api, serve_fake_api(api.app) as url:
            api.app.token = "node-token"
            kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", url, "node-token")
            async with (
                open_kubeconfig_client(str(kubeconfig)) as client,
                open_cri_runtime(cri_env.endpoint, request_timeout=30) as runtime,
                open_api_node(
                    api,
                    node_name,
                    sim=runtime,
                    client=client,
                    run_sync=run_in_thread,
                    options=options or ApiModeOptions(machine=MACHINE),
                    **node_options,
                ) as node,
            ):
                yield api, client, runtime, node
    finally:
        with trio.move_on_after(60, shield=True):
            await remove_all_pods(cri_env.endpoint)
