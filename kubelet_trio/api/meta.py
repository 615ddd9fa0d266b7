"""``metav1.ObjectMeta`` and friends, plus RFC 3339 time formatting.

Timestamps stay strings in the model (they round-trip byte for byte); :func:`rfc3339` and
:func:`rfc3339_nano` produce them from aware datetimes the way Go's ``time.Time`` marshals.
"""

from __future__ import annotations

import datetime as dt

from kubelet_trio.api.serialize import Model, field, model

__all__ = ["ObjectMeta", "OwnerReference", "rfc3339", "rfc3339_nano"]


@model
class OwnerReference(Model):
    api_version: str | None = field()
    kind: str | None = field()
    name: str | None = field()
    uid: str | None = field()
    controller: bool | None = field()
    block_owner_deletion: bool | None = field()


@model
class ObjectMeta(Model):
    name: str | None = field()
    generate_name: str | None = field()
    namespace: str | None = field()
    uid: str | None = field()
    labels: dict[str, str] | None = field()
    annotations: dict[str, str] | None = field()
    resource_version: str | None = field()
    generation: int | None = field()
    creation_timestamp: str | None = field()
    deletion_timestamp: str | None = field()
    deletion_grace_period_seconds: int | None = field()
    owner_references: tuple[OwnerReference, ...] | None = field()


def _utc(moment: dt.datetime) -> dt.datetime:
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    return moment.astimezone(dt.UTC)


def rfc3339(moment: dt.datetime) -> str:
    """Whole-second RFC 3339 in UTC (``metav1.Time``): ``2024-05-01T12:00:00Z``."""
    return _utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_nano(moment: dt.datetime) -> str:
    """RFC 3339 with trailing zeros of the fraction dropped (Go's ``time.RFC3339Nano``), in UTC."""
    moment = _utc(moment)
    base = moment.strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f"{moment.microsecond:06d}".rstrip("0")
    return f"{base}.{fraction}Z" if fraction else f"{base}Z"
