"""Local volumes of pods: emptyDir (disk and tmpfs), hostPath, downwardAPI, and configMap/secret/projected
files from an object store (Go: ``pkg/kubelet/volumemanager``, ``pkg/volume/*``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.volumemanager.atomic_writer import AtomicWriter, FileProjection
    from kubelet_trio.volumemanager.datadirs import DataDirError, make_pod_data_dirs, setup_data_dirs
    from kubelet_trio.volumemanager.errors import MountError, VolumeError
    from kubelet_trio.volumemanager.manager import MountedVolume, VolumeManager, referenced_volumes
    from kubelet_trio.volumemanager.mounter import Mounter, MountFailed, SystemMounter
    from kubelet_trio.volumemanager.paths import pod_container_dir, pod_dir, pod_etc_hosts_path

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "AtomicWriter": "kubelet_trio.volumemanager.atomic_writer",
    "FileProjection": "kubelet_trio.volumemanager.atomic_writer",
    "DataDirError": "kubelet_trio.volumemanager.datadirs",
    "make_pod_data_dirs": "kubelet_trio.volumemanager.datadirs",
    "setup_data_dirs": "kubelet_trio.volumemanager.datadirs",
    "MountError": "kubelet_trio.volumemanager.errors",
    "VolumeError": "kubelet_trio.volumemanager.errors",
    "MountedVolume": "kubelet_trio.volumemanager.manager",
    "VolumeManager": "kubelet_trio.volumemanager.manager",
    "referenced_volumes": "kubelet_trio.volumemanager.manager",
    "Mounter": "kubelet_trio.volumemanager.mounter",
    "MountFailed": "kubelet_trio.volumemanager.mounter",
    "SystemMounter": "kubelet_trio.volumemanager.mounter",
    "pod_container_dir": "kubelet_trio.volumemanager.paths",
    "pod_dir": "kubelet_trio.volumemanager.paths",
    "pod_etc_hosts_path": "kubelet_trio.volumemanager.paths",
}

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


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
