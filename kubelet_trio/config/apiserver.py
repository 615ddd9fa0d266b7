"""The API-server pod source: a reflector over this node's pods (``pkg/kubelet/config/apiserver.go``,
client-go ``tools/cache/reflector.go``).

It lists ``/api/v1/pods?fieldSelector=spec.nodeName=<node>`` (in pages), then watches from the list's
resourceVersion with bookmarks and a randomised ``timeoutSeconds`` (5-10 min, like client-go), re-watching
from the last seen resourceVersion whenever a stream ends. An expired resourceVersion (410 Gone, at the
start of a watch or as an ERROR event) means the history is lost: it relists, and the new full set
goes to PodConfig, whose merge turns it into exactly the difference. Other failures back off (0.8 s
doubling to 30 s, jittered) and re-watch from the same resourceVersion, so nothing is lost or repeated.

Like every source it sends full sets (:class:`SourceSet` ``"api"``) after each batch of changes. Mirror
pods (annotation ``kubernetes.io/config.mirror``) are not pods to run: they are kept apart in
:attr:`ApiserverSource.mirror_pods` for the mirror-pod manager and the status publisher.

The server's objects are outside input: a pod our model cannot read is that pod's problem (logged, counted
at the ``apiwatch`` boundary, skipped; the other pods go on), and a list or watch that fails any other way
is contained by the reflector loop, which relists (:mod:`kubelet_trio.client.reflector`).
"""

from __future__ import annotations

import logging
import random
from typing import Any

import attrs
import trio
import trio_util

from kubelet_trio.api import DecodeError, Pod
from kubelet_trio.boundary import BoundaryErrors, contain
from kubelet_trio.client import ApiClient, WatchEvent
from kubelet_trio.client.reflector import (
    LIST_PAGE_SIZE,
    MIN_WATCH_TIMEOUT,
    list_all,
    list_and_watch,
    raise_watch_error,
)
from kubelet_trio.config.types import API_SOURCE, SourceSet
from kubelet_trio.logs import kref, kv

__all__ = ["ApiserverSource"]

logger = logging.getLogger(__name__)

PODS_PATH = "/api/v1/pods"


