"""Publishing pod statuses to the API server (``status_manager.go``: ``syncBatch``, ``syncPod``,
``mergePodStatus``, ``canBeDeleted``).

The in-process :class:`~kubelet_trio.status.manager.StatusManager` holds a versioned status per pod. This
publisher sends a pod's status when its version is newer than the last one sent, and every
``sync_period`` (10 s) it also re-sends any status the API copy has drifted from ("the kubelet is the
source of truth"). Each send re-reads the pod, merges (conditions other agents own are kept; a terminal
phase is held back while containers may still run; a pod never leaves a terminal phase) and PATCHes
``pods/<name>/status`` with a JSON merge patch that carries ``metadata.uid`` as a precondition - nothing
is sent when nothing changed. A 409 re-reads and retries with backoff; other failures wait for the
next round. Static pods publish through their mirror pod.

Deletion: once a pod with a ``deletionTimestamp`` has a terminal phase in the API and its worker has
finished (containers stopped, cleanup done), the kubelet deletes the object for good: DELETE with
``gracePeriodSeconds=0`` and a UID precondition. Pods without a ``deletionTimestamp`` are never deleted.
"""

from __future__ import annotations

import functools
import logging
import operator
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import attrs
import trio
import trio_util

from kubelet_trio.api import Pod, PodCondition, PodStatus
from kubelet_trio.api.pod import TERMINAL_PHASES
from kubelet_trio.client import ApiClient, ApiClientError, Conflict, Invalid, NotFound, merge_patch_diff
from kubelet_trio.config.types import CONFIG_HASH_ANNOTATION, CONFIG_MIRROR_ANNOTATION
from kubelet_trio.logs import kobj, kv
from kubelet_trio.status.conditions import (
    CONTAINERS_READY,
    DISRUPTION_TARGET,
    KUBELET_OWNED_CONDITIONS,
    POD_COMPLETED,
    POD_FAILED,
    READY,
)
from kubelet_trio.status.manager import StatusManager, VersionedStatus

__all__ = ["StatusPublisher", "merge_pod_status"]

logger = logging.getLogger(__name__)

SYNC_PERIOD = 10.0
CONFLICT_RETRIES = 3
CONFLICT_BACKOFF = 0.2
MAX_CONCURRENT_SYNCS = 32  # pods whose status is sent at once
KNOWN_VERSIONS = 4  # per pod, the resourceVersions up to our last read or write that are remembered


class PodLookup(Protocol):
    def get(self, uid: str) -> Pod | None: ...


class WorkerState(Protocol):
    def is_finished(self, uid: str) -> bool: ...

    def could_have_running_containers(self, uid: str) -> bool: ...

    async def wait_finished(self, uid: str) -> None: ...


class PublisherHost(Protocol):
    """What the publisher reads from the kubelet (read-only: plain attributes satisfy it)."""

    @property
    def status_manager(self) -> StatusManager: ...

    @property
    def pod_manager(self) -> PodLookup: ...

    @property
    def pod_workers(self) -> WorkerState: ...


def _terminal(phase: str | None) -> bool:
    return phase in TERMINAL_PHASES


def merge_pod_status(
    api: PodStatus | None, new: PodStatus, *, could_have_running_containers: bool
) -> PodStatus:
    """Go ``mergePodStatus``: what to write over the API's ``api`` status."""
    api = api or PodStatus()
    transitioning = not _terminal(api.phase) and _terminal(new.phase)
    conditions: list[PodCondition] = [
        c for c in api.conditions or () if c.type not in KUBELET_OWNED_CONDITIONS
    ]
    for condition in new.conditions or ():
        if condition.type in KUBELET_OWNED_CONDITIONS:
            conditions.append(condition)
        elif condition.type == DISRUPTION_TARGET and transitioning:
            conditions = [c for c in conditions if c.type != DISRUPTION_TARGET] + [condition]
    merged = attrs.evolve(new, conditions=tuple(conditions) or None)
    if _terminal(api.phase) and not _terminal(merged.phase):
        merged = attrs.evolve(
            merged, phase=api.phase, reason=api.reason, message=api.message
        )  # never leave it
    elif transitioning and could_have_running_containers:
        merged = attrs.evolve(merged, phase=api.phase, reason=api.reason, message=api.message)  # not yet
    if _terminal(merged.phase):
        reason = POD_COMPLETED if merged.phase == "Succeeded" else POD_FAILED
        merged = attrs.evolve(
            merged,
            conditions=tuple(
                attrs.evolve(c, status="False", reason=reason)
                if c.type in (READY, CONTAINERS_READY) and c.status == "True"
                else c
                for c in merged.conditions or ()
            )
            or None,
        )
    return merged


