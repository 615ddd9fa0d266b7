"""Recording core/v1 Events (client-go ``tools/record``: recorder, ``EventCorrelator``, sink).

``record(pod, type, reason, message)`` is the kubelet's event callback (Pulling, Pulled, Created,
Started, Killing, BackOff, Failed, Unhealthy, ...). It never blocks and never fails: events go on a
bounded channel and are dropped when it is full, because losing an event must never hold a pod back.
A background task correlates and posts them:

- a repeat of the same event (same object, type, reason and message) PATCHes the existing Event's
  ``count`` and ``lastTimestamp`` instead of creating a new one (LRU of 4096 keys);
- more than 10 events within 10 minutes that differ only in their message are aggregated into one
  Event whose message starts with ``(combined from similar events):``;
- each object may emit 25 events at once and then one per 5 minutes (a token bucket per object);
- each of these three keeps at most 4096 keys, least recently used dropped first, as client-go's LRU
  caches do; and a pod's keys go once the kubelet has forgotten the pod (:meth:`EventRecorder.forget_pods`,
  from housekeeping): full caches of pods long gone would cost a churning node megabytes for nothing;
- posting retries a few times with backoff, then gives up on that event.
"""

from __future__ import annotations

import collections
import logging
import random
from collections.abc import Collection
from typing import Any, TypeVar

import attrs
import trio

from kubelet_trio.api import Pod, rfc3339
from kubelet_trio.client import ApiClient, ApiClientError, NotFound, TokenBucket
from kubelet_trio.clock import WallClock
from kubelet_trio.logs import kv

__all__ = ["EventRecorder"]

logger = logging.getLogger(__name__)

QUEUE_SIZE = 1000  # the broadcaster's incoming queue; full means drop
MAX_LRU_ENTRIES = 4096
FORGET_PERIOD = 60.0  # seconds between sweeps of the caches for pods the kubelet has forgotten
AGGREGATE_MAX_EVENTS = 10
AGGREGATE_INTERVAL = 600.0
SPAM_BURST = 25
SPAM_QPS = 1.0 / 300.0
POST_ATTEMPTS = 3
POST_BACKOFF = 1.0
COMBINED_PREFIX = "(combined from similar events): "


@attrs.frozen
class _Pending:
    involved: dict[str, Any]
    namespace: str
    type: str
    reason: str
    message: str
    at: str


@attrs.define
class _Seen:
    name: str
    namespace: str
    count: int
    first: str


@attrs.define
class _Similar:
    messages: set[str]
    started: float


V = TypeVar("V")


class _Lru(collections.OrderedDict[tuple[str, ...], V]):
    """At most :data:`MAX_LRU_ENTRIES` keys, the least recently used dropped first (Go: the
    ``lru.Cache`` of each of the correlator's filters): keys name pods, which come and go."""

    def use(self, key: tuple[str, ...]) -> V | None:
        value = self.get(key)
        if value is not None:
            self.move_to_end(key)
        return value

    def put(self, key: tuple[str, ...], value: V) -> V:
        self[key] = value
        self.move_to_end(key)
        while len(self) > MAX_LRU_ENTRIES:
            self.popitem(last=False)
        return value