def _key(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict):
        return "/"
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _without_managed_fields(obj: Any) -> Any:
    """The pod without ``metadata.managedFields`` (client-go's ``TransformStripManagedFields``): the
    server's field-ownership records, which no part of a kubelet reads, are most of a pod's metadata and
    took half the time of decoding each watched pod, and their memory for as long as it is kept."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


@attrs.define(eq=False)
class ApiserverSource:
    """Feeds PodConfig the pods bound to ``node_name``. Start with ``nursery.start(source.run)``; it
    reports started at once (an unreachable API server must not hold the node back) and
    :attr:`synced` becomes True after the first complete list."""

    client: ApiClient
    node_name: str
    updates: trio.MemorySendChannel[SourceSet]
    rng: random.Random = attrs.Factory(random.Random)
    min_watch_timeout: float = MIN_WATCH_TIMEOUT
    synced: trio_util.AsyncBool = attrs.Factory(lambda: trio_util.AsyncBool(False))
    #: Mirror pods by full name (``name_namespace``), replaced on every change.
    mirror_pods: trio_util.AsyncValue[dict[str, Pod]] = attrs.Factory(lambda: trio_util.AsyncValue({}))
    resource_version: str = ""
    lists: int = 0  # completed lists (relists after the first), for observability and tests
    #: Where pods that do not decode and contained list/watch failures are counted (None: only logged).
    boundary_errors: BoundaryErrors | None = None
    _store: dict[str, Pod] = attrs.Factory(dict)
    # the store split as it is published, kept up to date per event: a set is published after every
    # watch batch, and re-splitting the whole node's pods each time cost more than the events did
    _regular: dict[str, Pod] = attrs.Factory(dict)
    _mirrors: dict[str, Pod] = attrs.Factory(dict)  # by store key
    # the JSON spec each stored pod was decoded from, by store key: most watch events change only the
    # status, and comparing the spec's JSON costs a fraction of decoding it again (see _decode)
    _raw_specs: dict[str, Any] = attrs.Factory(dict)

    @property
    def field_selector(self) -> str:
        return f"spec.nodeName={self.node_name}"

    def pods(self) -> list[Pod]:
        """Every pod of the node as last seen, mirror pods included."""
        return list(self._store.values())

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with self.updates:
            task_status.started()
            await list_and_watch(
                self.client,
                PODS_PATH,
                f"pods of node {self.node_name}",
                relist=self._list,
                watch_params=lambda: {
                    "fieldSelector": self.field_selector,
                    "resourceVersion": self.resource_version,
                },
                consume=self._consume,
                rng=self.rng,
                min_watch_timeout=self.min_watch_timeout,
                boundary_errors=self.boundary_errors,
            )

    async def _list(self) -> None:
        items, resource_version = await list_all(
            self.client, PODS_PATH, {"fieldSelector": self.field_selector}, LIST_PAGE_SIZE
        )
        store: dict[str, Pod] = {}
        raw_specs: dict[str, Any] = {}
        for item in items:
            key = _key(item)
            pod = self._decode(item, self._store.get(key), self._raw_specs.get(key))
            if pod is not None:
                store[key] = pod
                raw_specs[key] = item.get("spec")
        self._store, self._raw_specs = store, raw_specs
        self._regular = {key: pod for key, pod in store.items() if not pod.is_mirror}
        self._mirrors = {key: pod for key, pod in store.items() if pod.is_mirror}
        self.resource_version = resource_version
        self.lists += 1
        logger.info(
            "listed pods",
            extra=kv(node=self.node_name, count=len(store), resourceVersion=self.resource_version),
        )
        await self._publish()
        self.synced.value = True

    def _decode(self, obj: Any, previous: Pod | None = None, previous_spec: Any = None) -> Pod | None:
        """The pod, or None for an object the model cannot read (that pod's alone: logged once, counted).
        When its JSON spec is the one ``previous`` was decoded from, ``previous``'s spec object is reused
        (equal to a new decode): cheaper, and the same object lets later comparisons stop at identity."""
        pod = kref(*_key(obj).split("/", 1))
        try:
            data = _without_managed_fields(obj)
            spec = data.get("spec")
            if previous is not None and isinstance(spec, dict) and spec == previous_spec:
                rest = Pod.from_dict({k: v for k, v in data.items() if k != "spec"})
                return attrs.evolve(rest, spec=previous.spec)
            return Pod.from_dict(data)
        except DecodeError as err:
            logger.error("ignoring undecodable pod", extra=kv(pod=pod, error=err))
            if self.boundary_errors is not None:
                self.boundary_errors.record("apiwatch")
        except Exception:  # a corner of the model only this object reaches
            with contain("apiwatch", self.boundary_errors, pod=pod):
                raise
        return None

    async def _publish(self) -> None:
        mirrors = {pod.full_name: pod for pod in self._mirrors.values()}
        if mirrors != self.mirror_pods.value:
            self.mirror_pods.value = mirrors
        await self.updates.send(SourceSet(API_SOURCE, tuple(self._regular.values())))

    async def _consume(self, events: trio.MemoryReceiveChannel[WatchEvent]) -> None:
        """Apply events; after each batch that is ready at once, publish the new set."""
        async for event in events:
            changed = self._apply(event)
            while True:
                try:
                    event = events.receive_nowait()
                except trio.WouldBlock:
                    break
                except trio.EndOfChannel:
                    if changed:
                        await self._publish()
                    return
                changed = self._apply(event) or changed
            if changed:
                await self._publish()

    def _apply(self, event: WatchEvent) -> bool:
        if event.type == "ERROR":
            raise_watch_error(event)
        rv = event.resource_version
        if rv:
            self.resource_version = rv
        if event.type == "BOOKMARK":
            return False
        key = _key(event.object)
        if event.type == "DELETED":
            self._regular.pop(key, None)
            self._mirrors.pop(key, None)
            self._raw_specs.pop(key, None)
            return self._store.pop(key, None) is not None
        if event.type in ("ADDED", "MODIFIED"):
            pod = self._decode(event.object, self._store.get(key), self._raw_specs.get(key))
            if pod is None:
                return False
            self._store[key] = pod
            self._raw_specs[key] = event.object.get("spec")
            if pod.is_mirror:  # a pod may become a mirror pod or stop being one: it moves
                self._regular.pop(key, None)
                self._mirrors[key] = pod
            else:
                self._mirrors.pop(key, None)
                self._regular[key] = pod
            return True
        logger.warning("ignoring unknown watch event", extra=kv(type=event.type))
        return False
