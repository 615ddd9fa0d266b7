"""The kubelet-level runtime interface (Go: ``kubecontainer.Runtime``), built on a CRI ``Runtime``.

The PLEG uses ``get_pods``/``get_pod_status``; pod workers use ``sync_pod``/``kill_pod``. The
implementation is :class:`kubelet_trio.kuberuntime.manager.KubeRuntimeManager`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import attrs

from kubelet_trio.container.types import PodStatus, RuntimePod

if TYPE_CHECKING:
    from kubelet_trio.api import Pod


@attrs.frozen
class SyncStep:
    """One action of a pod sync and how it went (Go: ``SyncResult``)."""

    action: str  # StartContainer, KillContainer, CreatePodSandbox, KillPodSandbox, ...
    target: str  # container name, or sandbox id
    error: str = ""  # "" on success; else the reason (CrashLoopBackOff, ErrImagePull, ...)
    message: str = ""
    backoff_until: float | None = None  # trio time at which a backoff for this step expires


@attrs.frozen
class PodSyncResult:
    steps: tuple[SyncStep, ...] = ()

    @property
    def failed(self) -> list[SyncStep]:
        return [s for s in self.steps if s.error]

    @property
    def ok(self) -> bool:
        return not self.failed

    def earliest_backoff(self) -> float | None:
        expiries = [s.backoff_until for s in self.failed if s.backoff_until is not None]
        return min(expiries) if expiries else None


class KubeRuntime(Protocol):
    async def get_pods(self, all: bool = True) -> list[RuntimePod]:
        """Pods grouped from ListPodSandbox + ListContainers (``all``: include exited ones)."""
        ...

    async def get_pod_status(self, uid: str, name: str, namespace: str) -> PodStatus:
        """Sandbox and container statuses of one pod, newest first."""
        ...

    async def sync_pod(self, pod: Pod, status: PodStatus) -> PodSyncResult:
        """Move the runtime towards ``pod`` (Go: computePodActions + SyncPod)."""
        ...

    async def kill_pod(
        self, pod: Pod | None, runtime_pod: RuntimePod, grace_period_override: int | None = None
    ) -> PodSyncResult:
        """Stop every container (in parallel, each with its grace period) and then every sandbox."""
        ...
