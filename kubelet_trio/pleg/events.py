"""Pod lifecycle events (Go: ``pkg/kubelet/pleg/pleg.go``)."""

from __future__ import annotations

import enum

import attrs

__all__ = ["PodLifecycleEvent", "PodLifecycleEventType"]


class PodLifecycleEventType(enum.StrEnum):
    CONTAINER_STARTED = "ContainerStarted"
    CONTAINER_DIED = "ContainerDied"
    CONTAINER_REMOVED = "ContainerRemoved"
    # Computed by the relister for containers that go to an unknown/created state, but never sent:
    # nothing consumes it and it is not reliable (Go filters it in ``Relist``).
    CONTAINER_CHANGED = "ContainerChanged"


@attrs.frozen
class PodLifecycleEvent:
    """Something happened to a container (or sandbox) of pod ``uid``; ``data`` is its runtime ID."""

    uid: str
    type: PodLifecycleEventType
    data: str
