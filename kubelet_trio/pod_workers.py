"""Pod workers: one task per pod UID, one sync in flight, the latest desired state wins.

Go: ``pkg/kubelet/pod_workers.go``. ``update_pod`` never blocks: it replaces the UID's pending update and
wakes its task. Each task walks the lifecycle syncing → terminating → terminated. A newer update that
makes the pod terminating (or shortens its grace period) cancels the in-flight sync through the task's
cancel scope, so a pod deleted during a slow image pull stops pulling at once. Before each sync the task
waits for pod-cache data newer than its previous sync, so it never acts on status older than its own last
action.
"""

from __future__ import annotations

import enum
import logging
import math
import random
from collections.abc import Awaitable, Callable
from typing import Protocol

import attrs
import trio

from kubelet_trio import defaults
from kubelet_trio.api import Pod
from kubelet_trio.container.cache import PodCache
from kubelet_trio.container.types import PodStatus, RuntimePod
from kubelet_trio.logs import kv

logger = logging.getLogger(__name__)

RESYNC_INTERVAL = (
    defaults.SYNC_FREQUENCY
)  # syncFrequency: a pod in sync is looked at again after this (with jitter)
BACKOFF_PERIOD = 10.0  # retry after a failed sync that carries no backoff expiry of its own
JITTER_FACTOR = 0.5
MIN_GRACE_PERIOD = 1  # seconds; the pod-level floor (containers get at least 2 s from the runtime layer)
DEFAULT_GRACE_PERIOD = 30


class UpdateType(enum.Enum):
    CREATE = "create"
    UPDATE = "update"
    SYNC = "sync"
    KILL = "kill"


class WorkType(enum.Enum):
    SYNC = "sync"
    TERMINATING = "terminating"
    TERMINATED = "terminated"


@attrs.frozen
class UpdatePodOptions:
    update_type: UpdateType
    pod: Pod | None = None
    running_pod: RuntimePod | None = None  # an orphan known only from the runtime (KILL only)
    grace_period_override: int | None = None
    killed: trio.Event | None = None  # set once the pod is fully terminated (or already was)
    evict: bool = False  # a KILL by the eviction manager: the pod's content goes once it is terminated


class SyncError(Exception):
    """A sync that did not reach the desired state; ``retry_at`` (trio time) is when a backoff ends."""

    def __init__(self, message: str, retry_at: float | None = None) -> None:
        super().__init__(message)
        self.retry_at = retry_at


class PodSyncer(Protocol):
    """The kubelet side of a pod worker (Go: SyncPod, SyncTerminatingPod, ...)."""

    async def sync_pod(self, update_type: UpdateType, pod: Pod, status: PodStatus) -> bool:
        """Move the pod towards its spec; True when the pod reached a terminal phase."""
        ...

    async def sync_terminating_pod(self, pod: Pod, status: PodStatus, grace_period: int) -> None: ...

    async def sync_terminating_runtime_pod(self, running_pod: RuntimePod) -> None: ...

    async def sync_terminated_pod(self, pod: Pod, status: PodStatus) -> None: ...


def effective_grace_period(current: int, pod: Pod | None, override: int | None) -> int:
    """Go ``calculateEffectiveGracePeriod``: only ever shrinks, falls back to the spec, at least 1 s."""
    grace = current
    overridden = False
    deletion = pod.metadata.deletion_grace_period_seconds if pod and pod.metadata else None
    for candidate in (deletion, override):
        if candidate is not None and (grace == 0 or candidate < grace):
            grace, overridden = candidate, True
    if not overridden and grace == 0:
        spec_grace = pod.spec.termination_grace_period_seconds if pod and pod.spec else None
        grace = DEFAULT_GRACE_PERIOD if spec_grace is None else spec_grace
    return max(grace, MIN_GRACE_PERIOD)


