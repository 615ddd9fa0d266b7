"""Rate limits on Trio's clock (Go: ``k8s.io/client-go/util/flowcontrol``): a token bucket and per-key
exponential backoff.

**Token bucket** (Go's token bucket rate limiter).

Each request reserves a token; when the bucket is empty the caller sleeps until its token is due, so
requests leave in arrival order at ``qps`` on average with bursts up to ``burst`` (like Go's
``rate.Limiter.Wait``), or, with :meth:`TokenBucket.try_acquire`, is refused at once (Go's
``TryAccept``: event spam filters, image pulls). A caller cancelled while waiting gives its reservation
back. A leaf module: the API client's rate limit and the image puller's share it without either loading
the other's stack.

**Backoff** (Go's ``backoff.go``): per key, ``initial`` doubling to ``max``, no jitter; an entry is
*expired* (and the next :meth:`Backoff.next` starts over at ``initial``) when ``event_time - last_update >
expire_after`` (default ``2 * max``). All times are Trio seconds. Comparisons are written as ``now < start +
backoff`` (not ``now - start < backoff``) so that a caller sleeping until :meth:`Backoff.expiry` is never
still "in backoff" when it wakes because of float rounding.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import trio

from kubelet_trio import defaults

__all__ = ["Backoff", "TokenBucket"]


@attrs.define(eq=False)
class TokenBucket:
    """``qps <= 0`` disables the limit. Defaults: the API client's (``kubeAPIQPS`` / ``kubeAPIBurst``)."""

    qps: float = defaults.KUBE_API_QPS
    burst: int = defaults.KUBE_API_BURST
    _tokens: float = attrs.field(init=False)
    _last: float | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        if self.burst < 1:
            raise ValueError("burst must be at least 1")
        self._tokens = float(self.burst)

    def _refill(self, now: float) -> None:
        if self._last is not None:
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now

    def try_acquire(self) -> bool:
        """Take a token if one is available now (callers that drop or fail instead of waiting)."""
        if self.qps <= 0:
            return True
        self._refill(trio.current_time())
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False

    async def acquire(self) -> None:
        """Take one token, sleeping until it is available."""
        if self.qps <= 0:
            await trio.lowlevel.checkpoint()
            return
        now = trio.current_time()
        self._refill(now)
        self._tokens -= 1
        if self._tokens >= 0:
            await trio.lowlevel.checkpoint()
            return
        try:
            await trio.sleep_until(now + (-self._tokens) / self.qps)
        except trio.Cancelled:
            self._tokens += 1  # hand the reservation back
            raise


@attrs.define
class _Entry:
    backoff: float
    last_update: float


@attrs.define(eq=False)
class Backoff:
    initial: float
    max: float
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
