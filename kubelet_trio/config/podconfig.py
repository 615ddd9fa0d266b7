"""Merging the sources' pod sets into ADD/UPDATE/DELETE/REMOVE/RECONCILE (``pkg/kubelet/config/config.go``).

Every source sends its complete current set (:class:`SourceSet`, op SET) whenever it changes.
:class:`PodStorage` diffs it against what that source sent before, and :class:`PodConfig` runs the
storage as a component between the sources' channel and the sync loop's channel. A future API-server
source plugs in the same way: ``config.source_channel("api")`` and send SETs.
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
import operator
from collections.abc import Callable, Iterable, Sequence

import attrs
import trio
import trio_util

from kubelet_trio.api import Pod, PodStatus, rfc3339_nano
from kubelet_trio.config.types import (
    CONFIG_FIRST_SEEN_ANNOTATION,
    CONFIG_SOURCE_ANNOTATION,
    LOCAL_ANNOTATIONS,
    PodOperation,
    PodUpdate,
    SourceSet,
)
from kubelet_trio.logs import kobj, kv

__all__ = ["UPDATES_BUFFER", "PodConfig", "PodStorage"]

logger = logging.getLogger(__name__)

#: Buffer of the merged-updates channel (upstream: 50). When it is full PodConfig blocks, which in turn
#: blocks the sources' sends: back-pressure, nothing is dropped. Updates are never coalesced because
#: ADD/REMOVE pairs must reach the sync loop in order.
UPDATES_BUFFER = 50
#: Buffer of the sources -> PodConfig channel. Sends block too; a SET is a full snapshot so a source that
#: waits here only delivers its newest state a little later.
SOURCE_BUFFER = 1


def _utcnow() -> dt.datetime:
    """Wall-clock time, only for the ``config.seen`` timestamp annotation (injectable for tests);
    every period and timeout elsewhere uses Trio's clock."""
    return dt.datetime.now(dt.UTC)


def _with_annotations(pod: Pod, **changes: str) -> Pod:
    meta = pod.metadata
    assert meta is not None
    annotations = dict(meta.annotations or {})
    annotations.update(changes)
    return attrs.evolve(pod, metadata=attrs.evolve(meta, annotations=annotations))


def _non_local(annotations: dict[str, str] | None) -> dict[str, str]:
    return {k: v for k, v in (annotations or {}).items() if k not in LOCAL_ANNOTATIONS}


def _differ_semantically(existing: Pod, ref: Pod) -> bool:
    a, b = existing.metadata, ref.metadata
    assert a is not None and b is not None
    return (
        existing.spec != ref.spec
        or a.labels != b.labels
        or a.deletion_timestamp != b.deletion_timestamp
        or a.deletion_grace_period_seconds != b.deletion_grace_period_seconds
        or _non_local(a.annotations) != _non_local(b.annotations)
    )


def _status(pod: Pod) -> PodStatus | None:
    return pod.status


def _collect(
    op: PodOperation | None, pod: Pod, updates: list[Pod], deletes: list[Pod], reconciles: list[Pod]
) -> None:
    """Put a changed pod in the list of the update its operation makes (None: no change)."""
    if op is PodOperation.UPDATE:
        updates.append(pod)
    elif op is PodOperation.DELETE:
        deletes.append(pod)
    elif op is PodOperation.RECONCILE:
        reconciles.append(pod)