@attrs.define(eq=False)
class PodSyncStatus:
    """Everything a worker knows about one UID (Go: podSyncStatus)."""

    uid: str
    full_name: str
    pod: Pod | None = None
    running_pod: RuntimePod | None = None
    pending: UpdatePodOptions | None = None
    wake: trio.Event = attrs.Factory(trio.Event)
    sync_scope: trio.CancelScope | None = None
    synced_at: float | None = None
    started_at: float | None = None
    terminating_at: float | None = None
    terminated_at: float | None = None
    grace_period: int = 0
    deleted: bool = False
    evicted: bool = False
    finished: bool = False
    restart_requested: bool = False
    last_sync_time: float = -math.inf
    # When the syncer inspected the pod after its last runtime action (see PodWorkers.refreshed)
    refreshed_at: float | None = None
    untouched: bool = False  # the sync in flight changed nothing in the runtime (see PodWorkers.untouched)
    kill_waiters: list[trio.Event] = attrs.Factory(list)
    done: trio.Event = attrs.Factory(trio.Event)  # set once the worker has finished the pod

    @property
    def work_type(self) -> WorkType:
        if self.terminated_at is not None:
            return WorkType.TERMINATED
        if self.terminating_at is not None:
            return WorkType.TERMINATING
        return WorkType.SYNC

    def mark_finished(self) -> None:
        self.finished = True
        self.done.set()
        for event in self.kill_waiters:
            event.set()
        self.kill_waiters.clear()


