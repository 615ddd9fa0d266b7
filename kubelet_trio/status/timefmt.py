"""API timestamps: CRI nanoseconds and datetimes to ``metav1.Time`` strings (whole seconds, UTC, ``Z``).

``metav1.Time`` marshals with ``time.RFC3339`` after converting to UTC, which truncates to the second;
a CRI time of 0 is ``time.Unix(0, 0)`` in Go, shown as ``1970-01-01T00:00:00Z`` (what the API shows for
the ``startedAt`` of a container that never started).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Protocol

from kubelet_trio.clock import rfc3339

__all__ = [
    "SupportsNow",
    "Timestamp",
    "format_time",
    "parse_rfc3339",
    "resolve_now",
    "rfc3339",
    "to_datetime",
]

#: A moment given to status generation: an aware datetime, CRI nanoseconds since the epoch, or an
#: RFC 3339 string used as is.
Timestamp = dt.datetime | int | str

_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


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


def parse_rfc3339(text: str) -> dt.datetime:
    """Parse an RFC 3339 timestamp (``Z`` or an offset, optional fraction) into an aware datetime."""
    moment = dt.datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise ValueError(f"timestamp without a time zone: {text!r}")
    return moment


def to_datetime(moment: Timestamp) -> dt.datetime:
    if isinstance(moment, dt.datetime):
        if moment.tzinfo is None:
            raise ValueError("timestamps must be timezone-aware")
        return moment
    if isinstance(moment, int):
        seconds, nanos = divmod(moment, 1_000_000_000)
        return dt.datetime.fromtimestamp(seconds, dt.UTC) + dt.timedelta(microseconds=nanos // 1000)
    return parse_rfc3339(moment)


def format_time(moment: Timestamp) -> str:
    """The API's string for ``moment`` (a string is returned unchanged)."""
    if isinstance(moment, str):
        return moment
    if isinstance(moment, int):
        return rfc3339(moment)
    return to_datetime(moment).astimezone(dt.UTC).strftime(_FORMAT)
