"""Container probes: liveness, readiness and startup workers and their handlers (Go:
``pkg/kubelet/prober``, ``pkg/probe``)."""

from __future__ import annotations

from kubelet_trio.prober.manager import ProbeManager
from kubelet_trio.prober.probe import ProbeError, Result
from kubelet_trio.prober.prober import Prober, probe_kind_name
from kubelet_trio.prober.results import ProbeUpdate, ResultsManager
from kubelet_trio.prober.worker import INITIAL_RESULTS, ProbeWorker

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
