"""Pod sources (file, URL; later the API server) and their merge into ADD/UPDATE/DELETE/REMOVE/RECONCILE
updates for the sync loop - ``pkg/kubelet/config``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.config.file import FILE_CHECK_FREQUENCY, FileScan, FileSource, scan_manifest_path
    from kubelet_trio.config.http import (
        HTTP_CHECK_FREQUENCY,
        HTTP_TIMEOUT,
        HttpSource,
        parse_manifest_url_headers,
    )
    from kubelet_trio.config.podconfig import UPDATES_BUFFER, PodConfig, PodStorage
    from kubelet_trio.config.static import (
        DEFAULT_NAMESPACE,
        generate_pod_name,
        make_static_pod,
        static_pod_uid,
    )
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

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "FILE_CHECK_FREQUENCY": "kubelet_trio.config.file",
    "FileScan": "kubelet_trio.config.file",
    "FileSource": "kubelet_trio.config.file",
    "scan_manifest_path": "kubelet_trio.config.file",
    "HTTP_CHECK_FREQUENCY": "kubelet_trio.config.http",
    "HTTP_TIMEOUT": "kubelet_trio.config.http",
    "HttpSource": "kubelet_trio.config.http",
    "parse_manifest_url_headers": "kubelet_trio.config.http",
    "UPDATES_BUFFER": "kubelet_trio.config.podconfig",
    "PodConfig": "kubelet_trio.config.podconfig",
    "PodStorage": "kubelet_trio.config.podconfig",
    "DEFAULT_NAMESPACE": "kubelet_trio.config.static",
    "generate_pod_name": "kubelet_trio.config.static",
    "make_static_pod": "kubelet_trio.config.static",
    "static_pod_uid": "kubelet_trio.config.static",
    "ALL_SOURCE": "kubelet_trio.config.types",
    "API_SOURCE": "kubelet_trio.config.types",
    "CONFIG_FIRST_SEEN_ANNOTATION": "kubelet_trio.config.types",
    "CONFIG_HASH_ANNOTATION": "kubelet_trio.config.types",
    "CONFIG_MIRROR_ANNOTATION": "kubelet_trio.config.types",
    "CONFIG_SOURCE_ANNOTATION": "kubelet_trio.config.types",
    "FILE_SOURCE": "kubelet_trio.config.types",
    "HTTP_SOURCE": "kubelet_trio.config.types",
    "LOCAL_ANNOTATIONS": "kubelet_trio.config.types",
    "PodOperation": "kubelet_trio.config.types",
    "PodUpdate": "kubelet_trio.config.types",
    "SourceSet": "kubelet_trio.config.types",
}

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


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
