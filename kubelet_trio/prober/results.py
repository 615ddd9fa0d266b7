"""Probe results by container (Go: ``pkg/kubelet/prober/results/results_manager.go``).

One table for the three kinds, keyed ``(ProbeKind, container id)`` (bare CRI ids), readable as the
runtime manager's ``probe_results`` mapping. :meth:`ResultsManager.set` reports whether the value
changed; the probe manager then sends a :class:`ProbeUpdate` to the kubelet's sync loop.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping

import attrs

__all__ = ["ProbeKind", "ProbeResult", "ProbeUpdate", "ResultsManager"]


class ProbeKind(enum.Enum):
    LIVENESS = "liveness"
    READINESS = "readiness"
    STARTUP = "startup"


class ProbeResult(enum.Enum):
    SUCCESS = "Success"
    FAILURE = "Failure"
    UNKNOWN = "Unknown"


@attrs.frozen
class ProbeUpdate:
    """A changed result, as the sync loop receives it."""

    kind: ProbeKind
    container_id: str
    result: ProbeResult
    pod_uid: str


@attrs.define(eq=False)
class ResultsManager(Mapping[tuple[ProbeKind, str], ProbeResult]):
    _results: dict[tuple[ProbeKind, str], tuple[ProbeResult, str]] = attrs.Factory(dict)
    _by_pod: dict[str, set[tuple[ProbeKind, str]]] = attrs.Factory(dict)  # status generation reads by pod

    def __getitem__(self, key: tuple[ProbeKind, str]) -> ProbeResult:
        return self._results[key][0]

    def __iter__(self) -> Iterator[tuple[ProbeKind, str]]:
        return iter(list(self._results))

    def __len__(self) -> int:
        return len(self._results)

    def set(
        self, kind: ProbeKind, container_id: str, result: ProbeResult, pod_uid: str
    ) -> ProbeUpdate | None:
        """Store a result; return the update to publish when it changed."""
        key = (kind, container_id)
        previous = self._results.get(key)
        self._results[key] = (result, pod_uid)
        self._by_pod.setdefault(pod_uid, set()).add(key)
        if previous is not None and previous[0] is result:
            return None
        return ProbeUpdate(kind, container_id, result, pod_uid)

    def remove(self, kind: ProbeKind, container_id: str) -> None:
        entry = self._results.pop((kind, container_id), None)
        if entry is not None:
            keys = self._by_pod.get(entry[1])
            if keys is not None:
                keys.discard((kind, container_id))
                if not keys:
                    del self._by_pod[entry[1]]

    def for_pod(self, pod_uid: str, kind: ProbeKind) -> dict[str, ProbeResult]:
        """``container id → result`` of one kind for one pod."""
        return {cid: self._results[(k, cid)][0] for k, cid in self._by_pod.get(pod_uid, ()) if k is kind}