@attrs.define(eq=False)
class EventRecorder:
    """Start with ``nursery.start(recorder.run)``; hand :meth:`record` to the runtime manager."""

    client: ApiClient
    node_name: str
    clock: WallClock
    component: str = "kubelet"
    rng: random.Random = attrs.Factory(random.Random)
    dropped: int = 0
    posted: int = 0
    _send: trio.MemorySendChannel[_Pending] = attrs.field(init=False)
    _receive: trio.MemoryReceiveChannel[_Pending] = attrs.field(init=False)
    _seen: _Lru[_Seen] = attrs.Factory(_Lru)
    _similar: _Lru[_Similar] = attrs.Factory(_Lru)
    _spam: _Lru[TokenBucket] = attrs.Factory(_Lru)
    _last_stamp: int = 0
    _forgotten_at: float = -float("inf")  # when forget_pods last swept

    def __attrs_post_init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[_Pending](QUEUE_SIZE)

    # -- producers (never block) ----------------------------------------------------------------------

    def record(self, pod: Pod, type_: str, reason: str, message: str) -> None:
        """An event about a pod (``EventSink``)."""
        involved = {
            "kind": "Pod",
            "namespace": pod.namespace,
            "name": pod.name,
            "uid": pod.uid,
            "apiVersion": "v1",
        }
        self._enqueue(involved, pod.namespace or "default", type_, reason, message)

    def record_node(self, type_: str, reason: str, message: str) -> None:
        """An event about this node (the kubelet uses the node name as the reference UID)."""
        involved = {"kind": "Node", "name": self.node_name, "uid": self.node_name, "apiVersion": "v1"}
        self._enqueue(involved, "default", type_, reason, message)

    def _enqueue(
        self, involved: dict[str, Any], namespace: str, type_: str, reason: str, message: str
    ) -> None:
        pending = _Pending(involved, namespace, type_, reason, message, rfc3339(self.clock.now()))
        try:
            self._send.send_nowait(pending)
        except trio.WouldBlock:
            self.dropped += 1
            logger.debug(
                "event queue full, dropping event", extra=kv(reason=reason, object=involved.get("name"))
            )

    def forget_pods(self, keep: Collection[str]) -> None:
        """Drop what the correlator holds about pods whose UID is not in ``keep`` (the pods the kubelet still
        knows). At most once per :data:`FORGET_PERIOD`: a sweep reads every key."""
        now = trio.current_time()
        if now - self._forgotten_at < FORGET_PERIOD:
            return
        self._forgotten_at = now
        for cache in (self._seen, self._similar, self._spam):
            for key in [k for k in cache if k[2] == "Pod" and k[5] not in keep]:
                del cache[key]

    # -- the sink -------------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        async for pending in self._receive:
            try:
                await self._handle(pending)
            except ApiClientError as err:
                logger.debug("dropping event after retries", extra=kv(reason=pending.reason, error=err))

    def _object_key(self, pending: _Pending) -> tuple[str, ...]:
        i = pending.involved
        return (
            self.component,
            self.node_name,
            i["kind"],
            i.get("namespace", ""),
            i["name"],
            i.get("uid", ""),
        )

    async def _handle(self, pending: _Pending) -> None:
        object_key = self._object_key(pending)
        bucket = self._spam.use(object_key)
        if bucket is None:
            bucket = self._spam.put(object_key, TokenBucket(SPAM_QPS, SPAM_BURST))
        if not bucket.try_acquire():
            self.dropped += 1
            return
        message = pending.message
        aggregate_key = (*object_key, pending.type, pending.reason)
        now = trio.current_time()
        similar = self._similar.use(aggregate_key)
        if similar is None or now - similar.started > AGGREGATE_INTERVAL:
            similar = self._similar.put(aggregate_key, _Similar(set(), now))
        similar.messages.add(message)
        if len(similar.messages) >= AGGREGATE_MAX_EVENTS:
            message = COMBINED_PREFIX + message
            key = aggregate_key  # every further similar event counts into one Event
        else:
            key = (*aggregate_key, message)
        seen = self._seen.use(key)
        if seen is not None:
            seen.count += 1
            patch = {"count": seen.count, "lastTimestamp": pending.at, "message": message}
            try:
                await self._retrying(
                    self.client.merge_patch, f"/api/v1/namespaces/{seen.namespace}/events/{seen.name}", patch
                )
                self.posted += 1
                return
            except NotFound:
                del self._seen[key]  # expired on the server: create it anew
        event = self._event(pending, message)
        created = await self._retrying(
            self.client.create, f"/api/v1/namespaces/{pending.namespace}/events", event
        )
        self.posted += 1
        meta = created.get("metadata") or {}
        name = meta.get("name", event["metadata"]["name"])
        self._seen.put(key, _Seen(name, pending.namespace, 1, pending.at))

    def _event(self, pending: _Pending, message: str) -> dict[str, Any]:
        self._last_stamp = max(self.clock.wall_ns(), self._last_stamp + 1)  # unique even at one instant
        name = f"{pending.involved['name']}.{self._last_stamp:x}"
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": pending.namespace},
            "involvedObject": pending.involved,
            "reason": pending.reason,
            "message": message,
            "type": pending.type,
            "source": {"component": self.component, "host": self.node_name},
            "firstTimestamp": pending.at,
            "lastTimestamp": pending.at,
            "count": 1,
            "reportingComponent": self.component,
            "reportingInstance": self.node_name,
        }

    async def _retrying(self, call: Any, path: str, body: dict[str, Any]) -> Any:
        for attempt in range(POST_ATTEMPTS):
            try:
                return await call(path, body)
            except NotFound:
                raise
            except ApiClientError:
                if attempt + 1 == POST_ATTEMPTS:
                    raise
                await trio.sleep(POST_BACKOFF * (1 + self.rng.random()) * 2**attempt)
        raise AssertionError("unreachable")
