"""Image garbage collection (Go: ``pkg/kubelet/images``); pulling lives in ``kuberuntime.images``."""

from kubelet_trio.images.gc import ImageGCError, ImageGCManager, ImageGCPolicy, NodeEventSink
from kubelet_trio.images.imagefs import (
    FixedCapacityImageFs,
    FsStats,
    ImageFsError,
    ImageFsNotVisible,
    ImageFsStatsProvider,
    StatvfsImageFs,
)

__all__ = [
    "FixedCapacityImageFs",
    "FsStats",
    "ImageFsError",
    "ImageFsNotVisible",
    "ImageFsStatsProvider",
    "ImageGCError",
    "ImageGCManager",
    "ImageGCPolicy",
    "NodeEventSink",
    "StatvfsImageFs",
]
