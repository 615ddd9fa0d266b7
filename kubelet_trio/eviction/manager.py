"""The eviction manager (Go: ``pkg/kubelet/eviction/eviction_manager.go``).

Every monitoring interval (10 s) it measures the node's signals and compares them with the thresholds:

- a threshold is *met* when its signal is below it; once met it stays met until the signal is above it
  by the minimum reclaim;
- the node conditions (MemoryPressure, DiskPressure, PIDPressure) of the met thresholds are reported,
  and stay reported for the pressure transition period (5 m) after they were last observed, so a node
  does not flap between pressure and none;
- a soft threshold acts once it has been met for its grace period; a hard one at once;
- to act, it first reclaims node-level resources for disk signals (dead containers, unused images); if
  every threshold is then satisfied, no pod is evicted. Otherwise it ranks the active pods for the
  starved resource and evicts the first that may be evicted (never a critical pod): the pod is Failed
  with reason ``Evicted`` and a message naming the resource, with an event, and killed through the
  pod workers with grace period 1 s (hard) or at most ``evictionMaxPodGracePeriod`` (soft). One pod per
  round; after an eviction the next round starts as soon as the pod is cleaned up (at most 30 s);
- before any of this, pods over their own local storage limits (an emptyDir's ``sizeLimit``, the
  ephemeral-storage limits of the pod or a container) are evicted at once, pressure or not.

Admission (:meth:`EvictionManager.admit`): under memory pressure only BestEffort pods are refused (unless
they tolerate the memory-pressure taint), under any other pressure every pod; critical pods are always
admitted.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

import attrs
import trio
import trio_util

from kubelet_trio import defaults
from kubelet_trio.api import Pod
from kubelet_trio.eviction.api import (
    IMAGEFS_AVAILABLE,
    IMAGEFS_INODES_FREE,
    MEMORY_SIGNALS,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
    Threshold,
)
from kubelet_trio.eviction.helpers import (
    DISK_PRESSURE,
    MEMORY_PRESSURE,
    PID_PRESSURE,
    REASON,
    RankFunc,
    eviction_message,
    has_local_storage_limits,
    is_critical_pod,
    local_storage_violation,
    node_conditions,
    rank_functions,
    signal_resource,
    thresholds_met,
)
from kubelet_trio.eviction.signals import Observation, SignalSource
from kubelet_trio.eviction.usage import PodUsageProvider
from kubelet_trio.lifecycle.predicate import AdmitResult
from kubelet_trio.logs import kobj, kv
from kubelet_trio.pod_workers import DEFAULT_GRACE_PERIOD
from kubelet_trio.status.qos import pod_qos

__all__ = [
    "DEFAULT_PRESSURE_TRANSITION_PERIOD",
    "MONITORING_INTERVAL",
    "ContainerGC",
    "EvictionConfig",
    "EvictionManager",
    "ImageGC",
    "PodKiller",
]

logger = logging.getLogger(__name__)

MONITORING_INTERVAL = 10.0  # Go: evictionMonitoringPeriod
POD_CLEANUP_TIMEOUT = 30.0  # Go: podCleanupTimeout
IMMEDIATE_GRACE_PERIOD = 1  # Go: immediateEvictionGracePeriodSeconds (hard thresholds)
DEFAULT_PRESSURE_TRANSITION_PERIOD = defaults.EVICTION_PRESSURE_TRANSITION_PERIOD
MEMORY_PRESSURE_TAINT = "node.kubernetes.io/memory-pressure"
NODE_CONDITION_MESSAGE = "The node had condition: [{}]. "
_CONDITION_ORDER = (MEMORY_PRESSURE, DISK_PRESSURE, PID_PRESSURE)
_DISK_SIGNALS = (NODEFS_AVAILABLE, NODEFS_INODES_FREE, IMAGEFS_AVAILABLE, IMAGEFS_INODES_FREE)


@attrs.frozen(kw_only=True)
class EvictionConfig:
    """The thresholds (:func:`~kubelet_trio.eviction.api.parse_thresholds`) and timing."""

    thresholds: tuple[Threshold, ...] = ()
    pressure_transition_period: float = DEFAULT_PRESSURE_TRANSITION_PERIOD
    max_pod_grace_period: int = (
        defaults.EVICTION_MAX_POD_GRACE_PERIOD
    )  # evictionMaxPodGracePeriod: caps the grace period of soft evictions
    monitoring_interval: float = MONITORING_INTERVAL
    # Go localStorageCapacityIsolation: pods over their own emptyDir sizeLimit or ephemeral-storage limits
    # are evicted whatever the node's pressure
    local_storage_capacity_isolation: bool = True


class PodKiller(Protocol):
    """Ends a pod for good with phase Failed, ``reason`` and ``message`` (Go:
    ``TerminatePodAbnormallyAndWait``); returns once it is killed, or raises when that takes too long.
    ``evict``: its content goes once it is killed (Go's ``KillPodOptions.Evict``)."""

    async def terminate_pod_abnormally(
        self, pod: Pod, *, grace_period: int, reason: str, message: str, evict: bool = False
    ) -> None: ...


class ContainerGC(Protocol):
    """Removes every dead container the GC policy allows (Go: ``DeleteAllUnusedContainers``)."""

    async def delete_all_unused_containers(self) -> None: ...


class ImageGC(Protocol):
    """Removes unused images; returns the bytes freed (Go: ``DeleteUnusedImages``)."""

    async def delete_unused_images(self) -> int: ...


PodEventSink = Callable[[Pod, str, str, str], None]  # (pod, type, reason, message)
NodeEventSink = Callable[[str, str, str], None]  # (type, reason, message)


def _tolerates_memory_pressure(pod: Pod) -> bool:
    for toleration in (pod.spec.tolerations if pod.spec else None) or ():
        if toleration.effect and toleration.effect != "NoSchedule":
            continue
        if toleration.operator == "Exists":
            if not toleration.key or toleration.key == MEMORY_PRESSURE_TAINT:
                return True
        elif toleration.key == MEMORY_PRESSURE_TAINT and not toleration.value:
            return True
    return False


def _by_eviction_priority(thresholds: Sequence[Threshold]) -> list[Threshold]:
    """Memory first (Go ``byEvictionPriority``), the rest in their order."""
    return sorted(thresholds, key=lambda t: t.signal not in MEMORY_SIGNALS)


@attrs.define(eq=False, kw_only=True)
class EvictionManager:
    """Start with ``nursery.start(manager.run)``; :attr:`conditions` holds the node's pressure conditions."""

    config: EvictionConfig
    signals: SignalSource
    usage: PodUsageProvider
    killer: PodKiller
    active_pods: Callable[[], list[Pod]]
    wait_cleaned_up: Callable[[str], Awaitable[None]] | None = None  # by pod UID
    pod_events: PodEventSink | None = None
    node_events: NodeEventSink | None = None
    container_gc: ContainerGC | None = None
    image_gc: ImageGC | None = None
    conditions: trio_util.AsyncValue[frozenset[str]] = attrs.Factory(
        lambda: trio_util.AsyncValue(frozenset())
    )
    evictions: dict[str, int] = attrs.Factory(dict)  # by signal (Go: kubelet_evictions)
    _first_observed: dict[Threshold, float] = attrs.Factory(dict)
    _condition_last_observed: dict[str, float] = attrs.Factory(dict)
    _thresholds_met: list[Threshold] = attrs.Factory(list)
    _last_observations: Mapping[str, Observation] = attrs.Factory(dict)
    _dedicated_image_fs: bool | None = None
    _ranks: dict[str, RankFunc] = attrs.Factory(dict)

    # -- the loop -------------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Rounds until cancelled. As in Go the interval runs from the end of a round, and a round that
        evicted is followed by the next as soon as the pod is cleaned up."""
        task_status.started()
        if not self.config.thresholds and not self.config.local_storage_capacity_isolation:
            logger.info("eviction manager: no thresholds, nothing to monitor")
            await trio.sleep_forever()
        while True:
            try:
                evicted = await self.synchronize()
            except Exception as err:
                logger.error("eviction manager: failed to synchronize", extra=kv(error=err))
                evicted = []
            if evicted and self.wait_cleaned_up is not None:
                logger.info(
                    "eviction manager: pods evicted, waiting for pod to be cleaned up",
                    extra=kv(pods=[kobj(p) for p in evicted]),
                )
                with trio.move_on_after(POD_CLEANUP_TIMEOUT) as scope:
                    for pod in evicted:
                        await self.wait_cleaned_up(pod.uid)
                if scope.cancelled_caught:
                    logger.info(
                        "eviction manager: timed out waiting for pods to be cleaned up",
                        extra=kv(pods=[kobj(p) for p in evicted]),
                    )
            else:
                await trio.sleep(self.config.monitoring_interval)

    # -- queries --------------------------------------------------------------------------------------

    def admit(self, pod: Pod, others: Sequence[Pod] = ()) -> AdmitResult | None:
        """Go ``Admit``: None to admit, else why not (reason ``Evicted``)."""
        conditions = self.conditions.value
        if not conditions or is_critical_pod(pod):
            return None
        if conditions == {MEMORY_PRESSURE} and (
            pod_qos(pod) != "BestEffort" or _tolerates_memory_pressure(pod)
        ):
            return None
        shown = " ".join(c for c in _CONDITION_ORDER if c in conditions)
        logger.info("failed to admit pod to node", extra=kv(pod=kobj(pod), node_condition=shown))
        return AdmitResult(REASON, NODE_CONDITION_MESSAGE.format(shown))

    # -- one round ------------------------------------------------------------------------------------

    async def synchronize(self) -> list[Pod]:
        """One round (Go ``synchronize``); returns the pods evicted: every pod over its own local storage
        limits, else at most one for the node's pressure."""
        if not self.config.thresholds and not self.config.local_storage_capacity_isolation:
            return []
        measured = await self.signals.observe()
        if self._dedicated_image_fs is None or self._dedicated_image_fs != measured.dedicated_image_fs:
            self._dedicated_image_fs = measured.dedicated_image_fs
            self._ranks = rank_functions(measured.dedicated_image_fs)
        observations = measured.signals
        thresholds = thresholds_met(self.config.thresholds, observations, enforce_min_reclaim=False)
        if self._thresholds_met:  # met before and not yet reclaimed by the minimum reclaim
            unresolved = thresholds_met(self._thresholds_met, observations, enforce_min_reclaim=True)
            thresholds += [t for t in unresolved if t not in thresholds]
        now = trio.current_time()
        first_observed = {t: self._first_observed.get(t, now) for t in thresholds}
        last_observed = dict(self._condition_last_observed)
        for condition in node_conditions(thresholds):
            last_observed[condition] = now
        period = self.config.pressure_transition_period
        conditions = frozenset(c for c, at in last_observed.items() if now - at < period)
        actionable = [t for t, at in first_observed.items() if now - at >= t.grace_period]
        self._first_observed = first_observed
        self._condition_last_observed = last_observed
        self._thresholds_met = actionable
        if conditions != self.conditions.value:
            logger.info("eviction manager: node conditions changed", extra=kv(conditions=sorted(conditions)))
            self.conditions.value = conditions
        updated = [
            t
            for t in actionable
            if t.signal in observations
            and (
                t.signal not in self._last_observations
                or observations[t.signal].time > self._last_observations[t.signal].time
            )
        ]
        self._last_observations = observations
        if self.config.local_storage_capacity_isolation:
            evicted = await self._local_storage_eviction(measured.dedicated_image_fs)
            if evicted:
                return evicted
        if not updated:
            return []
        threshold = _by_eviction_priority(updated)[0]
        resource = signal_resource(threshold.signal)
        logger.info("eviction manager: attempting to reclaim", extra=kv(resource_name=resource))
        if self.node_events is not None:
            self.node_events("Warning", "EvictionThresholdMet", f"Attempting to reclaim {resource}")
        if await self._reclaim_node_level(threshold.signal):
            logger.info(
                "eviction manager: able to reduce resource pressure without evicting pods",
                extra=kv(resource_name=resource),
            )
            return []
        logger.info("eviction manager: must evict pod(s) to reclaim", extra=kv(resource_name=resource))
        pods = list(self.active_pods())
        if not pods:
            logger.error(
                "eviction manager: eviction thresholds have been met, but no pods are active to evict"
            )
            return []
        stats = await self.usage.pod_usage(pods)
        self._ranks[threshold.signal](pods, stats)
        logger.info("eviction manager: pods ranked for eviction", extra=kv(pods=[kobj(p) for p in pods]))
        for pod in pods:
            grace = IMMEDIATE_GRACE_PERIOD if threshold.hard else self._soft_grace_period(pod)
            message = eviction_message(resource, pod, stats, updated, observations)
            if await self._evict(pod, grace, message):
                self.evictions[threshold.signal] = self.evictions.get(threshold.signal, 0) + 1
                return [pod]
        logger.info("eviction manager: unable to evict any pods from the node")
        return []

    async def _local_storage_eviction(self, dedicated: bool) -> list[Pod]:
        """Go ``localStorageEviction``: evict, at once, every pod over its own local storage limits."""
        pods = [pod for pod in self.active_pods() if has_local_storage_limits(pod)]
        if not pods:
            return []
        stats = await self.usage.pod_usage(pods)
        evicted = []
        for pod in pods:
            usage = stats.get(pod.uid)
            violation = (
                None if usage is None else local_storage_violation(pod, usage, dedicated_image_fs=dedicated)
            )
            if violation is not None and await self._evict(pod, IMMEDIATE_GRACE_PERIOD, violation[1]):
                self.evictions[violation[0]] = self.evictions.get(violation[0], 0) + 1
                evicted.append(pod)
        return evicted

    def _soft_grace_period(self, pod: Pod) -> int:
        """min(evictionMaxPodGracePeriod, the pod's terminationGracePeriodSeconds): the cap the setting is
        documented to be (Go uses the setting as is, which can lengthen a pod's grace period)."""
        own = pod.spec.termination_grace_period_seconds if pod.spec else None
        own = DEFAULT_GRACE_PERIOD if own is None else own
        return max(min(self.config.max_pod_grace_period, own), 0)

    async def _reclaim_node_level(self, signal: str) -> bool:
        """Go ``reclaimNodeLevelResources``: dead containers and unused images for disk signals (with a
        dedicated image filesystem, only for imagefs ones); True when every threshold is then met by
        its minimum reclaim."""
        if signal not in _DISK_SIGNALS or (self._dedicated_image_fs and signal in _DISK_SIGNALS[:2]):
            return False
        reclaims: list[Callable[[], Awaitable[object]]] = []
        if self.container_gc is not None:
            reclaims.append(self.container_gc.delete_all_unused_containers)
        if self.image_gc is not None:
            reclaims.append(self.image_gc.delete_unused_images)
        if not reclaims:
            return False
        for reclaim in reclaims:
            try:
                await reclaim()
            except Exception as err:
                logger.info(
                    "eviction manager: unexpected error when attempting to reduce resource pressure",
                    extra=kv(resource_name=signal_resource(signal), error=err),
                )
        measured = await self.signals.observe()
        return not thresholds_met(self.config.thresholds, measured.signals, enforce_min_reclaim=True)

    async def _evict(self, pod: Pod, grace_period: int, message: str) -> bool:
        if is_critical_pod(pod):
            logger.error("eviction manager: cannot evict a critical pod", extra=kv(pod=kobj(pod)))
            return False
        if self.pod_events is not None:
            self.pod_events(pod, "Warning", REASON, message)
        logger.info("evicting pod", extra=kv(pod=kobj(pod), uid=pod.uid, message=message))
        try:
            await self.killer.terminate_pod_abnormally(
                pod, grace_period=grace_period, reason=REASON, message=message, evict=True
            )
        except Exception as err:
            logger.error("eviction manager: pod failed to evict", extra=kv(pod=kobj(pod), error=err))
        else:
            logger.info("eviction manager: pod is evicted successfully", extra=kv(pod=kobj(pod)))
        return True
