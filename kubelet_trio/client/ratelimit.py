"""A token bucket on Trio's clock: the client-side rate limit (client-go ``flowcontrol`` QPS/burst).

Each request reserves a token; when the bucket is empty the caller sleeps until its token is due, so
requests leave in arrival order at ``qps`` on average with bursts up to ``burst`` (like Go's
``rate.Limiter.Wait``). A caller cancelled while waiting gives its reservation back.
"""

from __future__ import annotations

import attrs
import trio

from kubelet_trio import defaults

__all__ = ["DEFAULT_BURST", "DEFAULT_QPS", "TokenBucket"]

#: The kubelet's defaults (``kubeAPIQPS`` / ``kubeAPIBurst``).
DEFAULT_QPS = defaults.KUBE_API_QPS
DEFAULT_BURST = defaults.KUBE_API_BURST


@attrs.define(eq=False)
class TokenBucket:
    """``qps <= 0`` disables the limit."""

    qps: float = DEFAULT_QPS
    burst: int = DEFAULT_BURST
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
        """Take a token if one is available now (spam filters drop instead of waiting)."""
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
