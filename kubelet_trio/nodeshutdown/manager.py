"""Graceful node shutdown (Go: ``pkg/kubelet/nodeshutdown/nodeshutdown_manager_linux.go``).

With ``shutdownGracePeriod`` set, a shutdown of the machine stops the pods in priority order before it
happens. Go's configuration migrates to two priority groups: pods below system-critical priority get
``shutdownGracePeriod - shutdownGracePeriodCriticalPods`` seconds, critical pods the rest. Group after
group (lowest priority first), every pod of the group is killed at once with its grace period capped to
the group's budget (its own ``terminationGracePeriodSeconds`` when shorter), marked Failed with reason
``Terminated``; the next group starts when the group is done or its budget is spent. From the first
moment the node reports Ready=False ("node is shutting down") and rejects new pods (``NodeShutdown``).

The trigger is :meth:`NodeShutdownManager.shutdown`. Go waits for systemd-logind's PrepareForShutdown
signal over D-Bus under a "delay" inhibitor lock; this kubelet listens on a local socket instead
(:mod:`kubelet_trio.nodeshutdown.trigger`, ``kubelet-trio shutdown-node``), which a systemd unit ordered
before shutdown can call. Stopping the kubelet itself (SIGTERM) is not a node shutdown: pods keep running.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol

import attrs
import trio

from kubelet_trio.api import Pod
from kubelet_trio.lifecycle.predicate import AdmitResult
from kubelet_trio.logs import kobj, kv

__all__ = [
    "NODE_SHUTDOWN_MESSAGE",
    "NODE_SHUTDOWN_NOT_ADMITTED_MESSAGE",
    "NODE_SHUTDOWN_NOT_ADMITTED_REASON",
    "NODE_SHUTDOWN_REASON",
    "SHUTTING_DOWN",
    "SYSTEM_CRITICAL_PRIORITY",
    "NodeShutdownManager",
    "PodTerminator",
    "PriorityGroup",
    "group_by_priority",
    "migrate_config",
]

logger = logging.getLogger(__name__)

NODE_SHUTDOWN_REASON = "Terminated"
NODE_SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
NODE_SHUTDOWN_NOT_ADMITTED_REASON = "NodeShutdown"
NODE_SHUTDOWN_NOT_ADMITTED_MESSAGE = "Pod was rejected as the node is shutting down."
SHUTTING_DOWN = "node is shutting down"  # the Ready condition's message while it lasts
NODE_SHUTDOWN_EVENT = "NodeShutdown"
DEFAULT_PRIORITY = 0  # Go: scheduling.DefaultPriorityWhenNoDefaultClassExists
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000  # Go: scheduling.SystemCriticalPriority


@attrs.frozen
class PriorityGroup:
    """Pods from ``priority`` up to the next group's get ``grace_period`` seconds (Go:
    ``ShutdownGracePeriodByPodPriority``)."""

    priority: int
    grace_period: int


def migrate_config(shutdown_grace_period: float, critical_pods: float) -> list[PriorityGroup]:
    """Go ``migrateConfig``: the two settings as priority groups; none when graceful shutdown is off."""
    if shutdown_grace_period <= 0:
        return []
    default = shutdown_grace_period - critical_pods
    if default < 0:
        return []
    return [
        PriorityGroup(DEFAULT_PRIORITY, int(default)),
        PriorityGroup(SYSTEM_CRITICAL_PRIORITY, int(shutdown_grace_period - default)),
    ]


def group_by_priority(groups: Sequence[PriorityGroup], pods: Sequence[Pod]) -> list[list[Pod]]:
    """The pods of each group (``groups`` sorted by priority): a pod belongs to the highest group whose
    priority is at most its own, and to the lowest group when it is below all (Go ``groupByPriority``)."""
    members: list[list[Pod]] = [[] for _ in groups]
    for pod in pods:
        priority = (pod.spec.priority if pod.spec else None) or 0
        index = max((i for i, g in enumerate(groups) if g.priority <= priority), default=0)
        members[index].append(pod)
    return members


class PodTerminator(Protocol):
    """Go ``TerminatePodAbnormallyAndWait``: fail the pod with reason and message, kill it, wait."""

    async def terminate_pod_abnormally(
        self, pod: Pod, *, grace_period: int, reason: str, message: str
    ) -> None: ...


NodeEventSink = Callable[[str, str, str], None]  # (type, reason, message)


def _by_priority(groups: Sequence[PriorityGroup]) -> tuple[PriorityGroup, ...]:
    return tuple(sorted(groups, key=lambda g: g.priority))


@attrs.define(eq=False)
class NodeShutdownManager:
    """Stops the pods in priority order when the node shuts down; ``enabled`` with a grace period."""

    groups: tuple[PriorityGroup, ...] = attrs.field(converter=_by_priority)
    active_pods: Callable[[], list[Pod]]
    terminator: PodTerminator
    events: NodeEventSink | None = None
    #: (priority, Trio time) of each group as its pods began to be stopped, for status and tests
    group_starts: list[tuple[int, float]] = attrs.field(init=False, factory=list)
    _shutting_down: bool = attrs.field(init=False, default=False)
    _done: trio.Event = attrs.field(init=False, factory=trio.Event)
    _nursery: trio.Nursery | None = attrs.field(init=False, default=None)

    @classmethod
    def from_settings(
        cls,
        shutdown_grace_period: float,
        shutdown_grace_period_critical_pods: float,
        *,
        active_pods: Callable[[], list[Pod]],
        terminator: PodTerminator,
        events: NodeEventSink | None = None,
    ) -> NodeShutdownManager:
        groups = migrate_config(shutdown_grace_period, shutdown_grace_period_critical_pods)
        return cls(groups, active_pods, terminator, events)

    @property
    def enabled(self) -> bool:
        return bool(self.groups)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def shutdown_status(self) -> str | None:
        """Go ``ShutdownStatus``: the error the Ready condition shows while the node shuts down."""
        return SHUTTING_DOWN if self._shutting_down else None

    def admit(self, pod: Pod) -> AdmitResult | None:
        """Go's admit handler: no new pod once the node is shutting down."""
        if self._shutting_down:
            return AdmitResult(NODE_SHUTDOWN_NOT_ADMITTED_REASON, NODE_SHUTDOWN_NOT_ADMITTED_MESSAGE)
        return None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the nursery pod kills run in (they outlive a group's budget, as Go's goroutines do)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def trigger(self) -> None:
        """Start processing a shutdown in the manager's own nursery (no caller can cancel it)."""
        assert self._nursery is not None, "NodeShutdownManager.run must be running"
        self._nursery.start_soon(self.shutdown)

    async def wait_done(self) -> None:
        """Until a shutdown has been processed."""
        await self._done.wait()

    async def shutdown(self) -> None:
        """Process a shutdown: stop the pods group by group; returns when done. A second call (another
        trigger) waits for the first one to finish."""
        if self._shutting_down:
            await self._done.wait()
            return
        self._shutting_down = True
        logger.info("shutdown manager detected shutdown event")
        if self.events is not None:
            self.events("Normal", NODE_SHUTDOWN_EVENT, "Shutdown manager detected shutdown event")
        try:
            await self._process(self.active_pods())
        finally:
            self._done.set()
            logger.info("shutdown manager completed processing shutdown event, node will shutdown shortly")

    async def _process(self, pods: list[Pod]) -> None:
        assert self._nursery is not None, "NodeShutdownManager.run must be running"
        for group, members in zip(self.groups, group_by_priority(self.groups, pods), strict=True):
            if not members:
                continue
            progress = _Progress(len(members))
            self.group_starts.append((group.priority, trio.current_time()))
            for pod in members:
                own = pod.spec.termination_grace_period_seconds if pod.spec else None
                grace = own if own is not None and own <= group.grace_period else group.grace_period
                self._nursery.start_soon(self._kill, pod, grace, progress)
            with trio.move_on_after(group.grace_period) as scope:
                await progress.done.wait()
            if scope.cancelled_caught:
                logger.info(
                    "shutdown manager pod killing time out",
                    extra=kv(grace_period=group.grace_period, priority=group.priority),
                )

    async def _kill(self, pod: Pod, grace_period: int, progress: _Progress) -> None:
        ctx = {"pod": kobj(pod), "uid": pod.uid, "grace_period": grace_period}
        logger.info("shutdown manager killing pod with gracePeriod", extra=kv(**ctx))
        try:
            await self.terminator.terminate_pod_abnormally(
                pod, grace_period=grace_period, reason=NODE_SHUTDOWN_REASON, message=NODE_SHUTDOWN_MESSAGE
            )
        except Exception as err:
            logger.warning("shutdown manager failed killing pod", extra=kv(**ctx, err=err))
        else:
            logger.info("shutdown manager finished killing pod", extra=kv(**ctx))
        finally:
            progress.finished()


@attrs.define(eq=False)
class _Progress:
    """How many kills of a group are still running; ``done`` once none is."""

    remaining: int
    done: trio.Event = attrs.Factory(trio.Event)

    def finished(self) -> None:
        self.remaining -= 1
        if self.remaining <= 0:
            self.done.set()