@attrs.define(eq=False)
class PodStorage:
    """The merge state: per source, its pods by UID (in arrival order). Pure and synchronous."""

    now: Callable[[], dt.datetime] = _utcnow
    _pods: dict[str, dict[str, Pod]] = attrs.field(factory=dict, init=False)
    _seen: set[str] = attrs.field(factory=set, init=False)
    # per source, the pod objects of its last SET by UID: a source re-sends the objects of pods that did
    # not change (the API source's store), so most of a SET is recognised by identity, not compared
    _inputs: dict[str, dict[str, Pod]] = attrs.field(factory=dict, init=False)
    # per source, its last SET when the filter kept all of it (see _merge_in_place)
    _whole_sets: dict[str, tuple[Pod, ...]] = attrs.field(factory=dict, init=False)

    @property
    def seen_sources(self) -> frozenset[str]:
        """Sources that have delivered at least one SET."""
        return frozenset(self._seen)

    def pods(self, source: str | None = None) -> list[Pod]:
        """Current pods of one source, or of all sources."""
        sources = [source] if source is not None else list(self._pods)
        return [pod for s in sources for pod in self._pods.get(s, {}).values()]

    def merge(self, source: str, pods: Iterable[Pod]) -> list[PodUpdate]:
        """Apply a SET from ``source``; return the updates to emit, in upstream order."""
        pods = tuple(pods)
        in_place = self._merge_in_place(source, pods)
        if in_place is not None:
            return in_place
        first_set = source not in self._seen
        self._seen.add(source)
        old = self._pods.get(source, {})
        new: dict[str, Pod] = {}
        adds: list[Pod] = []
        updates: list[Pod] = []
        deletes: list[Pod] = []
        reconciles: list[Pod] = []
        last_inputs = self._inputs.get(source, {})
        inputs: dict[str, Pod] = {}
        kept = self._filter(source, pods)
        if len(kept) == len(pods):
            self._whole_sets[source] = pods
        else:
            self._whole_sets.pop(source, None)
        for given in kept:
            existing = old.get(given.uid)
            inputs[given.uid] = given
            if existing is not None and last_inputs.get(given.uid) is given:
                new[given.uid] = existing  # the very object merged last time: nothing to compare
                continue
            ref = _with_annotations(given, **{CONFIG_SOURCE_ANNOTATION: source})
            if existing is None:
                ref = _with_annotations(ref, **{CONFIG_FIRST_SEEN_ANNOTATION: rfc3339_nano(self.now())})
                new[ref.uid] = ref
                adds.append(ref)
                continue
            stored, op = self._check_and_update(existing, ref)
            new[ref.uid] = stored
            _collect(op, stored, updates, deletes, reconciles)
        removes = [pod for uid, pod in old.items() if uid not in new]
        self._pods[source] = new
        self._inputs[source] = inputs

        out: list[PodUpdate] = []
        for op, group in (
            (PodOperation.REMOVE, removes),
            (PodOperation.ADD, adds),
            (PodOperation.UPDATE, updates),
            (PodOperation.DELETE, deletes),
        ):
            if group:
                out.append(PodUpdate(op, source, tuple(group)))
        if first_set and not (adds or updates or deletes):
            out.append(PodUpdate(PodOperation.ADD, source, ()))  # tells the kubelet the source is ready
        if reconciles:
            out.append(PodUpdate(PodOperation.RECONCILE, source, tuple(reconciles)))
        return out

    def _merge_in_place(self, source: str, pods: tuple[Pod, ...]) -> list[PodUpdate] | None:
        """:meth:`merge` of a SET that only replaces pod objects of the source's last SET, each in its
        place with the same UID and full name (the API source's set after a batch of MODIFIED events):
        the same updates in O(changed) rather than O(pods), as the source sends its whole set after
        every batch. None when the SET is not such a one; then the full merge runs.

        The last SET was kept whole by the filter, so its UIDs and full names are distinct and no other
        source can have claimed one since (it would have found it owned); the replacements keep them."""
        last = self._whole_sets.get(source)
        if last is None or len(last) != len(pods):
            return None
        # the positions whose object is not the same one as last time, found without a Python loop
        changed = list(itertools.compress(range(len(pods)), map(operator.is_not, pods, last)))
        for i in changed:
            if pods[i].uid != last[i].uid or pods[i].full_name != last[i].full_name:
                return None
        self._whole_sets[source] = pods
        stored_pods, inputs = self._pods[source], self._inputs[source]
        updates: list[Pod] = []
        deletes: list[Pod] = []
        reconciles: list[Pod] = []
        for i in changed:
            given = pods[i]
            inputs[given.uid] = given
            ref = _with_annotations(given, **{CONFIG_SOURCE_ANNOTATION: source})
            stored, op = self._check_and_update(stored_pods[given.uid], ref)
            stored_pods[given.uid] = stored  # the same key: its place in the order stays
            _collect(op, stored, updates, deletes, reconciles)
        out = [
            PodUpdate(op, source, tuple(group))
            for op, group in (
                (PodOperation.UPDATE, updates),
                (PodOperation.DELETE, deletes),
                (PodOperation.RECONCILE, reconciles),
            )
            if group
        ]
        return out

    def _filter(self, source: str, pods: Iterable[Pod]) -> list[Pod]:
        """Drop pods without metadata/UID, repeated full names within the set, and UIDs owned by
        another source (the first source to deliver a UID keeps it)."""
        names: set[str] = set()
        uids: set[str] = set()
        kept: list[Pod] = []
        others = [(s, by_uid) for s, by_uid in self._pods.items() if s != source and by_uid]
        for pod in pods:  # every set carries every pod of the source: each property is read once
            uid, full_name = pod.uid, pod.full_name
            if pod.metadata is None or not uid:
                logger.warning("dropping pod without a UID", extra=kv(source=source, pod=full_name))
                continue
            if full_name in names or uid in uids:
                logger.warning("dropping duplicate pod", extra=kv(source=source, pod=kobj(pod), uid=uid))
                continue
            owner = next((s for s, by_uid in others if uid in by_uid), None) if others else None
            if owner is not None:
                logger.warning(
                    "dropping pod whose UID belongs to another source",
                    extra=kv(source=source, owner=owner, pod=kobj(pod), uid=uid),
                )
                continue
            names.add(full_name)
            uids.add(uid)
            kept.append(pod)
        return kept

    @staticmethod
    def _check_and_update(existing: Pod, ref: Pod) -> tuple[Pod, PodOperation | None]:
        """Upstream ``checkAndUpdatePod``: what changed, and the pod to keep."""
        assert existing.metadata is not None and ref.metadata is not None
        if not _differ_semantically(existing, ref):
            if _status(existing) != _status(ref):
                # the status with the resourceVersion it was read at (a status writer's precondition)
                meta = attrs.evolve(existing.metadata, resource_version=ref.metadata.resource_version)
                return attrs.evolve(existing, metadata=meta, status=ref.status), PodOperation.RECONCILE
            return existing, None
        annotations = dict(ref.metadata.annotations or {})
        for key in LOCAL_ANNOTATIONS:
            value = (existing.metadata.annotations or {}).get(key)
            if value is not None:
                annotations[key] = value
        meta = attrs.evolve(
            existing.metadata,
            labels=ref.metadata.labels,
            annotations=annotations,
            deletion_timestamp=ref.metadata.deletion_timestamp,
            deletion_grace_period_seconds=ref.metadata.deletion_grace_period_seconds,
            generation=ref.metadata.generation,
            resource_version=ref.metadata.resource_version,
        )
        stored = attrs.evolve(existing, metadata=meta, spec=ref.spec, status=ref.status)
        if ref.metadata.deletion_timestamp is not None:
            return stored, PodOperation.DELETE
        return stored, PodOperation.UPDATE


