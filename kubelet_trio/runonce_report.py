"""The run-once report: what happened to each pod, as a table for people or JSON for scripts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from kubelet_trio.api import Pod
from kubelet_trio.api.status import ContainerStatus as ApiContainerStatus
from kubelet_trio.api.status import PodStatus as ApiPodStatus

__all__ = ["ContainerReport", "PodReport", "RunOnceReport", "container_reports"]

#: Waiting reasons that only mean "not started yet", not a failure.
STARTING_REASONS = ("ContainerCreating", "PodInitializing", "")


@attrs.frozen
class ContainerReport:
    name: str
    init: bool = False
    state: str = "unknown"  # running / waiting / terminated / unknown
    reason: str = ""
    message: str = ""
    exit_code: int | None = None  # of the current instance if terminated, else of the last one
    restarts: int = 0
    ready: bool = False
    log_tail: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        if self.exit_code not in (None, 0):
            return True
        return self.state == "waiting" and self.reason not in STARTING_REASONS

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "init": self.init,
            "state": self.state,
            "reason": self.reason,
            "message": self.message,
            "exitCode": self.exit_code,
            "restarts": self.restarts,
            "ready": self.ready,
            "logTail": list(self.log_tail),
        }

    def describe(self) -> str:
        state = f"{self.state}: {self.reason}" if self.reason else self.state
        parts = [state]
        if self.exit_code is not None:
            parts.append(f"exit {self.exit_code}")
        parts.append(f"restarts {self.restarts}")
        return "   ".join(parts)


def _container_report(name: str, init: bool, status: ApiContainerStatus | None) -> ContainerReport:
    if status is None:
        return ContainerReport(name, init)
    state, reason, message, exit_code = "unknown", "", "", None
    current = status.state
    if current is not None and current.running is not None:
        state = "running"
    elif current is not None and current.terminated is not None:
        term = current.terminated
        state, reason, message, exit_code = (
            "terminated",
            term.reason or "",
            term.message or "",
            term.exit_code,
        )
    elif current is not None and current.waiting is not None:
        state, reason, message = "waiting", current.waiting.reason or "", current.waiting.message or ""
    last = status.last_state.terminated if status.last_state else None
    if exit_code is None and last is not None:
        exit_code = last.exit_code
    return ContainerReport(
        name,
        init,
        state,
        reason,
        message,
        exit_code,
        status.restart_count or 0,
        bool(status.ready),
    )


def container_reports(pod: Pod, status: ApiPodStatus | None) -> tuple[ContainerReport, ...]:
    """Init containers, then app containers, in spec order."""
    spec = pod.spec
    if spec is None:
        return ()
    init_statuses = {c.name: c for c in (status.init_container_statuses or ()) if status} if status else {}
    app_statuses = {c.name: c for c in (status.container_statuses or ())} if status else {}
    reports = [
        _container_report(c.name or "", True, init_statuses.get(c.name)) for c in spec.init_containers or ()
    ]
    reports += [
        _container_report(c.name or "", False, app_statuses.get(c.name)) for c in spec.containers or ()
    ]
    return tuple(reports)


@attrs.frozen
class PodReport:
    namespace: str
    name: str
    uid: str
    phase: str
    target: str
    reached: bool
    reason: str = ""
    time_to_running: float | None = None  # seconds from the start of the run
    time_to_completion: float | None = None
    containers: tuple[ContainerReport, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
            "phase": self.phase,
            "target": self.target,
            "reached": self.reached,
            "reason": self.reason,
            "timeToRunningSeconds": _round(self.time_to_running),
            "timeToCompletionSeconds": _round(self.time_to_completion),
            "containers": [c.to_json() for c in self.containers],
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


@attrs.frozen
class RunOnceReport:
    target: str
    pods: tuple[PodReport, ...]
    errors: tuple[str, ...] = ()  # manifests that could not be read
    elapsed: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.errors and all(p.reached for p in self.pods)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "target": self.target,
            "elapsedSeconds": round(self.elapsed, 3),
            "pods": [p.to_json() for p in self.pods],
            "manifestErrors": list(self.errors),
        }

    def format_table(self) -> str:
        header = ("POD", "TARGET", "RESULT", "PHASE", "TO RUNNING", "TO COMPLETION")
        rows = [
            (
                f"{p.namespace}/{p.name}",
                p.target,
                "ok" if p.reached else "FAILED",
                p.phase,
                _secs(p.time_to_running),
                _secs(p.time_to_completion),
            )
            for p in self.pods
        ]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

        def line(cells: Sequence[str]) -> str:
            return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

        out = [line(header)]
        for pod, row in zip(self.pods, rows, strict=True):
            out.append(line(row))
            name_width = max((len(c.name) + (7 if c.init else 0) for c in pod.containers), default=0)
            for c in pod.containers:
                label = f"{c.name} (init)" if c.init else c.name
                out.append(f"    {label.ljust(name_width)}  {c.describe()}")
                if c.message and c.failed:
                    out.append(f"    {'':{name_width}}  {c.message}")
                out += [f"      | {text}" for text in c.log_tail]
            if not pod.reached and pod.reason:
                out.append(f"    why: {pod.reason}")
        for error in self.errors:
            out.append(f"manifest error: {error}")
        reached = sum(p.reached for p in self.pods)
        failed = len(self.pods) - reached
        summary = f"{_count(len(self.pods), 'pod')}: {reached} reached their target, {failed} failed"
        summary += f" (--runonce-wait={self.target})"
        if self.errors:
            summary += f"; {_count(len(self.errors), 'manifest error')}"
        out += ["", f"{summary} in {self.elapsed:.1f}s"]
        return "\n".join(out) + "\n"


def _count(number: int, noun: str) -> str:
    """``1 pod``, ``2 pods``, ``0 pods``."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
