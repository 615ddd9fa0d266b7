"""Mirror pods: the API server's read-only view of static pods (``pkg/kubelet/pod/mirror_client.go``,
``kubelet.go`` ``tryReconcileMirrorPods``, ``HandlePodCleanups``).

Every static pod (from a manifest file or URL) gets a pod object in the API with the same name and
namespace, annotation ``kubernetes.io/config.mirror = <config.hash>`` and an ownerReference to the Node.
A mirror pod that is being deleted or whose hash no longer matches (the manifest changed) is deleted
(grace 0, UID precondition) and created again; a mirror pod whose static pod is gone is deleted once
every pod source has reported. Nothing is created while the Node object is missing. The reconcile runs
every ``period`` (2 s, the housekeeping period) and whenever the API's mirror pods change.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import attrs
import trio
import trio_util

from kubelet_trio.api import Pod
from kubelet_trio.client import AlreadyExists, ApiClient, ApiClientError, NotFound
from kubelet_trio.config.types import CONFIG_HASH_ANNOTATION, CONFIG_MIRROR_ANNOTATION
from kubelet_trio.logs import kobj, kv

__all__ = ["MirrorPodManager", "mirror_pod_for"]

logger = logging.getLogger(__name__)

RECONCILE_PERIOD = 2.0


class PodHost(Protocol):
    @property
    def sources_ready(self) -> bool: ...

    def static_pods(self) -> list[Pod]: ...

    def is_termination_requested(self, uid: str) -> bool: ...


def mirror_pod_for(pod: Pod, node_name: str, node_uid: str) -> dict[str, Any]:
    """The API object mirroring ``pod`` (``CreateMirrorPod``)."""
    body = pod.to_dict()
    body.pop("status", None)
    meta = body.setdefault("metadata", {})
    for field in ("uid", "resourceVersion", "creationTimestamp", "selfLink", "generation"):
        meta.pop(field, None)
    annotations = dict(meta.get("annotations") or {})
    annotations[CONFIG_MIRROR_ANNOTATION] = annotations.get(CONFIG_HASH_ANNOTATION, pod.uid)
    meta["annotations"] = annotations
    meta["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid, "controller": True}
    ]
    body["apiVersion"], body["kind"] = "v1", "Pod"
    return body


def _is_current(mirror: Pod, pod: Pod) -> bool:
    meta = mirror.metadata
    if meta is None or meta.deletion_timestamp:
        return False
    return mirror.annotations.get(CONFIG_MIRROR_ANNOTATION) == pod.annotations.get(CONFIG_HASH_ANNOTATION)


@attrs.define(eq=False)
class MirrorPodManager:
    client: ApiClient
    node_name: str
    host: PodHost
    mirror_pods: trio_util.AsyncValue[dict[str, Pod]]  # full name -> mirror pod, from the API source
    node_uid: Callable[[], str | None]
    period: float = RECONCILE_PERIOD
    created: int = 0
    deleted: int = 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            with trio.move_on_after(self.period):
                await self.mirror_pods.wait_transition()
            await self.reconcile()

    async def reconcile(self) -> None:
        node_uid = self.node_uid()
        mirrors: Mapping[str, Pod] = self.mirror_pods.value
        static = {p.full_name: p for p in self.host.static_pods()}
        for full_name, pod in static.items():
            mirror = mirrors.get(full_name)
            try:
                if mirror is not None and not _is_current(mirror, pod):
                    await self._delete(mirror, "stale")
                    mirror = None
                if mirror is None and node_uid and not self.host.is_termination_requested(pod.uid):
                    await self._create(pod, node_uid)
            except ApiClientError as err:
                logger.warning("mirror pod reconcile failed", extra=kv(pod=kobj(pod), error=err))
        if not self.host.sources_ready:
            return  # a static pod may still arrive: no orphan deletion yet
        for full_name, mirror in mirrors.items():
            if full_name not in static and not (mirror.metadata and mirror.metadata.deletion_timestamp):
                try:
                    await self._delete(mirror, "orphaned")
                except ApiClientError as err:
                    logger.warning("deleting orphaned mirror pod failed", extra=kv(pod=full_name, error=err))

    async def _create(self, pod: Pod, node_uid: str) -> None:
        try:
            await self.client.create(
                f"/api/v1/namespaces/{pod.namespace}/pods", mirror_pod_for(pod, self.node_name, node_uid)
            )
            self.created += 1
            logger.info("created mirror pod", extra=kv(pod=kobj(pod), uid=pod.uid))
        except AlreadyExists:
            pass  # the watch will show it (and the next round judges whether it is current)

    async def _delete(self, mirror: Pod, why: str) -> None:
        try:
            await self.client.delete(
                f"/api/v1/namespaces/{mirror.namespace}/pods/{mirror.name}",
                grace_period_seconds=0,
                uid=mirror.uid,
            )
            self.deleted += 1
            logger.info("deleted mirror pod", extra=kv(reason=why, pod=kobj(mirror), uid=mirror.uid))
        except NotFound:
            pass
