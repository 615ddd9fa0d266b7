"""Local volumes of pods: emptyDir (disk and tmpfs), hostPath, downwardAPI, and configMap/secret/projected
files from an object store (Go: ``pkg/kubelet/volumemanager``, ``pkg/volume/*``)."""

from __future__ import annotations

from kubelet_trio.volumemanager.atomic_writer import AtomicWriter, FileProjection
from kubelet_trio.volumemanager.datadirs import DataDirError, make_pod_data_dirs, setup_data_dirs
from kubelet_trio.volumemanager.errors import MountError, VolumeError
from kubelet_trio.volumemanager.manager import MountedVolume, VolumeManager, referenced_volumes
from kubelet_trio.volumemanager.mounter import Mounter, MountFailed, SystemMounter
from kubelet_trio.volumemanager.paths import pod_container_dir, pod_dir, pod_etc_hosts_path

__all__ = [
    "AtomicWriter",
    "DataDirError",
    "FileProjection",
    "MountError",
    "MountFailed",
    "MountedVolume",
    "Mounter",
    "SystemMounter",
    "VolumeError",
    "VolumeManager",
    "make_pod_data_dirs",
    "pod_container_dir",
    "pod_dir",
    "pod_etc_hosts_path",
    "referenced_volumes",
    "setup_data_dirs",
]
