"""The Kubelet's per-pod work: which pods are active, a pod's status, syncing, killing and cleaning up.

Go: ``pkg/kubelet/kubelet_pods.go`` (``GetActivePods``, ``generateAPIPodStatus``, ``getPullSecretsForPod``,
``HandlePodCleanups``, ``killPodNow``, ``ShouldPodContentBeRemoved``) and the ``PodSyncer`` half of
``kubelet.go`` (``SyncPod``, ``SyncTerminatingPod``, ``SyncTerminatingRuntimePod``, ``SyncTerminatedPod``),
which the pod workers call: everything that acts on one pod rather than on the sync loop.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING

import attrs
import trio

from kubelet_trio import allocation
from kubelet_trio.api.pod import TERMINAL_PHASES
from kubelet_trio.api.status import PodCondition as ApiPodCondition
from kubelet_trio.api.timefmt import rfc3339
from kubelet_trio.cm.cgroup_manager import CgroupError
from kubelet_trio.cm.container_manager import FAILED_TO_CREATE_POD_CONTAINER
from kubelet_trio.container.types import ContainerState
from kubelet_trio.kuberuntime.manager import ACTION_RESIZE_POD_IN_PLACE, running_pod_from_status
from kubelet_trio.logs import kobj, kv
from kubelet_trio.objects import NO_OBJECTS, ObjectUnavailable
from kubelet_trio.pod_workers import SyncError, UpdatePodOptions, UpdateType, WorkType
from kubelet_trio.status.generate import DEADLINE_EXCEEDED_REASON, generate_api_pod_status
from kubelet_trio.volumemanager import MountError, make_pod_data_dirs

if TYPE_CHECKING:
    from kubelet_trio.api import Pod
    from kubelet_trio.api.status import PodStatus as ApiPodStatus
    from kubelet_trio.clock import WallClock
    from kubelet_trio.cm.container_manager import ContainerManager
    from kubelet_trio.container.cache import PodCache
    from kubelet_trio.container.types import PodStatus, RuntimePod
    from kubelet_trio.fsio import RunSync
    from kubelet_trio.kubelet_config import KubeletConfig
    from kubelet_trio.kuberuntime.manager import KubeRuntimeManager
    from kubelet_trio.objects import ObjectStore, Secret
    from kubelet_trio.pleg.generic import GenericPLEG
    from kubelet_trio.pod.manager import PodManager
    from kubelet_trio.pod_workers import PodWorkers
    from kubelet_trio.prober import ProbeManager
    from kubelet_trio.status.manager import StatusManager
    from kubelet_trio.volumemanager import VolumeManager

# the Kubelet's own logger, whichever of its modules writes the line
logger = logging.getLogger("kubelet_trio.kubelet")

ORPHAN_GRACE_PERIOD = 1
FAILED_TO_RETRIEVE_IMAGE_PULL_SECRET = "FailedToRetrieveImagePullSecret"
OBJECT_PREFETCH_TIMEOUT = 10.0  # a pod sync waits this long at most for its ConfigMaps and Secrets
KILL_DEADLINE_MARGIN = 10.0  # beyond the grace period, for the runtime to deliver SIGKILL and answer


class PodsMixin:
    """The per-pod methods of the :class:`~kubelet_trio.kubelet.Kubelet` (whose fields the annotations below
    declare for the type checker; attrs defines them on the Kubelet)."""

    __slots__ = ()

    config: KubeletConfig
    clock: WallClock
    run_sync: RunSync
    rejected: set[str]
    _cache: PodCache
    _pod_manager: PodManager
    _status_manager: StatusManager
    _probe_manager: ProbeManager
    _volume_manager: VolumeManager
    _kube_runtime: KubeRuntimeManager
    _pleg: GenericPLEG
    _pod_workers: PodWorkers
    _allocation_manager: allocation.AllocationManager | None
    _container_manager: ContainerManager | None
    _object_store: ObjectStore
    _object_prefetch: Callable[[Pod], Awaitable[None]] | None
    _data_dirs_made: set[str]
    _dead_container_removals: dict[str, bool]
    _forget_pod_events: Callable[[Collection[str]], None] | None
    _nursery: trio.Nursery | None

    if TYPE_CHECKING:  # defined on the Kubelet

        def record_event(self, pod: Pod, type_: str, reason: str, message: str) -> None: ...

    # -- the active pods, killing one -------------------------------------------------------------------

    def active_pods(self) -> list[Pod]:
        """Go ``GetActivePods``: the admitted pods that still hold resources (see
        :meth:`_is_admitted_active`)."""
        return [p for p in self._pod_manager.pods() if self._is_admitted_active(p)]

    def _is_admitted_active(self, pod: Pod) -> bool:
        """Go ``filterOutInactivePods``: admitted, not yet known to be terminated, and not terminal unless
        it is still being terminated. A terminating pod counts: its containers hold their resources until
        they are stopped, so the Go kubelet admits new pods against it (``maxPods`` included)."""
        uid = pod.uid
        workers = self._pod_workers
        if uid in self.rejected or not workers.is_known(uid) or workers.is_terminated(uid):
            return False
        return not pod.is_terminal or workers.is_termination_requested(uid)

    async def _pod_ips(self, pod: Pod) -> tuple[str, ...]:
        """The pod's IPs from the runtime (httpGet lifecycle hooks without a host)."""
        return (await self._kube_runtime.get_pod_status(pod.uid, pod.name, pod.namespace)).ips

    async def terminate_pod_abnormally(
        self, pod: Pod, *, grace_period: int, reason: str, message: str, evict: bool = False
    ) -> None:
        """Go ``TerminatePodAbnormallyAndWait``: the pod is Failed with ``reason`` and ``message`` (phases
        are monotonic, so it stays so) and killed through its worker with ``grace_period``; returns once it
        is killed. Raises TimeoutError when that takes longer than the grace period and a margin. An
        evicted pod's containers, sandboxes and logs go once it is killed, as a deleted pod's do."""
        status = self.generate_status(pod, self._cache.get(pod.uid))
        condition = ApiPodCondition(
            type="DisruptionTarget",
            status="True",
            reason="TerminationByKubelet",
            message=message,
            last_transition_time=rfc3339(self.clock.now()),
        )
        others = tuple(c for c in status.conditions or () if c.type != "DisruptionTarget")
        conditions = (*others, condition)
        failed = attrs.evolve(status, phase="Failed", reason=reason, message=message, conditions=conditions)
        self._status_manager.set_pod_status(pod, failed)
        killed = trio.Event()
        self._pod_workers.update_pod(
            UpdatePodOptions(
                UpdateType.KILL, pod=pod, grace_period_override=grace_period, killed=killed, evict=evict
            )
        )
        with trio.move_on_after(grace_period * 1.5 + KILL_DEADLINE_MARGIN):
            await killed.wait()
        if not killed.is_set():
            raise TimeoutError(f"pod {pod.full_name} was not killed within its grace period {grace_period}s")

    # -- housekeeping and container GC ------------------------------------------------------------------

    def _start_dead_container_removal(self, uid: str) -> None:
        """Go's deletor, in the background: keep the newest max(maxPerPodContainer, 1) dead instances of
        each container of ``uid``, none once the pod is deleted and terminated or evicted
        (``ShouldPodContentBeRemoved``), so a deleted pod's containers go as it ends, not a GC period
        later. Run when a container dies and when a pod's worker has terminated it (its containers may
        have died before, while it was terminating). One removal per pod at a time: asked again while one
        runs (a container's death and the pod's end come together), it goes once more afterwards."""
        if self._nursery is None:
            return
        if uid in self._dead_container_removals:
            self._dead_container_removals[uid] = True
            return
        self._dead_container_removals[uid] = False
        self._nursery.start_soon(self._remove_dead_containers, uid)

    async def _remove_dead_containers(self, uid: str) -> None:
        keep = self.config.maximum_dead_containers_per_container
        removed: set[str] = set()  # the cache can show them until the next relist: not asked twice
        try:
            while True:
                self._dead_container_removals[uid] = False
                status = self._cache.get(uid)
                left = tuple(c for c in status.container_statuses if c.id not in removed)
                try:
                    removed.update(
                        await self._kube_runtime.remove_dead_containers(
                            attrs.evolve(status, container_statuses=left),
                            keep_per_container=keep,
                            remove_all=self._pod_workers.should_pod_content_be_removed(uid),
                        )
                    )
                except Exception as exc:
                    logger.warning("removing dead containers failed", extra=kv(uid=uid, error=exc))
                if not self._dead_container_removals[uid]:
                    return
        finally:
            del self._dead_container_removals[uid]

    def _still_running(self, uid: str) -> bool:
        """The pod cache, which a worker refreshes right after killing a pod, still shows it running (the
        PLEG's listing may predate the kill by a relist)."""
        return self._cache.get(uid).could_be_running

    async def handle_pod_cleanups(self) -> None:
        """Housekeeping (Go HandlePodCleanups): kill orphans, restart forgotten pods, collect garbage."""
        desired = self._pod_manager.by_uid()
        known = self._pod_workers.sync_known_pods(desired)
        self._probe_manager.cleanup_pods(desired)
        running = [  # the PLEG's listing is at most one relist period old: no second listing
            p
            for p in self._pleg.pods()
            if any(c.state is ContainerState.RUNNING for c in (*p.containers, *p.sandboxes))
            and self._still_running(p.uid)
        ]
        for uid, pod in desired.items():
            if uid in known or uid in self.rejected or pod.is_terminal:
                continue
            if pod.metadata and pod.metadata.deletion_timestamp:
                continue
            logger.info("housekeeping starts a pod unknown to the workers", extra=kv(pod=kobj(pod), uid=uid))
            self._pod_workers.update_pod(UpdatePodOptions(UpdateType.CREATE, pod=pod))
        for runtime_pod in running:
            if runtime_pod.uid in known or runtime_pod.uid in desired:
                continue
            logger.info(
                "housekeeping kills an orphaned pod", extra=kv(pod=kobj(runtime_pod), uid=runtime_pod.uid)
            )
            self._pod_workers.update_pod(
                UpdatePodOptions(
                    UpdateType.KILL, running_pod=runtime_pod, grace_period_override=ORPHAN_GRACE_PERIOD
                )
            )
        self._status_manager.remove_orphaned(desired)
        if self._allocation_manager is not None:  # Go: RemoveOrphanedPods of both states
            self._allocation_manager.remove_orphaned_pods(set(desired) | set(known))
            self._kube_runtime.remove_orphaned_actuated(set(desired) | set(known))
        self._kube_runtime.gc_backoffs()  # Go: kl.backOff.GC(), entries idle for twice the maximum
        keep = set(desired) | set(known)
        self._kube_runtime.remove_orphaned_reasons(keep)
        if self._forget_pod_events is not None:
            self._forget_pod_events(keep)
        self._data_dirs_made.intersection_update(keep)
        await self._volume_manager.cleanup_orphaned_pod_dirs(keep)
        if self._container_manager is not None:  # Go: cleanupOrphanedPodCgroups
            # a terminated pod's cgroup goes even while the pod is still desired (Go's possiblyRunningPods)
            possibly_running = {uid for uid, work in known.items() if work is not WorkType.TERMINATED}
            possibly_running |= {uid for uid in desired if uid not in known} | {p.uid for p in running}
            await self._container_manager.cleanup_orphaned_pod_cgroups(
                possibly_running, lambda uid: bool(self._volume_manager.mounted_volumes(uid))
            )

    # -- PodSyncer: what a pod worker runs ----------------------------------------------------------

    def generate_status(self, pod: Pod, runtime_status: PodStatus, *, terminal: bool = False) -> ApiPodStatus:
        old = self._status_manager.get(pod.uid) or pod.status
        readiness, started = self._probe_manager.probe_status(pod, runtime_status)
        am = self._allocation_manager
        return generate_api_pod_status(
            am.update_pod_from_allocation(pod)[0] if am is not None else pod,  # Go: the allocated pod
            runtime_status,
            old_status=old,
            clock=self.clock,
            node_ips=self.config.node_ips,
            reasons=self._kube_runtime.reasons(pod.uid),
            readiness=readiness,
            started=started,
            pod_is_terminal=terminal,
            resize_conditions=am.resize_conditions(pod.uid) if am is not None else None,
        )

    async def sync_pod(self, update_type: UpdateType, pod: Pod, status: PodStatus) -> bool:
        """Move one pod towards its spec (Go: ``SyncPod``); its pod worker calls it with the pod's latest
        runtime status, again after each event or resync, so each step is idempotent. Tearing down is
        :meth:`sync_terminating_pod` and :meth:`sync_terminated_pod`.

        The workflow is:

        1. Generate the pod's API status from the runtime status (``activeDeadlineSeconds`` included);
           a deadline that has just passed records a DeadlineExceeded event.
        2. Give the status to the status manager. A terminal phase (all containers exited under
           restartPolicy Never/OnFailure, or the deadline) ends here: True tells the worker to terminate.
        3. With pod cgroups (``cgroupsPerQOS``): make the pod's cgroup unless it exists, first killing
           the pod when it runs without one (not brought back under restartPolicy Never); a cgroup that
           cannot be made is a FailedCreatePodContainer event and a sync error.
           API mode: fetch the ConfigMaps and Secrets the pod references into the object store, for at
           most ``OBJECT_PREFETCH_TIMEOUT`` (after that the sync goes on with what is cached).
        4. Make the pod's data directories, once per pod (a failure is a Failed event and a sync error).
        5. Mount its volumes (FailedMount events come from the volume manager).
        6. Collect the Secrets of ``imagePullSecrets`` (missing ones: one Warning event naming them).
        7. Start the pod's probe workers (a newer pod object replaces the running workers' copy).
        8. A host-network pod without IPs from the runtime gets the node's.
        9. Run the runtime manager's sync: sandbox, init containers, containers, restarts, backoff.
        10. When the runtime changed, inspect the pod at once and report the new status; else tell the
            worker that this sync changed nothing.
        11. Raise :class:`SyncError` for failed steps (with the earliest backoff expiry, so the worker
            retries then); return False: the pod is not terminal.
        """
        previous = self._status_manager.get(pod.uid)
        am = self._allocation_manager
        if am is not None:  # the pod runs with its allocated resources (in-place resize)
            pod = am.update_pod_from_allocation(pod)[0]
            in_progress = self._kube_runtime.is_pod_resize_in_progress(pod, status)
            allocation.track_resize_in_progress(am, pod, in_progress)
        api_status = self.generate_status(pod, status)  # applies activeDeadlineSeconds too
        deadline_passed = api_status.reason == DEADLINE_EXCEEDED_REASON
        if deadline_passed and (previous is None or previous.reason != DEADLINE_EXCEEDED_REASON):
            # Go's active deadline handler records it when it fails the pod
            self.record_event(pod, "Normal", DEADLINE_EXCEEDED_REASON, api_status.message or "")
        self._status_manager.set_pod_status(pod, api_status)
        if api_status.phase in TERMINAL_PHASES:
            return True
        if self._container_manager is not None:
            await self._ensure_pod_cgroup(pod, status, api_status)
        if self._object_prefetch is not None:  # Go: register secrets and configmaps
            with trio.move_on_after(OBJECT_PREFETCH_TIMEOUT) as scope:
                await self._object_prefetch(pod)
            if scope.cancelled_caught:  # go on with what is cached; the next sync asks again
                logger.warning(
                    "fetching configmaps and secrets timed out", extra=kv(pod=kobj(pod), uid=pod.uid)
                )
        if pod.uid not in self._data_dirs_made:
            try:  # Go: makePodDataDirs, 0750, so no other local user reaches the pod's files
                await self.run_sync(make_pod_data_dirs, self.config.root_dir, pod.uid)
            except OSError as err:
                message = f"error making pod data directories: {err}"
                self.record_event(pod, "Warning", "Failed", message)
                raise SyncError(message) from err
            self._data_dirs_made.add(pod.uid)
        try:  # Go: WaitForAttachAndMount; FailedMount events come from the volume manager
            await self._volume_manager.mount_pod(pod)
        except MountError as err:
            raise SyncError(f"Unable to attach or mount volumes: {err}") from err
        pull_secrets = self._pull_secrets(pod)
        self._probe_manager.add_pod(pod)
        if pod.spec is not None and pod.spec.host_network and not status.ips:
            # Go: a host-network pod's IPs are the node's (its env and /etc/hosts use them).
            status = attrs.evolve(status, ips=tuple(ip.ip or "" for ip in api_status.pod_ips or ()))
        result = await self._kube_runtime.sync_pod(pod, status, pull_secrets)
        for step in result.failed:
            if am is not None and step.action == ACTION_RESIZE_POD_IN_PLACE:
                allocation.record_resize_error(am, pod, step.message)
        if result.steps:  # the runtime changed: report it now rather than after the next relist
            fresh = await self._refresh_cache(pod)
            if fresh is not None:
                if am is not None:  # Go: a resize re-inspects the pod, which ends PodResizeInProgress
                    in_progress = self._kube_runtime.is_pod_resize_in_progress(pod, fresh)
                    allocation.track_resize_in_progress(am, pod, in_progress)
                self._status_manager.set_pod_status(pod, self.generate_status(pod, fresh))
        else:
            self._pod_workers.untouched(pod.uid)
        if not result.ok:
            summary = "; ".join(
                f"{s.action} {s.target}: {s.error} {s.message}".strip() for s in result.failed
            )
            raise SyncError(summary, retry_at=result.earliest_backoff())
        return False

    async def _ensure_pod_cgroup(self, pod: Pod, status: PodStatus, api_status: ApiPodStatus) -> None:
        """Make the pod's cgroup before its sandbox (Go: SyncPod's "Create Cgroups for the pod"). A pod
        with running containers but no cgroup (started by a kubelet without cgroups) is killed first, to
        come back under it; one with restartPolicy Never is not brought back."""
        cm = self._container_manager
        assert cm is not None
        if self._pod_workers.is_termination_requested(pod.uid) or await cm.pods.exists(pod):
            return
        running = any(s.state and s.state.running for s in api_status.container_statuses or ())
        killed = False
        if running:
            logger.info("killing a pod running outside its cgroup", extra=kv(pod=kobj(pod), uid=pod.uid))
            runtime_pod = running_pod_from_status(status, self._kube_runtime.runtime_type)
            result = await self._kube_runtime.kill_pod(pod, runtime_pod)
            if result.ok:
                killed = True
            else:
                logger.error("KillPod failed", extra=kv(pod=kobj(pod), uid=pod.uid))
        if killed and pod.spec is not None and pod.spec.restart_policy == "Never":
            return
        try:
            await cm.ensure_pod_cgroup(pod)
        except CgroupError as err:
            message = f"unable to ensure pod container exists: {err}"
            self.record_event(pod, "Warning", FAILED_TO_CREATE_POD_CONTAINER, message)
            raise SyncError(
                f"failed to ensure that the pod: {pod.uid} cgroups exist and are correctly applied: {err}"
            ) from err

    def _pull_secrets(self, pod: Pod) -> list[Secret]:
        """The Secrets of the pod's ``spec.imagePullSecrets`` (Go: ``getPullSecretsForPod``), in its order,
        from the store volumes use (prefetched at the start of the sync). One that is missing or cannot be
        known is left out: an info line each, and one Warning event naming them all; the pull goes on
        with the others. Entries without a name are skipped. Standalone (no API server, no store) the
        references are ignored: Go 1.33's standalone kubelet has no secret manager to ask, later ones
        refuse static pods that reference secrets."""
        refs = (pod.spec.image_pull_secrets if pod.spec is not None else None) or ()
        if not refs or self._object_store is NO_OBJECTS:
            return []
        found: list[Secret] = []
        failed: list[str] = []
        for ref in refs:
            if not ref.name:  # API validation lets empty names through (Go skips them too)
                continue
            try:
                secret = self._object_store.get_secret(pod.namespace, ref.name)
                error = None if secret is not None else f'secrets "{ref.name}" not found'
            except ObjectUnavailable as err:
                secret, error = None, str(err)
            if secret is None:
                logger.info(
                    "Unable to retrieve pull secret, the image pull may not succeed.",
                    extra=kv(pod=kobj(pod), secret=f"{pod.namespace}/{ref.name}", err=error),
                )
                failed.append(ref.name)
                continue
            found.append(secret)
        if failed:
            self.record_event(
                pod,
                "Warning",
                FAILED_TO_RETRIEVE_IMAGE_PULL_SECRET,
                f"Unable to retrieve some image pull secrets ({', '.join(failed)}); "
                "attempting to pull the image may not succeed.",
            )
        return found

    async def sync_terminating_pod(self, pod: Pod, status: PodStatus, grace_period: int) -> None:
        """Stop every container of a pod whose termination was requested (Go: ``SyncTerminatingPod``):
        deleted, evicted, terminal, or no longer desired. The worker calls it until it returns without an
        error, then :meth:`sync_terminated_pod`.

        The workflow is:

        1. Stop the liveness and startup probes (readiness goes on reporting while containers stop).
        2. Report the current status.
        3. Kill the pod's containers and sandbox through the runtime manager with ``grace_period``
           (preStop hooks included), bounded by the grace period plus ``KILL_DEADLINE_MARGIN``; a kill
           that does not finish or fails raises :class:`SyncError`, and the worker retries.
        4. Inspect the pod into the pod cache and tell the worker when, so the terminated step need not
           wait for a relist; a container still running raises :class:`SyncError`.
        5. Remove the pod from the probe manager.
        6. Report the final status, generated as terminal.
        """
        self._probe_manager.stop_liveness_and_startup(pod)
        self._status_manager.set_pod_status(pod, self.generate_status(pod, status))
        logger.info("killing pod", extra=kv(pod=kobj(pod), uid=pod.uid, grace_period=grace_period))
        with trio.move_on_after(max(grace_period, 2) + KILL_DEADLINE_MARGIN) as scope:
            result = await self._kube_runtime.kill_pod(
                pod, running_pod_from_status(status, self._kube_runtime.runtime_type), grace_period
            )
        if scope.cancelled_caught:
            raise SyncError(f"killing the pod did not finish within {grace_period}s + margin")
        if not result.ok:
            raise SyncError("; ".join(f"{s.action} {s.target}: {s.error}" for s in result.failed))
        inspected_at = trio.current_time()
        fresh = await self._refresh_cache(pod)
        if fresh is None:
            raise SyncError("cannot inspect the pod after killing it")
        # The terminated cleanup follows at once and may read this inspection: no relist to wait for.
        self._pod_workers.refreshed(pod.uid, inspected_at)
        if fresh.running_containers:
            raise SyncError("detected running containers after a successful kill")
        self._probe_manager.remove_pod(pod)
        final = self.generate_status(pod, fresh, terminal=True)
        self._status_manager.set_pod_status(pod, final)

    async def _refresh_cache(self, pod: Pod) -> PodStatus | None:
        """Inspect the pod right after this kubelet acted on it and write the pod cache (the relist
        stays the source of truth: it corrects the entry and sends the lifecycle events). None when
        the runtime cannot be asked."""
        timestamp = trio.current_time()
        try:
            fresh = await self._kube_runtime.get_pod_status(pod.uid, pod.name, pod.namespace)
        except Exception as err:
            logger.warning("inspecting the pod after a sync failed", extra=kv(pod=kobj(pod), err=err))
            return None
        self._cache.set(pod.uid, fresh, None, timestamp)
        return fresh

    async def sync_terminating_runtime_pod(self, running_pod: RuntimePod) -> None:
        """Kill an orphan known only from the runtime (no pod spec) with ``ORPHAN_GRACE_PERIOD``
        (Go: ``SyncTerminatingRuntimePod``); a failed kill raises :class:`SyncError`."""
        result = await self._kube_runtime.kill_pod(None, running_pod, ORPHAN_GRACE_PERIOD)
        if not result.ok:
            raise SyncError("; ".join(f"{s.action} {s.target}: {s.error}" for s in result.failed))

    async def sync_terminated_pod(self, pod: Pod, status: PodStatus) -> None:
        """Release what a pod held once none of its containers runs (Go: ``SyncTerminatedPod``); the
        worker calls it until it returns without an error, and then the pod is finished.

        The workflow is:

        1. Forget that the pod's data directories were made (a restart of the same UID makes them again).
        2. Unmount and remove its volumes (a failure raises :class:`SyncError`; the worker retries).
        3. Report its final status, generated as terminal.
        4. Tell the status manager the pod is terminated (Go: ``TerminatePod``): containers never seen to
           end are reported as gone, and the phase becomes terminal.
        5. A deleted or evicted pod's dead containers are removed, in the background.
        """
        self._data_dirs_made.discard(pod.uid)  # a restart of the same UID makes them again
        try:  # Go: WaitForUnmount
            await self._volume_manager.unmount_pod(pod.uid)
        except MountError as err:
            raise SyncError(f"Unable to tear down volumes: {err}") from err
        final = self.generate_status(pod, status, terminal=True)
        self._status_manager.set_pod_status(pod, final)
        self._status_manager.terminate_pod(pod)
        if self._pod_workers.should_pod_content_be_removed(pod.uid):
            self._start_dead_container_removal(pod.uid)
