"""The pod cache: runtime status per pod UID, stamped with the relist that produced it.

Go: ``pkg/kubelet/container/cache.go``. The PLEG writes it; pod workers read it with
:meth:`PodCache.get_newer_than`, which waits until the cache holds data newer than the worker's
previous sync, so a sync never acts on status older than its own last action (which would make it,
for instance, start a container twice).
"""

from __future__ import annotations

import attrs
import trio

from kubelet_trio.container.types import PodStatus


@attrs.frozen
class CacheEntry:
    status: PodStatus
    error: Exception | None
    modified: float


@attrs.define(eq=False)
class PodCache:
    _entries: dict[str, CacheEntry] = attrs.Factory(dict)
    _global_timestamp: float = float("-inf")  # every entry is at least this fresh
    # Readers waiting in get_newer_than, by UID: a write wakes only that pod's reader, so a relist that
    # writes N pods costs N wake-ups, not N times every waiting worker.
    _waiters: dict[str, trio.Event] = attrs.Factory(dict)

    def _notify(self, uid: str) -> None:
        waiter = self._waiters.pop(uid, None)
        if waiter is not None:
            waiter.set()

    def set(self, uid: str, status: PodStatus, error: Exception | None, timestamp: float) -> bool:
        """Store an inspection that began at ``timestamp``; one older than the entry is dropped (two
        writers: the relist, and a pod worker inspecting right after its own actions), as Go's cache
        does for the evented PLEG. Returns whether it was stored."""
        current = self._entries.get(uid)
        if current is not None and current.modified > timestamp:
            return False
        self._entries[uid] = CacheEntry(status, error, timestamp)
        self._notify(uid)
        return True

    def delete(self, uid: str) -> None:
        self._entries.pop(uid, None)
        self._notify(uid)

    def update_time(self, timestamp: float) -> None:
        """Mark the whole cache fresh as of ``timestamp`` (called after every successful relist)."""
        self._global_timestamp = max(self._global_timestamp, timestamp)
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            waiter.set()

    @property
    def timestamp(self) -> float:
        return self._global_timestamp

    def get(self, uid: str) -> PodStatus:
        """The cached status, or an empty one for a pod the runtime does not have."""
        entry = self._entries.get(uid)
        return entry.status if entry is not None else PodStatus(uid=uid, timestamp=self._global_timestamp)

    def get_entry(self, uid: str) -> CacheEntry | None:
        return self._entries.get(uid)

    async def get_newer_than(self, uid: str, since: float) -> PodStatus:
        """Wait until the entry (or the whole cache) is newer than ``since``; then return the status.

        Raises the entry's error, if the last inspection of this pod failed.
        """
        while True:
            entry = self._entries.get(uid)
            if entry is not None and entry.modified > since:
                if entry.error is not None:
                    raise entry.error
                return entry.status
            if self._global_timestamp > since:
                return self.get(uid)
            await self._waiters.setdefault(uid, trio.Event()).wait()

    def uids(self) -> list[str]:
        return list(self._entries)
