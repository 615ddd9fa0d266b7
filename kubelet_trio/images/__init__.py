"""Image garbage collection (Go: ``pkg/kubelet/images``) and image archives imported from a directory
(``--image-import-dir``); pulling lives in ``kuberuntime.images``."""

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
