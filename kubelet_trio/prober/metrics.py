"""What the probe workers report to (Go: ``ProberResults`` and ``ProberDuration``,
``prober/prober_manager.go``).

A Protocol, so the prober does not depend on the metrics module; the kubelet passes its
:class:`~kubelet_trio.metrics.KubeletMetrics`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kubelet_trio.api import Pod
    from kubelet_trio.prober.results import ProbeKind, ProbeResult

__all__ = ["ProbeMetrics"]


class ProbeMetrics(Protocol):
    def observe_probe(
        self, kind: ProbeKind, result: ProbeResult, pod: Pod, container: str, seconds: float
    ) -> None:
        """A probe ran and gave ``result`` (errors are not results and are not reported)."""
        ...

    def forget_probe(self, kind: ProbeKind, pod: Pod, container: str) -> None:
        """The worker for this probe ended."""
        ...
