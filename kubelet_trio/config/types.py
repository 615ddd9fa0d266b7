"""What flows through pod configuration: operations, source names, annotations, updates
(``pkg/kubelet/types/pod_update.go``)."""

from __future__ import annotations

import enum

import attrs

from kubelet_trio.api import Pod
from kubelet_trio.api.pod import API_SOURCE, CONFIG_MIRROR_ANNOTATION, CONFIG_SOURCE_ANNOTATION

__all__ = [
    "ALL_SOURCE",
    "API_SOURCE",
    "CONFIG_FIRST_SEEN_ANNOTATION",
    "CONFIG_HASH_ANNOTATION",
    "CONFIG_MIRROR_ANNOTATION",
    "CONFIG_SOURCE_ANNOTATION",
    "FILE_SOURCE",
    "HTTP_SOURCE",
    "LOCAL_ANNOTATIONS",
    "PodOperation",
    "PodUpdate",
    "SourceSet",
]

FILE_SOURCE = "file"
HTTP_SOURCE = "http"
#: Pseudo-source of a whole-state snapshot.
ALL_SOURCE = "*"

CONFIG_HASH_ANNOTATION = "kubernetes.io/config.hash"
CONFIG_FIRST_SEEN_ANNOTATION = "kubernetes.io/config.seen"
#: Annotations the kubelet stamps itself; they never make two pods "differ".
LOCAL_ANNOTATIONS = (CONFIG_SOURCE_ANNOTATION, CONFIG_MIRROR_ANNOTATION, CONFIG_FIRST_SEEN_ANNOTATION)


class PodOperation(enum.StrEnum):
    SET = "SET"  # a source's complete set of pods (sources -> PodConfig)
    ADD = "ADD"  # new pods (or, empty, "this source is ready")
    UPDATE = "UPDATE"  # spec, labels or annotations changed
    REMOVE = "REMOVE"  # gone from the source: stop without API deletion
    DELETE = "DELETE"  # graceful deletion requested (deletionTimestamp set)
    RECONCILE = "RECONCILE"  # only the status changed


@attrs.frozen
class SourceSet:
    """A source's complete, current set of pods (op SET): what every source sends to PodConfig."""

    source: str
    pods: tuple[Pod, ...]


@attrs.frozen
class PodUpdate:
    """One merged change for the kubelet's sync loop."""

    op: PodOperation
    source: str
    pods: tuple[Pod, ...]
