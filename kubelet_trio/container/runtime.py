"""What a pod sync did, step by step (Go: ``kubecontainer.PodSyncResult``): the result of
:meth:`kubelet_trio.kuberuntime.manager.KubeRuntimeManager.sync_pod` and ``kill_pod``.
"""

from __future__ import annotations

import attrs


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