@attrs.define(eq=False)
class StatusPublisher:
    client: ApiClient
    host: PublisherHost
    mirror_pods: Callable[[], Mapping[str, Pod]] = dict  # full name -> mirror pod (from the API source)
    sync_period: float = SYNC_PERIOD
    patches: int = 0
    deletes: int = 0
    _sent: dict[str, int] = attrs.Factory(dict)  # uid -> status version the API has
    # uid -> (the status we merged and wrote, the status the API server held right after): while both are
    # unchanged, nobody changed the pod's status and we want the same, so there is no drift to repair.
    # Without this a field an older API server drops (hostIPs before 1.28) would be re-sent every sweep.
    _written: dict[str, tuple[PodStatus, PodStatus]] = attrs.Factory(dict)
    # uid -> resourceVersions of the pod up to what the API answered our last read or write with (the
    # newest, last; its status is _written's second): while the watch shows one of them, it lags behind
    # what we know
    _versions: dict[str, tuple[str, ...]] = attrs.Factory(dict)
    _kick: trio_util.AsyncValue[int] = attrs.Factory(lambda: trio_util.AsyncValue(0))
    _finish_waits: set[str] = attrs.Factory(set)
    _nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        version = self.host.status_manager.version
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            next_sweep = trio.current_time() + self.sync_period
            seen_version = seen_kick = -1
            while True:
                with trio.move_on_at(next_sweep):
                    await trio_util.wait_any(
                        functools.partial(version.wait_value, functools.partial(operator.ne, seen_version)),
                        functools.partial(self._kick.wait_value, functools.partial(operator.ne, seen_kick)),
                    )
                seen_version, seen_kick = version.value, self._kick.value
                full = trio.current_time() >= next_sweep
                if full:
                    next_sweep = trio.current_time() + self.sync_period
                await self.sync_batch(full=full)

    def kick(self) -> None:
        self._kick.value += 1

    async def sync_batch(self, *, full: bool) -> None:
        """Send every status that changed (and, on a full round, every one that drifted): the pods
        concurrently, at most :data:`MAX_CONCURRENT_SYNCS` at once, so one round costs about one
        round trip rather than one per pod; the client's rate limiter still bounds the request rate."""
        entries = self.host.status_manager.all()
        known = {entry.pod.uid for entry in entries}
        for uid in [u for u in self._sent if u not in known]:
            del self._sent[uid]
            self._written.pop(uid, None)
            self._versions.pop(uid, None)
        limiter = trio.CapacityLimiter(MAX_CONCURRENT_SYNCS)

        async def sync_one(entry: VersionedStatus, api_pod: Pod) -> None:
            async with limiter:
                await self._sync_pod(entry, api_pod)

        async with trio.open_nursery() as nursery:
            for entry in entries:
                uid = entry.pod.uid
                api_pod = self._api_pod(entry.pod)
                if api_pod is None:
                    continue
                pending_delete = self._deletion_pending(entry.pod, api_pod)
                stale = self._sent.get(uid, 0) < entry.version
                if not (stale or pending_delete or (full and self._needs_reconcile(entry, api_pod))):
                    continue
                nursery.start_soon(sync_one, entry, api_pod)

    def _api_pod(self, pod: Pod) -> Pod | None:
        """The API object the status goes to: the pod itself, or a static pod's current mirror pod."""
        if not pod.is_static:
            return self.host.pod_manager.get(pod.uid)
        mirror = self.mirror_pods().get(pod.full_name)
        if mirror is None or mirror.annotations.get(CONFIG_MIRROR_ANNOTATION) != pod.annotations.get(
            CONFIG_HASH_ANNOTATION
        ):
            return None
        return mirror

    def _deletion_pending(self, pod: Pod, api_pod: Pod) -> bool:
        if pod.is_static or not (api_pod.metadata and api_pod.metadata.deletion_timestamp):
            return False
        workers = self.host.pod_workers
        if workers.is_finished(pod.uid):
            return True
        if pod.uid not in self._finish_waits and self._nursery is not None:
            self._finish_waits.add(pod.uid)
            self._nursery.start_soon(self._wake_when_finished, pod.uid)
        return False

    async def _wake_when_finished(self, uid: str) -> None:
        try:
            await self.host.pod_workers.wait_finished(uid)
        except KeyError:
            return
        finally:
            self._finish_waits.discard(uid)
        self.kick()

    def _needs_reconcile(self, entry: VersionedStatus, api_pod: Pod) -> bool:
        merged = merge_pod_status(
            api_pod.status,
            entry.status,
            could_have_running_containers=self.host.pod_workers.could_have_running_containers(entry.pod.uid),
        )
        if self._written.get(entry.pod.uid) == (merged, api_pod.status):
            return False
        return bool(merge_patch_diff((api_pod.status or PodStatus()).to_dict(), merged.to_dict()) != {})

    def _known_base(self, uid: str, api_pod: Pod) -> tuple[str, dict[str, Any], PodStatus] | None:
        """The resourceVersion and status to write against without a GET: what the API answered our last
        read or write with while the watch shows that or an older answer of ours (it lags behind our
        writes), else the watched copy (someone else wrote since). The patch carries the resourceVersion
        as a precondition, so a stale guess costs a 409 and a re-read, never a lost update."""
        meta = api_pod.metadata
        if meta is None or meta.deletion_timestamp is not None or not meta.resource_version:
            return None  # deleting: the deletion path reads the object itself
        answered, written = self._versions.get(uid, ()), self._written.get(uid)
        # the status as a model too: it is at hand, and decoding its dict again was most of a write's cost
        if written is not None and meta.resource_version in answered:
            return answered[-1], written[1].to_dict(), written[1]
        status = api_pod.status or PodStatus()
        return meta.resource_version, status.to_dict(), status

    async def _sync_pod(self, entry: VersionedStatus, api_pod: Pod) -> None:
        pod = entry.pod
        target_uid = api_pod.uid
        path = f"/api/v1/namespaces/{api_pod.namespace}/pods/{api_pod.name}"
        known = self._known_base(pod.uid, api_pod)
        attempt = 0
        while attempt < CONFLICT_RETRIES:
            try:
                current: dict[str, Any] | None = None
                if known is not None:
                    rv, api_status_dict, api_status = known
                else:
                    current = await self.client.get(path)
                    current_meta = current.get("metadata") or {}
                    if current_meta.get("uid") != target_uid:
                        logger.info(
                            "pod was recreated, dropping its status", extra=kv(pod=kobj(pod), uid=target_uid)
                        )
                        self._sent[pod.uid] = entry.version
                        return
                    rv, api_status_dict = current_meta.get("resourceVersion", ""), current.get("status") or {}
                    api_status = PodStatus.from_dict(api_status_dict)
                merged = merge_pod_status(
                    api_status,
                    entry.status,
                    could_have_running_containers=self.host.pod_workers.could_have_running_containers(
                        pod.uid
                    ),
                )
                patch = merge_patch_diff(api_status_dict, merged.to_dict())
                if patch:
                    precondition = {"uid": target_uid} | ({"resourceVersion": rv} if known else {})
                    current = await self.client.merge_patch(
                        f"{path}/status", {"metadata": precondition, "status": patch}
                    )
                    self.patches += 1
                    logger.debug(
                        "patched pod status", extra=kv(pod=kobj(pod), uid=target_uid, phase=merged.phase)
                    )
                self._sent[pod.uid] = entry.version
                if current is None:
                    return  # nothing to write over what we knew
                self._written[pod.uid] = (merged, PodStatus.from_dict(current.get("status") or {}))
                answered = (current.get("metadata") or {}).get("resourceVersion")
                if answered:
                    # the version we wrote over is as old as the answer or older: if the watch still
                    # shows it, it lags behind us too
                    seen = [v for v in (*self._versions.get(pod.uid, ()), rv, answered) if v]
                    latest_last = reversed(dict.fromkeys(reversed(seen)))  # each once, at its last place
                    self._versions[pod.uid] = tuple(latest_last)[-KNOWN_VERSIONS:]
                await self._maybe_delete(pod, current)
                return
            except NotFound:
                self._sent[pod.uid] = entry.version  # gone from the API: nothing to publish to
                return
            except (Conflict, Invalid) as err:
                if known is not None:
                    known = None  # what we knew was stale: read the object, at once
                    continue
                logger.info(
                    "status patch rejected, re-reading",
                    extra=kv(pod=kobj(pod), attempt=attempt + 1, error=err),
                )
                await trio.sleep(CONFLICT_BACKOFF * 2**attempt)
                attempt += 1
            except ApiClientError as err:
                logger.warning("failed to update pod status", extra=kv(pod=kobj(pod), error=err))
                return

    async def _maybe_delete(self, pod: Pod, current: dict[str, Any]) -> None:
        """``canBeDeleted``: deleting, not a mirror, terminal in the API, and the worker has finished."""
        meta = current.get("metadata") or {}
        if pod.is_static or not meta.get("deletionTimestamp"):
            return
        if CONFIG_MIRROR_ANNOTATION in (meta.get("annotations") or {}):
            return
        if not _terminal((current.get("status") or {}).get("phase")):
            return
        if not self.host.pod_workers.is_finished(pod.uid):
            return
        path = f"/api/v1/namespaces/{meta.get('namespace')}/pods/{meta.get('name')}"
        try:
            await self.client.delete(path, grace_period_seconds=0, uid=meta.get("uid"))
            self.deletes += 1
            logger.info("pod fully terminated and removed from the API", extra=kv(pod=kobj(pod), uid=pod.uid))
        except NotFound:
            pass
        except ApiClientError as err:
            logger.warning("failed to delete pod", extra=kv(pod=kobj(pod), error=err))
