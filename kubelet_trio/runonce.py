"""Run-once: start the pods of the static sources, wait until they reach their target, report, exit.

Go: ``pkg/kubelet/runonce.go``. The Go kubelet reads one update from the sources, admits the pods one by
one (``maxPods``), runs ``SyncPod`` for each in a loop until all its containers run, retrying a failed
sync after 1 s, 2 s, 4 s … (10 retries), and leaves the pods running when it exits.

Here a normal :class:`~kubelet_trio.kubelet.Kubelet` does the work — the same pod workers, PLEG and
status generation as the daemon — fed by a source that sends its one SET (the pods read once from the
manifest path and/or URL). Housekeeping is off, as in Go's run-once, so pods of other runs on the same
runtime are left alone. For each pod, a driver waits on the status manager (no polling) until the pod
reaches its target; while it has not, it re-requests a sync on Go's retry schedule (1 s doubling, 10
retries). An overall deadline (``--runonce-timeout``) bounds everything. Targets:

- ``running`` (default; Go's): every app container runs — or the pod already finished successfully;
- ``completion`` (ours): pods with ``restartPolicy`` Never/OnFailure must reach Succeeded; pods with
  Always still only need to run.

A pod whose phase becomes Failed fails at once. Then the report is built (per pod: phase, each container's
state, exit code, restarts, the time to running and to completion, and the last log lines of failed
containers), and with ``cleanup`` the pods are removed through the kubelet's kill path and their
sandboxes deleted.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs
import trio
import trio_util

from kubelet_trio.api import ManifestError, Pod, parse_manifest
from kubelet_trio.api.pod import TERMINAL_PHASES
from kubelet_trio.api.status import PodStatus as ApiPodStatus
from kubelet_trio.clock import WallClock, go_duration
from kubelet_trio.config.http import HTTP_TIMEOUT, ManifestFetchError, fetch_manifest_body
from kubelet_trio.config.podconfig import PodConfig
from kubelet_trio.config.static import make_static_pod
from kubelet_trio.config.types import HTTP_SOURCE, SourceSet
from kubelet_trio.container.types import ContainerState
from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.kubelet_builder import KubeletDeps, open_kubelet
from kubelet_trio.kubelet_config import (
    TARGET_COMPLETION,
    TARGET_RUNNING,
    KubeletConfig,
    RunOnceSettings,
)
from kubelet_trio.kuberuntime.logs_reader import tail_text
from kubelet_trio.logs import kobj, kv
from kubelet_trio.runonce_report import ContainerReport, PodReport, RunOnceReport, container_reports

if TYPE_CHECKING:
    from kubelet_trio.client.http1 import Connect
    from kubelet_trio.credentialprovider import PluginProvider
    from kubelet_trio.server.host import HostInterface

__all__ = [
    "LOG_TAIL_LINES",
    "OnceSource",
    "RunOnceSettings",
    "fetch_manifest_url",
    "run_once",
]

logger = logging.getLogger(__name__)

LOG_TAIL_LINES = 10
CLEANUP_MARGIN = 15.0  # beyond the longest grace period, for the runtime to stop and remove everything


async def fetch_manifest_url(
    url: str,
    node_name: str,
    headers: Mapping[str, Sequence[str]] | None = None,
    *,
    connect: Connect | None = None,
) -> tuple[tuple[Pod, ...], tuple[ManifestError, ...]]:
    """The pods served at ``url`` right now (one fetch, as the HTTP source does it), or errors."""
    pairs = [(key, value) for key, values in (headers or {}).items() for value in values]
    try:
        with trio.fail_after(HTTP_TIMEOUT):
            body = await fetch_manifest_body(url, pairs, connect=connect)  # at most 10 MiB
    except (trio.TooSlowError, ManifestFetchError) as err:
        reason = f"no response within {HTTP_TIMEOUT:g}s" if isinstance(err, trio.TooSlowError) else str(err)
        return (), (ManifestError(url, 0, (), f"cannot fetch: {reason or type(err).__name__}"),)
    except ManifestError as err:
        return (), (err,)

    def prepare(pod: Pod) -> Pod:
        return make_static_pod(pod, node_name=node_name, source=HTTP_SOURCE, origin=f"url:{url}")

    result = parse_manifest(body, file=url, allow_lists=True, prepare=prepare)
    return tuple(result.pods), tuple(result.errors)


@attrs.define(eq=False)
class OnceSource:
    """A pod source that sends one SET and then only what :meth:`clear` asks for (run-once cleanup)."""

    name: str
    pods: tuple[Pod, ...]
    channel: trio.MemorySendChannel[SourceSet]

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with self.channel:
            await self.channel.send(SourceSet(self.name, self.pods))
            task_status.started()
            await trio.sleep_forever()

    async def clear(self) -> None:
        """Send an empty SET: the kubelet removes (kills) every pod of this source."""
        await self.channel.send(SourceSet(self.name, ()))


@attrs.define(eq=False)
class _Tracked:
    """One admitted pod: its target and what has been seen of it."""

    pod: Pod
    target: str
    first_status_at: float | None = None
    running_at: float | None = None
    finished_at: float | None = None
    outcome: trio_util.AsyncValue[str | None] = attrs.Factory(lambda: trio_util.AsyncValue(None))
    reason: str = ""

    @property
    def decided(self) -> bool:
        return self.outcome.value is not None

    def decide(self, outcome: str, reason: str = "") -> None:
        if not self.decided:
            self.reason = reason
            self.outcome.value = outcome


def target_for(pod: Pod, wait: str) -> str:
    policy = (pod.spec.restart_policy if pod.spec else None) or "Always"
    return (
        TARGET_COMPLETION
        if wait == TARGET_COMPLETION and policy in ("Never", "OnFailure")
        else TARGET_RUNNING
    )


def all_running(pod: Pod, status: ApiPodStatus) -> bool:
    names = [c.name for c in ((pod.spec.containers or ()) if pod.spec else ())]
    running = {c.name for c in status.container_statuses or () if c.state is not None and c.state.running}
    return bool(names) and all(name in running for name in names)


def _failure_reason(status: ApiPodStatus) -> str:
    if status.reason or status.message:
        return ": ".join(x for x in (status.reason, status.message) if x)
    for c in status.container_statuses or ():
        terminated = c.state.terminated if c.state else None
        if terminated is not None and terminated.exit_code:
            return f"container {c.name} exited with {terminated.exit_code} ({terminated.reason or 'Error'})"
    return "pod failed"


def _observe(entry: _Tracked, status: ApiPodStatus | None, now: float) -> None:
    """Record milestones and decide the outcome from one status snapshot."""
    if status is None or entry.decided:
        return
    if entry.first_status_at is None:
        entry.first_status_at = now
    if entry.running_at is None and all_running(entry.pod, status):
        entry.running_at = now
    if status.phase in TERMINAL_PHASES and entry.finished_at is None:
        entry.finished_at = now
    if status.phase == "Failed":
        entry.decide("failed", _failure_reason(status))
    elif status.phase == "Succeeded" or (entry.target == TARGET_RUNNING and entry.running_at is not None):
        entry.decide("reached")


def admit(pods: Sequence[Pod], max_pods: int) -> tuple[list[Pod], list[Pod]]:
    """Sequential admission of the pod count (Go ``canAdmitPod``'s ``OutOfpods``); other resources are
    not checked."""
    return list(pods[:max_pods]), list(pods[max_pods:])


@attrs.define(eq=False)
class _RunOnce:
    host: HostInterface
    settings: RunOnceSettings
    sources: list[OnceSource]
    progress: Callable[[str], None]
    tracked: dict[str, _Tracked] = attrs.Factory(dict)
    started_at: float = 0.0
    _last_progress: tuple[int, int, int] | None = None

    async def wait(self) -> None:
        """Drive every pod to a decision, or to the deadline."""
        self.started_at = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._track)
            with trio.move_on_after(self.settings.timeout):
                async with trio.open_nursery() as drivers:
                    for entry in self.tracked.values():
                        drivers.start_soon(self._drive, entry)
            nursery.cancel_scope.cancel()
        for entry in self.tracked.values():
            entry.decide(
                "failed", f"{entry.target} not reached within {go_duration(self.settings.timeout)} (timeout)"
            )
        self._report_progress()

    async def _track(self) -> None:
        version = -1
        while True:
            version = await self.host.wait_status_change(version)
            now = trio.current_time() - self.started_at
            for uid, entry in self.tracked.items():
                _observe(entry, self.host.status_of(uid), now)
            self._report_progress()

    async def _drive(self, entry: _Tracked) -> None:
        """Go's runPod loop: wait for the target; while not there, re-sync on 1 s, 2 s, 4 s … delays."""
        delay = self.settings.retry_delay
        for _ in range(self.settings.retries):
            with trio.move_on_after(delay):
                await entry.outcome.wait_value(lambda v: v is not None)
                return
            pod = self.host.request_sync(entry.pod.uid)
            if pod is not None:
                logger.debug(
                    "run-once: pod not at target yet, syncing again", extra=kv(pod=kobj(pod), uid=pod.uid)
                )
            delay *= self.settings.retry_backoff
        with trio.move_on_after(delay):
            await entry.outcome.wait_value(lambda v: v is not None)
            return
        entry.decide("failed", f"{entry.target} not reached after {self.settings.retries} retries")

    def _report_progress(self) -> None:
        entries = self.tracked.values()
        counts = (
            sum(e.first_status_at is not None for e in entries),
            sum(e.running_at is not None or e.finished_at is not None for e in entries),
            sum(e.decided for e in entries),
        )
        if counts == self._last_progress:
            return
        self._last_progress = counts
        elapsed = trio.current_time() - self.started_at
        self.progress(
            f"run-once: {len(self.tracked)} pods: {counts[0]} started, {counts[1]} running, "
            f"{counts[2]} done [{elapsed:.1f}s]"
        )

    async def report(self, rejected: Sequence[Pod], errors: Sequence[ManifestError]) -> RunOnceReport:
        pods = [await self._pod_report(entry) for entry in self.tracked.values()]
        pods += [
            PodReport(
                namespace=pod.namespace,
                name=pod.name,
                uid=pod.uid,
                phase="Failed",
                target=target_for(pod, self.settings.wait),
                reached=False,
                reason=f"OutOfpods: node has capacity for {self.settings.max_pods} pods",
            )
            for pod in rejected
        ]
        return RunOnceReport(
            target=self.settings.wait,
            pods=tuple(pods),
            errors=tuple(str(e) for e in errors),
            elapsed=trio.current_time() - self.started_at,
        )

    async def _pod_report(self, entry: _Tracked) -> PodReport:
        pod = entry.pod
        status = self.host.status_of(pod.uid)
        containers = container_reports(pod, status)
        reached = entry.outcome.value == "reached"
        if not reached:
            containers = tuple([await self._with_logs(pod, c) for c in containers])
        return PodReport(
            namespace=pod.namespace,
            name=pod.name,
            uid=pod.uid,
            phase=(status.phase if status else None) or "Pending",
            target=entry.target,
            reached=reached,
            reason=entry.reason,
            time_to_running=entry.running_at,
            time_to_completion=entry.finished_at,
            containers=containers,
        )

    async def _with_logs(self, pod: Pod, container: ContainerReport) -> ContainerReport:
        """The last lines of a failed container's newest exited instance (else its newest one)."""
        if not container.failed:
            return container
        instances = self.host.container_instances(pod.uid, container.name)
        exited = [i for i in instances if i.state is ContainerState.EXITED]
        candidates = exited or instances
        if not candidates:
            return container
        instance = candidates[0]
        try:
            path = await self.host.container_log_path(instance.id)
        except cri_errors.CriError:
            return container
        if not path:
            return container
        lines = await self.host.run_blocking(tail_text, path, LOG_TAIL_LINES)
        return attrs.evolve(container, log_tail=tuple(lines))

    async def cleanup(self) -> None:
        """Remove the pods through the kubelet's kill path, then delete their containers and sandboxes."""
        uids = set(self.tracked)
        grace = max(
            ((e.pod.spec.termination_grace_period_seconds if e.pod.spec else None) or 30)
            for e in self.tracked.values()
        )
        self.progress(f"run-once: removing {len(uids)} pods")
        with trio.move_on_after(grace + CLEANUP_MARGIN) as scope:
            for source in self.sources:
                await source.clear()
            await self.host.purge_pods(uids)
        if scope.cancelled_caught:
            logger.warning("run-once cleanup did not finish in time; some pods may be left")


async def run_once(
    runtime: Runtime,
    config: KubeletConfig,
    pods_by_source: Mapping[str, Sequence[Pod]],
    settings: RunOnceSettings,
    *,
    errors: Sequence[ManifestError] = (),
    clock: WallClock | None = None,
    run_sync: RunSync = run_in_thread,
    progress: Callable[[str], None] = lambda line: None,
    on_report: Callable[[RunOnceReport], None] = lambda report: None,
    credential_providers: Sequence[PluginProvider] = (),
) -> RunOnceReport:
    """Run the pods once on ``runtime``; ``errors`` (manifest problems) are carried into the report.

    ``on_report`` gets the report as soon as it is ready, before the cleanup (if any) starts.
    ``credential_providers``: the registered credential provider plugins image pulls may use.
    """
    clock = clock or WallClock()
    all_pods = [pod for pods in pods_by_source.values() for pod in pods]
    admitted, rejected = admit(all_pods, settings.max_pods)
    admitted_uids = {pod.uid for pod in admitted}
    config = attrs.evolve(config, housekeeping_period=math.inf)  # Go's run-once runs no housekeeping
    pod_config = PodConfig(sources=tuple(pods_by_source), now=clock.now)
    sources = [
        OnceSource(name, tuple(p for p in pods if p.uid in admitted_uids), pod_config.source_channel(name))
        for name, pods in pods_by_source.items()
    ]
    deps = KubeletDeps(
        runtime=runtime,
        pod_config=pod_config,
        sources=tuple(sources),
        clock=clock,
        run_sync=run_sync,
        credential_providers=credential_providers,
    )
    for pod in rejected:
        logger.warning(
            "run-once: pod rejected, node is full",
            extra=kv(pod=kobj(pod), uid=pod.uid, max_pods=settings.max_pods),
        )
    async with open_kubelet(config, deps) as node:
        driver = _RunOnce(node.kubelet, settings, sources, progress)
        for pod in admitted:
            driver.tracked[pod.uid] = _Tracked(pod, target_for(pod, settings.wait))
        await driver.wait()
        report = await driver.report(rejected, errors)
        on_report(report)
        if settings.cleanup:
            await driver.cleanup()
    return report
