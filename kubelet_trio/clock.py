"""Wall-clock timestamps derived from Trio's clock.

Kubernetes timestamps (CRI nanoseconds, RFC3339 in the API) are wall-clock, but every period, timeout and
backoff in kubelet-trio reads Trio's clock so tests can run under ``MockClock``. A ``WallClock`` anchors
one to the other once; components that must agree on timestamps (the simulated runtime, backoff keyed on
a container's ``finishedAt``, status generation) share one instance.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time

import attrs
import trio


@attrs.define(eq=False)
class WallClock:
    """``wall_ns() == base_wall_ns + (trio.current_time() - base_trio) * 1e9``.

    The Trio origin is taken at construction inside ``trio.run``, otherwise on first use, so a clock (and
    the runtime holding it) can be built before the run that drives it.
    """

    base_wall_ns: int = attrs.field(factory=time.time_ns)
    _base_trio: float | None = attrs.field(default=None, alias="base_trio")

    def __attrs_post_init__(self) -> None:
        if self._base_trio is None:
            with contextlib.suppress(RuntimeError):  # not inside trio.run yet: set on first use
                self._base_trio = trio.current_time()

    @property
    def base_trio(self) -> float:
        if self._base_trio is None:
            self._base_trio = trio.current_time()
        return self._base_trio

    def wall_ns(self) -> int:
        return self.base_wall_ns + round((trio.current_time() - self.base_trio) * 1e9)

    def to_trio(self, wall_ns: int) -> float:
        """The Trio time at which the wall clock reads ``wall_ns``."""
        return self.base_trio + (wall_ns - self.base_wall_ns) / 1e9

    def now(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.wall_ns() / 1e9, tz=dt.UTC)


def go_duration(seconds: float) -> str:
    """Go's ``time.Duration.String`` (``3m0s``, ``3m0.5s``, ``1h0m0s``, ``250ms``) for messages."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)

    def fixed(value: int, scale: int) -> str:
        whole, frac = divmod(value, scale)
        digits = len(str(scale)) - 1
        return f"{whole}.{frac:0{digits}d}".rstrip("0") if frac else str(whole)

    if ns < 1_000:
        return f"{sign}{ns}ns"
    if ns < 1_000_000:
        return f"{sign}{fixed(ns, 1_000)}µs"
    if ns < 1_000_000_000:
        return f"{sign}{fixed(ns, 1_000_000)}ms"
    hours, rest = divmod(ns, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    secs = fixed(rest, 10**9)
    if hours:
        return f"{sign}{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{sign}{minutes}m{secs}s"
    return f"{sign}{secs}s"
