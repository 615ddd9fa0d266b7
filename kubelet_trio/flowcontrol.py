"""A token bucket on Trio's clock (Go: ``k8s.io/client-go/util/flowcontrol``'s token bucket rate limiter).

Each request reserves a token; when the bucket is empty the caller sleeps until its token is due, so
requests leave in arrival order at ``qps`` on average with bursts up to ``burst`` (like Go's
``rate.Limiter.Wait``), or, with :meth:`TokenBucket.try_acquire`, is refused at once (Go's
``TryAccept``: event spam filters, image pulls). A caller cancelled while waiting gives its reservation
back. A leaf module: the API client's rate limit and the image puller's share it without either loading
the other's stack.
"""

from __future__ import annotations

import attrs
import trio

from kubelet_trio import defaults

__all__ = ["TokenBucket"]


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
