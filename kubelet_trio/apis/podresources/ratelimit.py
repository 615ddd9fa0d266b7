"""The pod resources API's rate limit (Go: ``grpc/ratelimit.go``): a token bucket in front of every
call, as ``golang.org/x/time/rate``'s ``Limiter.Allow`` — ``burst`` tokens to start with, ``qps`` more per
second, a call without a token refused with ``ResourceExhausted``."""

from __future__ import annotations

import attrs
import trio

__all__ = ["DEFAULT_BURST_TOKENS", "DEFAULT_QPS", "ERROR_LIMIT_EXCEEDED", "Limiter"]

DEFAULT_QPS = 100.0  # Go: no known consumer needs more than 100 calls per second
DEFAULT_BURST_TOKENS = 10
ERROR_LIMIT_EXCEEDED = "rejected by rate limit"


@attrs.define(eq=False)
class Limiter:
    """A token bucket on Trio's clock; :meth:`allow` takes a token when there is one."""

    qps: float = DEFAULT_QPS
    burst: int = DEFAULT_BURST_TOKENS
    _tokens: float | None = None  # full until first used
    _last: float = 0.0

    def allow(self) -> bool:
        now = trio.current_time()
        tokens = float(self.burst) if self._tokens is None else self._tokens
        tokens = min(float(self.burst), tokens + (now - self._last) * self.qps)
        self._last = now
        if tokens < 1:
            self._tokens = tokens
            return False
        self._tokens = tokens - 1
        return True