@attrs.define(eq=False)
class PodConfig:
    """Merges the SETs of the configured sources into one ordered stream of :class:`PodUpdate`.

    Usage::

        config = PodConfig(sources=("file", "http"))
        file_source = FileSource(path, node_name, config.source_channel("file"))
        await nursery.start(config.run)
        await nursery.start(file_source.run)
        async for update in config.updates: ...

    ``sources_ready`` becomes True once every configured source has delivered a SET (upstream's
    ``SeenAllSources``; the sync loop adds its own "and I have handled an update from each" check).
    """

    sources: Sequence[str]
    now: Callable[[], dt.datetime] = _utcnow
    storage: PodStorage = attrs.field(init=False)
    sources_ready: trio_util.AsyncBool = attrs.field(init=False, factory=lambda: trio_util.AsyncBool(False))
    _in_send: trio.MemorySendChannel[SourceSet] = attrs.field(init=False)
    _in_recv: trio.MemoryReceiveChannel[SourceSet] = attrs.field(init=False)
    _out_send: trio.MemorySendChannel[PodUpdate] = attrs.field(init=False)
    _out_recv: trio.MemoryReceiveChannel[PodUpdate] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.storage = PodStorage(now=self.now)
        self._in_send, self._in_recv = trio.open_memory_channel[SourceSet](SOURCE_BUFFER)
        self._out_send, self._out_recv = trio.open_memory_channel[PodUpdate](UPDATES_BUFFER)

    def add_source(self, source: str) -> None:
        """Configure one more source before :meth:`run` (the node builder adds API mode's ``api``); one
        already configured stays as it is."""
        if source not in self.sources:
            self.sources = (*self.sources, source)

    def source_channel(self, source: str) -> trio.MemorySendChannel[SourceSet]:
        """A send channel for one source (the caller owns and closes it). Only SETs from the named
        source may be sent on it."""
        if source not in self.sources:
            raise ValueError(f"source {source!r} is not configured (configured: {list(self.sources)})")
        return self._in_send.clone()

    @property
    def updates(self) -> trio.MemoryReceiveChannel[PodUpdate]:
        """The merged updates; ends (EndOfChannel) when :meth:`run` exits."""
        return self._out_recv

    def seen_sources(self) -> frozenset[str]:
        return self.storage.seen_sources

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Merge until cancelled."""
        try:
            task_status.started()
            async for update in self._in_recv:
                if update.source not in self.sources:
                    logger.warning("ignoring update from unconfigured source", extra=kv(source=update.source))
                    continue
                merged = self.storage.merge(update.source, update.pods)
                if not self.sources_ready.value and self.storage.seen_sources >= set(self.sources):
                    logger.info("all pod sources ready", extra=kv(sources=",".join(self.sources)))
                    self.sources_ready.value = True
                for out in merged:
                    logger.debug("pod update", extra=kv(op=out.op, source=out.source, pods=len(out.pods)))
                    await self._out_send.send(out)
        finally:
            self._out_send.close()
