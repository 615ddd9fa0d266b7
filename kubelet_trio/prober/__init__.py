"""Container probes: liveness, readiness and startup workers and their handlers (Go:
``pkg/kubelet/prober``, ``pkg/probe``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.prober.manager import ProbeManager
    from kubelet_trio.prober.probe import ProbeError, Result
    from kubelet_trio.prober.prober import Prober, probe_kind_name
    from kubelet_trio.prober.results import ProbeUpdate, ResultsManager
    from kubelet_trio.prober.worker import INITIAL_RESULTS, ProbeWorker

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "ProbeManager": "kubelet_trio.prober.manager",
    "ProbeError": "kubelet_trio.prober.probe",
    "Result": "kubelet_trio.prober.probe",
    "Prober": "kubelet_trio.prober.prober",
    "probe_kind_name": "kubelet_trio.prober.prober",
    "ProbeUpdate": "kubelet_trio.prober.results",
    "ResultsManager": "kubelet_trio.prober.results",
    "INITIAL_RESULTS": "kubelet_trio.prober.worker",
    "ProbeWorker": "kubelet_trio.prober.worker",
}

__all__ = [
    "INITIAL_RESULTS",
    "ProbeError",
    "ProbeManager",
    "ProbeUpdate",
    "ProbeWorker",
    "Prober",
    "Result",
    "ResultsManager",
    "probe_kind_name",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
