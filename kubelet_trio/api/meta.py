"""``metav1.ObjectMeta`` and friends.

Timestamps stay strings in the model (they round-trip byte for byte); :mod:`kubelet_trio.api.timefmt`
produces them the way Go's ``time.Time`` marshals.
"""

from __future__ import annotations

from kubelet_trio.api.serialize import Model, field, model

__all__ = ["ObjectMeta", "OwnerReference"]


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
