"""The kubelet's runtime manager: SyncPod against the CRI (Go: ``pkg/kubelet/kuberuntime``)."""

from __future__ import annotations

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
