"""An API-mode node for test harnesses: a Kubelet on the simulated runtime, fed by and reporting to an API
server (the fake one in-process, or any server through an :class:`~kubelet_trio.client.ApiClient`).

::

    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock) as node:
        api.create_pod(manifest)           # the scheduler's part: spec.nodeName = node.name
        await api.wait_for(lambda: api.pod("web")["status"]["phase"] == "Running")

Static pods are fed through a ``file`` source the caller controls (:meth:`ApiNode.set_static_pods`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from kubelet_trio.api import Pod, default_pod
from kubelet_trio.apimode import ApiMode, ApiModeOptions
from kubelet_trio.client import ApiClient
from kubelet_trio.clock import WallClock
from kubelet_trio.config.podconfig import PodConfig
from kubelet_trio.config.static import make_static_pod
from kubelet_trio.config.types import FILE_SOURCE, SourceSet
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.fsio import RunSync, run_inline
from kubelet_trio.kubelet import Kubelet, KubeletConfig
from kubelet_trio.kubelet_builder import KubeletDeps, open_kubelet
from kubelet_trio.nodestatus import MachineInfo
from kubelet_trio.sim.runtime import SimRuntime
from kubelet_trio.testing.fakeapi import FakeApi, write_kubeconfig
from kubelet_trio.testing.node import temporary_root

if TYPE_CHECKING:
    from kubelet_trio.credentialprovider import PluginProvider

__all__ = ["MACHINE", "ApiNode", "node_ready", "open_api_node", "write_kubeconfig"]

#: A pinned machine, so node capacity and system info do not depend on the host running the tests.
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


@attrs.define(eq=False)
class ApiNode:
    """A running API-mode node: its Kubelet, runtime, API-mode components and API client."""

    name: str
    kubelet: Kubelet
    sim: Any  # the runtime: a SimRuntime unless one was passed
    mode: ApiMode
    client: ApiClient
    _static: trio.MemorySendChannel[SourceSet]

    async def set_static_pods(self, *manifests: Mapping[str, Any]) -> list[Pod]:
        """Replace the node's static pods (as a manifest directory would); mirror pods follow."""
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
    credential_providers: Sequence[PluginProvider] = (),
    **config: Any,
) -> AsyncIterator[ApiNode]:
    """A node on ``sim`` (default: a new SimRuntime; any Runtime works) talking to ``api`` through its
    loopback (the production API client on a socket pair), or through ``client`` when given (a TCP or
    TLS connection).

    ``config`` is :class:`~kubelet_trio.kubelet.KubeletConfig` fields; ``options`` the registration and
    reporting settings (default: the pinned :data:`MACHINE`); ``credential_providers`` the registered
    credential provider plugins."""
    clock = clock or WallClock()
    sim = sim or SimRuntime(clock=clock, run_sync=run_inline)
    if isinstance(sim, SimRuntime):  # simulated containers cannot see tmpfs mounts
        config.setdefault("memory_backed_volumes", False)
    options = options or ApiModeOptions(machine=MACHINE)
    with temporary_root("kubelet-trio-apinode-") as tmp:
        kubelet_config = KubeletConfig(
            node_name=name,
            pod_logs_dir=config.pop("pod_logs_dir", f"{tmp}/pod-logs"),
            root_dir=config.pop("root_dir", f"{tmp}/root"),
            node_ips=config.pop("node_ips", ("192.0.2.10",)),
            **config,
        )
        pod_config = PodConfig(sources=(FILE_SOURCE,), now=clock.now)  # the builder adds the api source
        static = pod_config.source_channel(FILE_SOURCE)
        async with contextlib.AsyncExitStack() as stack:
            if client is None:
                if api is None:
                    raise ValueError("open_api_node needs a fake API server or a client")
                client = await stack.enter_async_context(api.client())
            await stack.enter_async_context(static)
            deps = KubeletDeps(
                runtime=sim,
                pod_config=pod_config,
                clock=clock,
                run_sync=run_sync,
                api_client=client,
                api_options=options,
                credential_providers=credential_providers,
            )
            built = await stack.enter_async_context(open_kubelet(kubelet_config, deps))
            assert built.api is not None
            await static.send(SourceSet(FILE_SOURCE, ()))
            yield ApiNode(name, built.kubelet, sim, built.api, client, static)


def node_ready(api: FakeApi, node_name: str) -> bool:
    """The Node object exists and says Ready=True."""
    try:
        conditions = api.node(node_name)["status"]["conditions"]
    except Exception:
        return False
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
