"""Pod sources (file, URL; later the API server) and their merge into ADD/UPDATE/DELETE/REMOVE/RECONCILE
updates for the sync loop - ``pkg/kubelet/config``."""

from __future__ import annotations

from kubelet_trio.config.file import FILE_CHECK_FREQUENCY, FileScan, FileSource, scan_manifest_path
from kubelet_trio.config.http import (
    HTTP_CHECK_FREQUENCY,
    HTTP_TIMEOUT,
    HttpSource,
    parse_manifest_url_headers,
)
from kubelet_trio.config.podconfig import UPDATES_BUFFER, PodConfig, PodStorage
from kubelet_trio.config.static import DEFAULT_NAMESPACE, generate_pod_name, make_static_pod, static_pod_uid
from kubelet_trio.config.types import (
    ALL_SOURCE,
    API_SOURCE,
    CONFIG_FIRST_SEEN_ANNOTATION,
    CONFIG_HASH_ANNOTATION,
    CONFIG_MIRROR_ANNOTATION,
    CONFIG_SOURCE_ANNOTATION,
    FILE_SOURCE,
    HTTP_SOURCE,
    LOCAL_ANNOTATIONS,
    PodOperation,
    PodUpdate,
    SourceSet,
)

__all__ = [
    "ALL_SOURCE",
    "API_SOURCE",
    "CONFIG_FIRST_SEEN_ANNOTATION",
    "CONFIG_HASH_ANNOTATION",
    "CONFIG_MIRROR_ANNOTATION",
    "CONFIG_SOURCE_ANNOTATION",
    "DEFAULT_NAMESPACE",
    "FILE_CHECK_FREQUENCY",
    "FILE_SOURCE",
    "HTTP_CHECK_FREQUENCY",
    "HTTP_SOURCE",
    "HTTP_TIMEOUT",
    "LOCAL_ANNOTATIONS",
    "UPDATES_BUFFER",
    "FileScan",
    "FileSource",
    "HttpSource",
    "PodConfig",
    "PodOperation",
    "PodStorage",
    "PodUpdate",
    "SourceSet",
    "generate_pod_name",
    "make_static_pod",
    "parse_manifest_url_headers",
    "scan_manifest_path",
    "static_pod_uid",
]
