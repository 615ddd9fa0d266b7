"""Where a pod's files live under the kubelet's root directory (Go: ``kubelet_getters.go``)::

<root>/pods/<uid>/                              the pod directory
<root>/pods/<uid>/etc-hosts                     the managed /etc/hosts
<root>/pods/<uid>/containers/<name>/<random>    termination message files
<root>/pods/<uid>/volumes/<plugin>/<volume>     volumes (kubernetes.io~empty-dir, ...)
"""

from __future__ import annotations

import os

__all__ = [
    "CONFIG_MAP_PLUGIN",
    "DOWNWARD_API_PLUGIN",
    "EMPTY_DIR_PLUGIN",
    "PROJECTED_PLUGIN",
    "SECRET_PLUGIN",
    "pod_container_dir",
    "pod_dir",
    "pod_etc_hosts_path",
    "pod_volume_dir",
    "pods_dir",
]

EMPTY_DIR_PLUGIN = "kubernetes.io~empty-dir"
DOWNWARD_API_PLUGIN = "kubernetes.io~downward-api"
CONFIG_MAP_PLUGIN = "kubernetes.io~configmap"
SECRET_PLUGIN = "kubernetes.io~secret"
PROJECTED_PLUGIN = "kubernetes.io~projected"


def pods_dir(root: str) -> str:
    return os.path.join(root, "pods")


def pod_dir(root: str, uid: str) -> str:
    return os.path.join(pods_dir(root), uid)


def pod_etc_hosts_path(root: str, uid: str) -> str:
    return os.path.join(pod_dir(root, uid), "etc-hosts")


def pod_container_dir(root: str, uid: str, container: str) -> str:
    return os.path.join(pod_dir(root, uid), "containers", container)


def pod_volume_dir(root: str, uid: str, plugin: str, volume: str) -> str:
    return os.path.join(pod_dir(root, uid), "volumes", plugin, volume)
