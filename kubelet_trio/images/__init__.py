"""Image garbage collection (Go: ``pkg/kubelet/images``) and image archives imported from a directory
(``--image-import-dir``); pulling lives in ``kuberuntime.images``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.images.gc import ImageGCError, ImageGCManager, ImageGCPolicy, NodeEventSink
    from kubelet_trio.images.imagefs import (
        FixedCapacityImageFs,
        FsStats,
        ImageFsError,
        ImageFsNotVisible,
        ImageFsStatsProvider,
        StatvfsImageFs,
    )
    from kubelet_trio.images.importer import ImageImporter, ImageImportError, open_image_importer

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "ImageGCError": "kubelet_trio.images.gc",
    "ImageGCManager": "kubelet_trio.images.gc",
    "ImageGCPolicy": "kubelet_trio.images.gc",
    "NodeEventSink": "kubelet_trio.images.gc",
    "FixedCapacityImageFs": "kubelet_trio.images.imagefs",
    "FsStats": "kubelet_trio.images.imagefs",
    "ImageFsError": "kubelet_trio.images.imagefs",
    "ImageFsNotVisible": "kubelet_trio.images.imagefs",
    "ImageFsStatsProvider": "kubelet_trio.images.imagefs",
    "StatvfsImageFs": "kubelet_trio.images.imagefs",
    "ImageImporter": "kubelet_trio.images.importer",
    "ImageImportError": "kubelet_trio.images.importer",
    "open_image_importer": "kubelet_trio.images.importer",
}

__all__ = [
    "FixedCapacityImageFs",
    "FsStats",
    "ImageFsError",
    "ImageFsNotVisible",
    "ImageFsStatsProvider",
    "ImageGCError",
    "ImageGCManager",
    "ImageGCPolicy",
    "ImageImportError",
    "ImageImporter",
    "NodeEventSink",
    "StatvfsImageFs",
    "open_image_importer",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