@attrs.define(eq=False)
class PodWorkers:
    """Owns the per-pod tasks. Start with ``await nursery.start(workers.run)``."""

    syncer: PodSyncer
    cache: PodCache
    resync_interval: float = RESYNC_INTERVAL
    backoff_period: float = BACKOFF_PERIOD
    jitter: float = JITTER_FACTOR
    rng: random.Random = attrs.Factory(random.Random)
    on_sync_duration: Callable[[WorkType, float], None] | None = None
    # Inspects a pod into the cache and returns its status (None: the runtime could not be asked). A
    # terminating pod uses it rather than wait up to a relist for status newer than its last sync.
    inspect: Callable[[Pod], Awaitable[PodStatus | None]] | None = None
    _statuses: dict[str, PodSyncStatus] = attrs.Factory(dict)
    _work_queue: dict[str, float] = attrs.Factory(dict)  # uid -> trio time the pod is due a re-sync
    _static_started: dict[str, str] = attrs.Factory(dict)  # full name -> the UID allowed to run
    _static_waiting: dict[str, list[str]] = attrs.Factory(dict)  # full name -> UIDs waiting, FIFO
    _nursery: trio.Nursery | None = None
    _pods_synced: bool = False

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    # -- the API used by the sync loop -------------------------------------------------------------

    def update_pod(self, options: UpdatePodOptions) -> None:
        """Record the latest desired state of a pod and wake its worker. Never blocks."""
        pod, running = options.pod, options.running_pod
        if pod is None:
            if running is None or options.update_type is not UpdateType.KILL:
                logger.debug("ignoring update without a pod", extra=kv(op=options.update_type.value))
                return
            uid, full_name = running.uid, running.full_name
        else:
            uid, full_name = pod.uid, pod.full_name
        now = trio.current_time()
        status = self._statuses.get(uid)
        first_time = status is None
        if status is None:
            status = PodSyncStatus(uid=uid, full_name=full_name)
            self._statuses[uid] = status
            if pod is not None and pod.is_terminal and not self._could_be_running(uid):
                # A kubelet restart found a finished pod: only its terminated-cleanup runs.
                status.terminating_at = status.terminated_at = now
            self._start_worker(status)
        if options.update_type is UpdateType.CREATE and status.terminating_at is not None and not first_time:
            # Go checks this before ``finished``: a finished worker of a re-added UID is purged too
            status.restart_requested = True  # housekeeping restarts it once termination completes
            logger.info("pod is terminating, restart requested", extra=kv(pod=full_name, uid=uid))
            return
        if status.finished:
            if options.killed is not None:
                options.killed.set()
            return
        if pod is not None:
            status.pod = pod
        if running is not None:
            status.running_pod = running

        became_terminating = False
        if status.terminating_at is None:
            if pod is None or (pod.metadata and pod.metadata.deletion_timestamp):
                status.deleted = True
                became_terminating = True
            elif pod.is_terminal or options.update_type is UpdateType.KILL:
                became_terminating = True
                status.evicted = options.evict and not pod.is_terminal
            if became_terminating:
                status.terminating_at = now
                logger.info("pod is terminating", extra=kv(pod=full_name, uid=uid))

        override = options.grace_period_override
        if status.terminating_at is not None:
            grace = effective_grace_period(status.grace_period, status.pod, override)
            shrank = status.grace_period != 0 and grace < status.grace_period
            status.grace_period = grace
            if options.killed is not None:
                if status.terminated_at is not None:
                    options.killed.set()
                else:
                    status.kill_waiters.append(options.killed)
            if (became_terminating or shrank) and status.sync_scope is not None:
                status.sync_scope.cancel()  # the in-flight sync gives way to termination
        status.pending = attrs.evolve(options, grace_period_override=status.grace_period or None)
        self._work_queue.pop(uid, None)
        status.wake.set()

    def due(self, now: float | None = None) -> list[str]:
        """UIDs whose re-sync time has come (Go: workQueue.GetWork); they leave the queue."""
        now = trio.current_time() if now is None else now
        ready = [uid for uid, at in self._work_queue.items() if at <= now]
        for uid in ready:
            del self._work_queue[uid]
        return ready

    def sync_known_pods(self, desired: dict[str, Pod]) -> dict[str, WorkType]:
        """Forget finished workers of pods no longer desired; terminate running ones (housekeeping)."""
        self._pods_synced = True
        known: dict[str, WorkType] = {}
        for uid, status in list(self._statuses.items()):
            if uid not in desired or status.restart_requested:
                if status.finished:
                    del self._statuses[uid]
                    self._work_queue.pop(uid, None)
                    continue
                if status.terminating_at is None:
                    status.terminating_at = trio.current_time()
                    status.grace_period = effective_grace_period(status.grace_period, status.pod, None)
                    status.pending = UpdatePodOptions(
                        UpdateType.KILL, pod=status.pod, running_pod=status.running_pod
                    )
                    status.wake.set()
            known[uid] = status.work_type
        return known

    # -- queries ----------------------------------------------------------------------------------

    def status(self, uid: str) -> PodSyncStatus | None:
        return self._statuses.get(uid)

    def is_known(self, uid: str) -> bool:
        return uid in self._statuses

    def is_termination_requested(self, uid: str) -> bool:
        status = self._statuses.get(uid)
        return status is not None and status.terminating_at is not None

    def is_terminated(self, uid: str) -> bool:
        status = self._statuses.get(uid)
        return status is not None and status.terminated_at is not None

    def is_finished(self, uid: str) -> bool:
        status = self._statuses.get(uid)
        return status is not None and status.finished

    async def wait_finished(self, uid: str) -> None:
        """Wait until the worker of ``uid`` has terminated the pod and cleaned up after it."""
        status = self._statuses.get(uid)
        if status is None:
            raise KeyError(f"no pod worker for uid {uid}")
        await status.done.wait()

    def should_pod_content_be_removed(self, uid: str) -> bool:
        """Go ``ShouldPodContentBeRemoved`` (the deletor, the container GC): evicted, or deleted and
        terminated; a pod no worker knows once the sources have synced."""
        status = self._statuses.get(uid)
        if status is None:
            return self._pods_synced
        return status.evicted or (status.deleted and status.terminated_at is not None)

    def should_pod_runtime_be_removed(self, uid: str) -> bool:
        """Go ``ShouldPodRuntimeBeRemoved`` (eviction's reclaim): terminated; a pod no worker knows once the
        sources have synced."""
        status = self._statuses.get(uid)
        if status is None:
            return self._pods_synced
        return status.terminated_at is not None

    def could_have_running_containers(self, uid: str) -> bool:
        status = self._statuses.get(uid)
        if status is None:
            return not self._pods_synced
        return status.terminated_at is None

    def _could_be_running(self, uid: str) -> bool:
        return self.cache.get(uid).could_be_running

    # -- the worker ---------------------------------------------------------------------------------

    def _start_worker(self, status: PodSyncStatus) -> None:
        if self._nursery is None:
            raise RuntimeError("PodWorkers.run() has not been started")
        self._nursery.start_soon(self._worker, status, name=f"pod-worker:{status.full_name}")

    def _allow_start(self, status: PodSyncStatus) -> bool:
        """Static pods: one UID per full name runs at a time; later UIDs wait in FIFO order."""
        pod = status.pod
        if pod is None or not pod.is_static or status.terminating_at is not None:
            return True
        holder = self._static_started.get(status.full_name)
        if holder == status.uid:
            return True
        waiting = self._static_waiting.setdefault(status.full_name, [])
        if status.uid not in waiting:
            waiting.append(status.uid)
        if holder is None and waiting[0] == status.uid:
            waiting.pop(0)
            self._static_started[status.full_name] = status.uid
            return True
        return False

    def _release_static(self, status: PodSyncStatus) -> None:
        if self._static_started.get(status.full_name) == status.uid:
            del self._static_started[status.full_name]
        waiting = self._static_waiting.get(status.full_name, [])
        if status.uid in waiting:
            waiting.remove(status.uid)
        if waiting and (next_status := self._statuses.get(waiting[0])) is not None:
            next_status.wake.set()  # the next UID of that name may start now

    async def _worker(self, status: PodSyncStatus) -> None:
        while not status.finished:
            await status.wake.wait()
            status.wake = trio.Event()
            update = status.pending
            if update is None:
                continue
            if status.work_type is WorkType.SYNC and not self._allow_start(status):
                logger.info(
                    "static pod waits for the previous UID of its name",
                    extra=kv(pod=status.full_name, uid=status.uid),
                )
                continue
            status.pending = None
            await self._sync_once(status, update)
        logger.debug("pod worker finished", extra=kv(pod=status.full_name, uid=status.uid))

    async def _sync_once(self, status: PodSyncStatus, update: UpdatePodOptions) -> None:
        work_type = status.work_type
        started = trio.current_time()
        error: Exception | None = None
        terminal = False
        with trio.CancelScope() as scope:
            status.sync_scope = scope
            try:
                terminal = await self._dispatch(status, update, work_type)
            except Exception as exc:  # one pod's failure never reaches the others
                error = exc
            finally:
                status.sync_scope = None
        previous_sync_time, status.last_sync_time = status.last_sync_time, trio.current_time()
        if status.refreshed_at is not None and status.refreshed_at >= started:
            # The cache already holds what this sync did: the next one need not wait for a relist.
            status.last_sync_time = math.nextafter(status.refreshed_at, -math.inf)
        elif status.untouched and error is None:
            # Nothing to see: the status this sync acted on is as good for the next one.
            status.last_sync_time = previous_sync_time
        status.refreshed_at, status.untouched = None, False
        if self.on_sync_duration is not None:
            self.on_sync_duration(work_type, status.last_sync_time - started)
        if scope.cancelled_caught:
            logger.debug("sync cancelled by a newer update", extra=kv(pod=status.full_name, uid=status.uid))
            status.wake.set()
            return
        self._complete(status, work_type, terminal, error)

    async def _dispatch(self, status: PodSyncStatus, update: UpdatePodOptions, work_type: WorkType) -> bool:
        if work_type is WorkType.TERMINATING and status.pod is None:
            assert status.running_pod is not None
            await self.syncer.sync_terminating_runtime_pod(status.running_pod)
            return False
        runtime_status = await self._status_for(status, work_type)
        pod = status.pod  # read after the wait: an update that arrived meanwhile is already in it
        assert pod is not None
        if work_type is WorkType.TERMINATED:
            await self.syncer.sync_terminated_pod(pod, runtime_status)
        elif work_type is WorkType.TERMINATING:
            await self.syncer.sync_terminating_pod(pod, runtime_status, status.grace_period)
        else:
            if status.started_at is None:
                status.started_at = trio.current_time()
            return await self.syncer.sync_pod(update.update_type, pod, runtime_status)
        return False

    async def _status_for(self, status: PodSyncStatus, work_type: WorkType) -> PodStatus:
        """Runtime status newer than the pod's last sync: the cache's (written by the relist, or by the
        syncer right after its actions; or any entry once a relist has completed since, as Go's
        ``GetNewerThan``), else, for a terminating pod, an inspection made now rather than wait."""
        entry = self.cache.get_entry(status.uid)
        fresh_enough = self.cache.timestamp > status.last_sync_time or (
            entry is not None and entry.modified > status.last_sync_time
        )
        if not fresh_enough and work_type is WorkType.TERMINATING and self.inspect is not None:
            assert status.pod is not None
            inspected = await self.inspect(status.pod)
            if inspected is not None:
                return inspected
        return await self.cache.get_newer_than(status.uid, status.last_sync_time)

    def _complete(
        self, status: PodSyncStatus, work_type: WorkType, terminal: bool, error: Exception | None
    ) -> None:
        now = trio.current_time()
        uid = status.uid
        if error is not None:
            retry_at = error.retry_at if isinstance(error, SyncError) else None
            logger.warning(
                "error syncing pod, will retry",
                extra=kv(pod=status.full_name, uid=uid, work=work_type.value, error=error),
            )
            if retry_at is not None:
                delay = min(max(retry_at - now, 0.0), self.resync_interval)
            else:
                delay = self._jittered(self.backoff_period)
            self._requeue(status, delay)
            return
        if work_type is WorkType.TERMINATED:
            self._release_static(status)
            status.mark_finished()
            logger.info("pod terminated and cleaned up", extra=kv(pod=status.full_name, uid=uid))
            return
        if work_type is WorkType.TERMINATING:
            if status.pod is None:  # an orphan: nothing more to do for it
                status.terminated_at = now
                status.mark_finished()
                return
            status.terminated_at = now
            self._requeue(status, 0.0)
            return
        status.synced_at = now
        if terminal:
            status.terminating_at = now
            # Go passes no override here, so the kill uses the pod's own (deletion or spec) grace period
            status.grace_period = effective_grace_period(status.grace_period, status.pod, None)
            self._requeue(status, 0.0)
            return
        self._work_queue[uid] = now + self._jittered(self.resync_interval)

    def _requeue(self, status: PodSyncStatus, delay: float) -> None:
        """Re-run the last update: at once (phase transitions) or via the work queue (retries)."""
        if status.pending is None:
            status.pending = UpdatePodOptions(UpdateType.SYNC, pod=status.pod, running_pod=status.running_pod)
        if delay <= 0:
            status.wake.set()
        else:
            self._work_queue[status.uid] = trio.current_time() + delay

    def refreshed(self, uid: str, timestamp: float) -> None:
        """The syncer inspected ``uid`` into the cache at ``timestamp``, after every runtime action of
        the sync in flight: the pod's next sync reads that entry instead of waiting for the next relist
        (``get_newer_than`` still guarantees it never acts on status older than its own actions)."""
        status = self._statuses.get(uid)
        if status is not None:
            status.refreshed_at = timestamp

    def untouched(self, uid: str) -> None:
        """The sync in flight found nothing to do in the runtime: the next sync (a kill, say) may use the
        runtime status this one used, rather than wait for (or make) a newer inspection."""
        status = self._statuses.get(uid)
        if status is not None:
            status.untouched = True

    def wake_due(self, uid: str) -> None:
        """Called by the sync loop for a due UID whose pod is known only to the workers."""
        status = self._statuses.get(uid)
        if status is not None and not status.finished:
            status.wake.set()

    def _jittered(self, period: float) -> float:
        return period * (1 + self.rng.random() * self.jitter) if self.jitter else period
