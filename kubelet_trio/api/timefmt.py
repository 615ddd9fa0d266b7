"""The API's time formats, in one place (Go: ``metav1.Time``, ``metav1.MicroTime``, ``time.RFC3339Nano``).

- :func:`rfc3339`: ``metav1.Time`` — UTC, whole seconds, ``Z`` (``2024-05-01T10:00:00Z``). A CRI time
  of 0 is ``time.Unix(0, 0)`` in Go, shown as ``1970-01-01T00:00:00Z``.
- :func:`micro_time`: ``metav1.MicroTime`` — six fractional digits (leases, events).
- :func:`rfc3339_nano`: ``time.RFC3339Nano`` — trailing zeros of the fraction dropped (CRI logs, the
  ``kubernetes.io/config.seen`` annotation).
- :func:`parse_rfc3339`: any of these (``Z`` or an offset) to an aware datetime.

A moment is an aware ``datetime`` or CRI nanoseconds since the epoch (an ``int``); a naive datetime is
refused, since the API's times are absolute.
"""

from __future__ import annotations

import datetime as dt
import functools

__all__ = [
    "Timestamp",
    "format_time",
    "micro_time",
    "parse_rfc3339",
    "rfc3339",
    "rfc3339_nano",
    "to_datetime",
]

#: A moment given to status generation: an aware datetime, CRI nanoseconds since the epoch, or an
#: RFC 3339 string used as is.
Timestamp = dt.datetime | int | str

_SECONDS = "%Y-%m-%dT%H:%M:%S"


def _split(moment: dt.datetime | int) -> tuple[str, int]:
    """``(whole seconds formatted in UTC, nanoseconds)``."""
    if isinstance(moment, int):
        seconds, nanos = divmod(moment, 10**9)
        return _utc_seconds(seconds), nanos
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    return moment.astimezone(dt.UTC).strftime(_SECONDS), moment.microsecond * 1000


@functools.lru_cache(maxsize=256)
def _utc_seconds(seconds: int) -> str:
    """Memoized: a node's CRI times fall in few distinct seconds, formatted again at every status sync."""
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime(_SECONDS)


def rfc3339(moment: dt.datetime | int) -> str:
    """``metav1.Time``: whole seconds in UTC."""
    return _split(moment)[0] + "Z"


def micro_time(moment: dt.datetime | int) -> str:
    """``metav1.MicroTime``: exactly six fractional digits, UTC."""
    stamp, nanos = _split(moment)
    return f"{stamp}.{nanos // 1000:06d}Z"


def rfc3339_nano(moment: dt.datetime | int) -> str:
    """Go's ``time.RFC3339Nano`` in UTC, trailing zeros of the fraction trimmed."""
    stamp, nanos = _split(moment)
    fraction = f"{nanos:09d}".rstrip("0")
    return f"{stamp}.{fraction}Z" if fraction else f"{stamp}Z"


def parse_rfc3339(text: str) -> dt.datetime:
    """Parse an RFC 3339 timestamp (``Z`` or an offset, optional fraction) into an aware datetime."""
    moment = dt.datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise ValueError(f"timestamp without a time zone: {text!r}")
    return moment


def to_datetime(moment: Timestamp) -> dt.datetime:
    """An aware datetime for any :data:`Timestamp` (nanoseconds keep microsecond precision)."""
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
    return moment if isinstance(moment, str) else rfc3339(moment)
