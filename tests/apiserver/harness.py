"""An API-mode node for tests: a Kubelet on SimRuntime, fed by (and reporting to) a fake API server.

::

    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock) as node:
        api.create_pod(manifest)           # the scheduler's part: spec.nodeName = node.name
        await api.wait_for(lambda: api.pod("web")["status"]["phase"] == "Running")

Static pods are fed through a ``file`` source the test controls (``node.set_static_pods``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import trio
import trio_util
import yaml

from kubelet_trio.api import Pod, default_pod
from kubelet_trio.apimode import (
    ApiMode,
    ApiModeOptions,
    open_kubeconfig_client,
)
from kubelet_trio.client import ApiClient
from kubelet_trio.clock import WallClock
from kubelet_trio.config.podconfig import PodConfig
from kubelet_trio.config.static import make_static_pod
from kubelet_trio.config.types import API_SOURCE, FILE_SOURCE, SourceSet
from kubelet_trio.cri.remote import open_cri_runtime
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.fsio import RunSync, run_in_thread, run_inline
from kubelet_trio.kubelet import Kubelet, KubeletConfig
from kubelet_trio.kubelet_builder import KubeletDeps, open_kubelet
from kubelet_trio.nodestatus import MachineInfo
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.testing.env import LocalCriEnvironment, remove_all_pods
from kubelet_trio.testing.node import temporary_root
from kubelet_trio.testing.pods import pod_manifest as sim_pod_manifest
from tests.fakeapi import FakeApi, open_fake_api, serve_fake_api

MACHINE = MachineInfo(
    num_cores=4,
    memory_bytes=8 * 1024**3,
    ephemeral_storage_bytes=100 * 1024**3,
    machine_id="0123456789abcdef0123456789abcdef",
    system_uuid="4c4c4544-0000-0000-0000-000000000000",
    boot_id="11111111-2222-3333-4444-555555555555",
    kernel_version="6.1.0-test",
    os_image="Debian GNU/Linux 12 (bookworm)",
    operating_system="linux",
    architecture="amd64",
)

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


@attrs.define(eq=False)
class ApiNode:
    name: str
    kubelet: Kubelet
    sim: Any  # the runtime: a SimRuntime unless one was passed
    mode: ApiMode
    client: ApiClient
    _static: trio.MemorySendChannel[SourceSet]

    async def set_static_pods(self, *manifests: Mapping[str, Any]) -> list[Pod]:
        pods = [
            make_static_pod(
                default_pod(Pod.from_dict(dict(m))),
                node_name=self.name,
                source=FILE_SOURCE,
                origin=f"file:/{i}",
            )
            for i, m in enumerate(manifests)
        ]
        await self._static.send(SourceSet(FILE_SOURCE, tuple(pods)))
        return pods


@contextlib.asynccontextmanager
async def open_api_node(
    api: FakeApi | None,
    name: str = "node-1",
    *,
    clock: WallClock | None = None,
    sim: Runtime | None = None,
    client: ApiClient | None = None,
    run_sync: RunSync = run_inline,
    options: ApiModeOptions | None = None,
    **config: Any,
) -> AsyncIterator[ApiNode]:
    """A node on ``sim`` (default: a new SimRuntime; any Runtime works) talking to ``api`` through its
    in-process transport, or through ``client`` when given (a real loopback connection)."""
    clock = clock or WallClock()
    sim = sim or SimRuntime(clock=clock, run_sync=run_inline)
    if isinstance(sim, SimRuntime):  # simulated containers cannot see tmpfs mounts
        config.setdefault("memory_backed_volumes", False)
    options = options or ApiModeOptions(machine=MACHINE)
    with temporary_root("kubelet-trio-apinode-") as tmp:
        kubelet_config = KubeletConfig(
            node_name=name,
            pod_logs_dir=f"{tmp}/pod-logs",
            root_dir=config.pop("root_dir", f"{tmp}/root"),
            node_ips=config.pop("node_ips", ("192.0.2.10",)),
            **config,
        )
        pod_config = PodConfig(sources=(API_SOURCE, FILE_SOURCE), now=clock.now)
        static = pod_config.source_channel(FILE_SOURCE)
        async with contextlib.AsyncExitStack() as stack:
            if client is None:
                assert api is not None, "open_api_node needs a fake API server or a client"
                client = await stack.enter_async_context(api.client())
            await stack.enter_async_context(static)
            deps = KubeletDeps(
                runtime=sim,
                pod_config=pod_config,
                clock=clock,
                run_sync=run_sync,
                api_client=client,
                api_options=options,
            )
            built = await stack.enter_async_context(open_kubelet(kubelet_config, deps))
            assert built.api is not None
            await static.send(SourceSet(FILE_SOURCE, ()))
            yield ApiNode(name, built.kubelet, sim, built.api, client, static)


async def eventually(check: Callable[[], bool], limit: float, period: float = 1.0) -> None:
    """Poll ``check`` every ``period`` seconds until it holds (for state the store does not see)."""
    with trio.fail_after(limit):
        async with contextlib.aclosing(trio_util.periodic(period)) as ticks:
            async for _ in ticks:
                if check():
                    return


def node_ready(api: FakeApi, node_name: str) -> bool:
    """The Node object exists and says Ready=True."""
    try:
        conditions = api.node(node_name)["status"]["conditions"]
    except Exception:
        return False
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def write_kubeconfig(path: Path, url: str, token: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "fake",
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "kubelet"}}],
                "clusters": [{"name": "fake", "cluster": {"server": url}}],
                "users": [{"name": "kubelet", "user": {"token": token}}],
            }
        )
    )
    return path


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
