"""The composition root: one place that builds a node (Go: ``NewMainKubelet`` and ``RunKubelet``).

::

    deps = KubeletDeps(runtime=runtime, pod_config=pod_config, sources=(file_source,))
    async with open_kubelet(KubeletConfig(node_name="node-1"), deps) as node:
        ...  # node.kubelet runs until the block exits (pods are left running, as the Go kubelet does)

:func:`build_kubelet` builds every component from the typed config and the frozen dependencies bundle, in
Go's order: the runtime (instrumented when asked), the API-mode pieces when an API client is given (the
``api`` pod source, then the components that need the Kubelet, built while the Kubelet's constructor
runs), and the Kubelet with its sub-managers. Standalone vs API mode is decided here and nowhere else;
after construction nothing reaches into the Kubelet to rewire it. :func:`open_kubelet` builds and runs it.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from kubelet_trio.apimode import ApiModeOptions
from kubelet_trio.clock import WallClock
from kubelet_trio.cm.allocatable import NodeAllocatable
from kubelet_trio.config.podconfig import PodConfig
from kubelet_trio.credentialprovider import node_keyring
from kubelet_trio.cri.instrumented import InstrumentedRuntime
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.eviction import ImageGC, SignalSource, SimulatedSignals
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.images import ImageFsStatsProvider
from kubelet_trio.kubelet import EventSink, Kubelet, KubeletConfig, KubeletExtension, PodSource
from kubelet_trio.metrics import KubeletMetrics
from kubelet_trio.stats import HostSampler, read_host_sample

if TYPE_CHECKING:
    from kubelet_trio.apimode import ApiMode
    from kubelet_trio.client import ApiClient
    from kubelet_trio.credentialprovider import PluginProvider
    from kubelet_trio.server.host import HostInterface

__all__ = ["KubeletDeps", "KubeletNode", "build_kubelet", "open_kubelet"]


@attrs.frozen(kw_only=True)
class KubeletDeps:
    """What a node is built from besides its :class:`KubeletConfig` (Go: ``kubelet.Dependencies``).

    ``pod_config`` merges the pod sources; ``sources`` feed it (their channels come from it). With
    ``api_client`` the node runs in API mode: the ``api`` source is added (``pod_config`` must list
    ``"api"``) and node status, lease, events, objects and tokens come from the API server.
    """

    runtime: Runtime
    pod_config: PodConfig
    sources: Sequence[PodSource] = ()
    clock: WallClock = attrs.Factory(WallClock)
    run_sync: RunSync = run_in_thread  # small file operations (see kubelet_trio.fsio)
    metrics: KubeletMetrics = attrs.Factory(KubeletMetrics)
    instrument_runtime: bool = False  # time every CRI call into ``metrics`` (the daemon does)
    allocatable: NodeAllocatable | None = None  # None: the machine's CPUs and memory
    host_stats: HostSampler = read_host_sample  # the node's CPU/memory/fs counters (tests: fixed ones)
    configz: Mapping[str, Any] | None = None  # /configz (kubelet_trio.configz.configz_body(options))
    event_sink: EventSink | None = None  # standalone: where pod events go (API mode: the API server)
    api_client: ApiClient | None = None  # API mode when set
    api_options: ApiModeOptions = attrs.Factory(ApiModeOptions)
    # Standalone only: a client for the Kubelet API's webhooks without the rest of API mode (tests)
    webhook_client: ApiClient | None = None
    # eviction signals (None: simulated ones without pressure on a SimRuntime, whose containers use no
    # real resources; else this machine's); an image GC the eviction manager reclaims disk with
    eviction_signals: SignalSource | None = None
    image_gc: ImageGC | None = None
    image_fs: ImageFsStatsProvider | None = None  # image GC's disk figures; None: statvfs (real runtimes)
    # the registered credential provider plugins (--image-credential-provider-config and -bin-dir, read by
    # kubelet_trio.credentialprovider.register_credential_provider_plugins); with the node's docker config
    # file (looked for from config.root_dir) they make the node keyring every image pull may use
    credential_providers: Sequence[PluginProvider] = ()


@attrs.frozen
class KubeletNode:
    """A built node: the Kubelet and, in API mode, its API-mode components."""

    kubelet: Kubelet
    api: ApiMode | None = None


def build_kubelet(config: KubeletConfig, deps: KubeletDeps) -> KubeletNode:
    """Build a node, not yet running (:func:`open_kubelet` runs it)."""
    runtime = deps.runtime
    deps.metrics.set_node_name(config.node_name)
    if deps.instrument_runtime:
        runtime = InstrumentedRuntime(runtime, deps.metrics.observe_runtime_operation)
    sources = list(deps.sources)
    built: list[ApiMode] = []
    client = deps.api_client
    if client is not None:
        from kubelet_trio.apimode import api_pod_source, build_api_mode

        if client.metrics is None:
            client.metrics = deps.metrics  # rest_client_* on this node's /metrics
        if client.boundary_errors is None:
            client.boundary_errors = deps.metrics.boundary_errors  # what its reflectors contain
        api_source = api_pod_source(
            client, deps.pod_config, config.node_name, boundary_errors=deps.metrics.boundary_errors
        )
        sources.append(api_source)

        def api_mode(kubelet: Kubelet) -> KubeletExtension:
            mode = build_api_mode(kubelet, client, api_source, deps.api_options)
            built.append(mode)
            return mode.extension()

    kubelet = Kubelet(
        config,
        runtime,
        deps.pod_config,
        tuple(sources),
        extension=api_mode if client is not None else None,
        event_sink=deps.event_sink,
        api_client=deps.webhook_client,
        clock=deps.clock,
        run_sync=deps.run_sync,
        metrics=deps.metrics,
        allocatable=deps.allocatable,
        eviction_signals=deps.eviction_signals
        or (SimulatedSignals() if _is_simulated(deps.runtime) else None),
        image_gc=deps.image_gc,
        image_fs=deps.image_fs,
        keyring=node_keyring(config.root_dir, deps.credential_providers, run_sync=deps.run_sync),
        serve_http=functools.partial(_serve_http, configz=deps.configz),
        host_stats=deps.host_stats,
    )
    return KubeletNode(kubelet, built[0] if built else None)


def _is_simulated(runtime: Runtime) -> bool:
    """Is ``runtime`` a :class:`~kubelet_trio.sim.runtime.SimRuntime`? (Without importing the simulator
    for a real runtime: a SimRuntime exists only once its module was imported.)"""
    sim = sys.modules.get("kubelet_trio.sim.runtime")
    return sim is not None and isinstance(runtime, sim.SimRuntime)


async def _serve_http(
    kubelet: HostInterface,
    *,
    configz: Mapping[str, Any] | None,
    task_status: trio.TaskStatus[dict[str, str]],
) -> None:
    """:func:`kubelet_trio.server.serve.serve_kubelet_http`, imported only for a node that serves HTTP."""
    config = kubelet.config
    if not (config.healthz_port or config.read_only_port or config.port):
        task_status.started({})  # every server off: what serve_kubelet_http reports, without its imports
        return
    from kubelet_trio.server.serve import serve_kubelet_http

    await serve_kubelet_http(kubelet, configz=configz, task_status=task_status)


@contextlib.asynccontextmanager
async def open_kubelet(config: KubeletConfig, deps: KubeletDeps) -> AsyncIterator[KubeletNode]:
    """Build the node and run it until the block exits; yields once every component is up."""
    node = build_kubelet(config, deps)
    async with trio.open_nursery() as nursery:
        await nursery.start(node.kubelet.run)
        yield node
        nursery.cancel_scope.cancel()
