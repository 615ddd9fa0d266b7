"""The kubelet's runtime manager: SyncPod against the CRI (Go: ``pkg/kubelet/kuberuntime``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.container.hash import hash_container
    from kubelet_trio.kuberuntime.actions import (
        ContainerToKill,
        PodActions,
        ProbeResults,
        compute_pod_actions,
        should_container_be_restarted,
    )
    from kubelet_trio.kuberuntime.backoff import Backoff
    from kubelet_trio.kuberuntime.container import (
        ContainerLifecycle,
        HookRunner,
        RunContainerOptions,
        RunOptionsProvider,
        StartContainerError,
        generate_container_config,
        plain_run_options,
    )
    from kubelet_trio.kuberuntime.gc import ContainerGC
    from kubelet_trio.kuberuntime.images import EventSink, ImageError, ImageManager
    from kubelet_trio.kuberuntime.labels import NODE_LABEL
    from kubelet_trio.kuberuntime.manager import KubeRuntimeManager, running_pod_from_status
    from kubelet_trio.kuberuntime.sandbox import generate_pod_sandbox_config, pod_sandbox_changed

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "hash_container": "kubelet_trio.container.hash",
    "ContainerToKill": "kubelet_trio.kuberuntime.actions",
    "PodActions": "kubelet_trio.kuberuntime.actions",
    "ProbeResults": "kubelet_trio.kuberuntime.actions",
    "compute_pod_actions": "kubelet_trio.kuberuntime.actions",
    "should_container_be_restarted": "kubelet_trio.kuberuntime.actions",
    "Backoff": "kubelet_trio.kuberuntime.backoff",
    "ContainerLifecycle": "kubelet_trio.kuberuntime.container",
    "HookRunner": "kubelet_trio.kuberuntime.container",
    "RunContainerOptions": "kubelet_trio.kuberuntime.container",
    "RunOptionsProvider": "kubelet_trio.kuberuntime.container",
    "StartContainerError": "kubelet_trio.kuberuntime.container",
    "generate_container_config": "kubelet_trio.kuberuntime.container",
    "plain_run_options": "kubelet_trio.kuberuntime.container",
    "ContainerGC": "kubelet_trio.kuberuntime.gc",
    "EventSink": "kubelet_trio.kuberuntime.images",
    "ImageError": "kubelet_trio.kuberuntime.images",
    "ImageManager": "kubelet_trio.kuberuntime.images",
    "NODE_LABEL": "kubelet_trio.kuberuntime.labels",
    "KubeRuntimeManager": "kubelet_trio.kuberuntime.manager",
    "running_pod_from_status": "kubelet_trio.kuberuntime.manager",
    "generate_pod_sandbox_config": "kubelet_trio.kuberuntime.sandbox",
    "pod_sandbox_changed": "kubelet_trio.kuberuntime.sandbox",
}

__all__ = [
    "NODE_LABEL",
    "Backoff",
    "ContainerGC",
    "ContainerLifecycle",
    "ContainerToKill",
    "EventSink",
    "HookRunner",
    "ImageError",
    "ImageManager",
    "KubeRuntimeManager",
    "PodActions",
    "ProbeResults",
    "RunContainerOptions",
    "RunOptionsProvider",
    "StartContainerError",
    "compute_pod_actions",
    "generate_container_config",
    "generate_pod_sandbox_config",
    "hash_container",
    "plain_run_options",
    "pod_sandbox_changed",
    "running_pod_from_status",
    "should_container_be_restarted",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
