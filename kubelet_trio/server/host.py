"""What the kubelet's HTTP servers need from the kubelet (Go: ``server.HostInterface``).

The servers read the node's state through this protocol and never reach into the kubelet otherwise, so
the server package depends on the kubelet's parts, not on :class:`~kubelet_trio.kubelet.Kubelet`; the
Kubelet satisfies it, and a test can serve a stand-in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kubelet_trio.clock import WallClock
    from kubelet_trio.container.cache import PodCache
    from kubelet_trio.cri.runtime import Runtime
    from kubelet_trio.fsio import RunSync
    from kubelet_trio.kubelet import KubeletConfig
    from kubelet_trio.kuberuntime.manager import KubeRuntimeManager
    from kubelet_trio.metrics import KubeletMetrics
    from kubelet_trio.pleg.generic import GenericPLEG
    from kubelet_trio.pod.manager import PodManager
    from kubelet_trio.stats import CriStatsProvider
    from kubelet_trio.status.manager import StatusManager

__all__ = ["HostInterface"]


class HostInterface(Protocol):
    """Read access to one node: its settings, desired pods, runtime state, statuses and health."""

    @property
    def config(self) -> KubeletConfig: ...

    @property
    def runtime(self) -> Runtime: ...

    @property
    def kube_runtime(self) -> KubeRuntimeManager: ...

    @property
    def cache(self) -> PodCache: ...

    @property
    def pod_manager(self) -> PodManager: ...

    @property
    def status_manager(self) -> StatusManager: ...

    @property
    def pleg(self) -> GenericPLEG: ...

    @property
    def metrics(self) -> KubeletMetrics: ...

    @property
    def stats_provider(self) -> CriStatsProvider: ...

    @property
    def clock(self) -> WallClock: ...

    @property
    def run_sync(self) -> RunSync: ...

    @property
    def api_client(self) -> Any: ...

    @property
    def runtime_error(self) -> str | None: ...

    @property
    def sync_loop_last_iteration(self) -> float: ...
