"""Per-key exponential backoff on Trio time (Go: client-go ``util/flowcontrol/backoff.go``).

The kubelet keeps two: crash-loop backoff keyed ``<podName>_<ns>_<podUID>_<container>_<hash>`` and image
pull backoff keyed ``<podUID>_<image>``, both 10 s doubling to 300 s, no jitter. An entry is *expired*
(and the next ``next`` starts over at ``initial``) when ``event_time - last_update > expire_after``
(default ``2 * max``: 600 s).

All times are Trio seconds. Comparisons are written as ``now < start + backoff`` (not
``now - start < backoff``) so that a caller sleeping until :meth:`expiry` is never still "in backoff"
when it wakes because of float rounding.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import trio

__all__ = ["CONTAINER_BACKOFF_INITIAL", "CONTAINER_BACKOFF_MAX", "Backoff"]

CONTAINER_BACKOFF_INITIAL = 10.0
CONTAINER_BACKOFF_MAX = 300.0


@attrs.define
class _Entry:
    backoff: float
    last_update: float


@attrs.define(eq=False)
class Backoff:
    initial: float = CONTAINER_BACKOFF_INITIAL
    max: float = CONTAINER_BACKOFF_MAX
    expire_after: float | None = None  # None: 2 * max
    now: Callable[[], float] = trio.current_time
    _entries: dict[str, _Entry] = attrs.field(factory=dict, init=False)

    @property
    def _expire_after(self) -> float:
        return 2 * self.max if self.expire_after is None else self.expire_after

    def _expired(self, event_time: float, entry: _Entry) -> bool:
        return event_time > entry.last_update + self._expire_after

    def get(self, key: str) -> float:
        """The current backoff of ``key`` (0 when there is none)."""
        entry = self._entries.get(key)
        return entry.backoff if entry is not None else 0.0

    def next(self, key: str, event_time: float) -> None:
        """Move ``key`` to its next backoff: ``initial`` when new or expired, else doubled up to ``max``."""
        entry = self._entries.get(key)
        if entry is None or self._expired(event_time, entry):
            entry = self._entries[key] = _Entry(self.initial, 0.0)
        else:
            entry.backoff = min(entry.backoff * 2, self.max)
        entry.last_update = self.now()

    def is_in_backoff_since(self, key: str, event_time: float) -> bool:
        """Whether ``now`` is still within the backoff measured from ``event_time`` (a finishedAt)."""
        entry = self._entries.get(key)
        if entry is None or self._expired(event_time, entry):
            return False
        return self.now() < event_time + entry.backoff

    def is_in_backoff_since_update(self, key: str, event_time: float) -> bool:
        """Whether ``event_time`` (usually now) is within the backoff measured from the last update."""
        entry = self._entries.get(key)
        if entry is None or self._expired(event_time, entry):
            return False
        return event_time < entry.last_update + entry.backoff

    def expiry(self, key: str, since: float | None = None) -> float | None:
        """When the backoff of ``key`` ends: ``since + backoff`` (``since`` defaults to the last update)."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        return (entry.last_update if since is None else since) + entry.backoff

    def reset(self, key: str) -> None:
        self._entries.pop(key, None)

    def gc(self) -> None:
        """Forget entries not updated for ``expire_after``."""
        now = self.now()
        for key in [k for k, e in self._entries.items() if self._expired(now, e)]:
            del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)
