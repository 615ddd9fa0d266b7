"""Times in status generation: the current moment from a value, a provider or a clock. The formats
themselves are :mod:`kubelet_trio.api.timefmt`'s.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Protocol

from kubelet_trio.api.timefmt import Timestamp, format_time, parse_rfc3339, rfc3339, to_datetime

__all__ = [
    "SupportsNow",
    "Timestamp",
    "format_time",
    "parse_rfc3339",
    "resolve_now",
    "rfc3339",
    "to_datetime",
]


class SupportsNow(Protocol):
    """A wall clock (``kubelet_trio.clock.WallClock``)."""

    def now(self) -> dt.datetime: ...


def resolve_now(now: Timestamp | Callable[[], Timestamp] | None, clock: SupportsNow | None) -> Timestamp:
    """The current time from a value, a zero-argument provider, or a clock's ``now()``."""
    if now is not None:
        return now() if callable(now) else now
    if clock is not None:
        return clock.now()
    raise TypeError("either now or clock is required")
