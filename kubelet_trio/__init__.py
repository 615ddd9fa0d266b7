"""kubelet-trio: a Kubernetes node agent on Trio.

The public API (documented in the README, pinned by ``tests/test_exports.py``); everything else is
internal and may change. Names are imported on first use, so ``import kubelet_trio`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.api import (
        Container,
        ContainerPort,
        ContainerStatus,
        EnvVar,
        ManifestError,
        ObjectMeta,
        Pod,
        PodSpec,
        PodStatus,
        Probe,
        ResourceRequirements,
        Volume,
        default_pod,
        parse_manifest,
    )
    from kubelet_trio.apimode import ApiModeOptions
    from kubelet_trio.cri.remote import open_cri_runtime
    from kubelet_trio.cri.runtime import Runtime
    from kubelet_trio.kubelet import Kubelet, KubeletConfig
    from kubelet_trio.kubelet_builder import KubeletDeps, KubeletNode, open_kubelet
    from kubelet_trio.sim.runtime import SimRuntime
    from kubelet_trio.testing.node import SimNode, open_node, open_sim_node
    from kubelet_trio.version import __version__

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "__version__": "kubelet_trio.version",  # declared there, next to the Kubernetes version it follows
    # the node: one composition root
    "open_kubelet": "kubelet_trio.kubelet_builder",
    "KubeletDeps": "kubelet_trio.kubelet_builder",
    "KubeletNode": "kubelet_trio.kubelet_builder",
    "KubeletConfig": "kubelet_trio.kubelet",
    "Kubelet": "kubelet_trio.kubelet",
    "ApiModeOptions": "kubelet_trio.apimode",
    # embedding and test harness
    "open_node": "kubelet_trio.testing.node",
    "open_sim_node": "kubelet_trio.testing.node",
    "SimNode": "kubelet_trio.testing.node",
    # runtimes
    "Runtime": "kubelet_trio.cri.runtime",
    "SimRuntime": "kubelet_trio.sim.runtime",
    "open_cri_runtime": "kubelet_trio.cri.remote",
    # the pod model
    "Pod": "kubelet_trio.api",
    "ObjectMeta": "kubelet_trio.api",
    "PodSpec": "kubelet_trio.api",
    "Container": "kubelet_trio.api",
    "ContainerPort": "kubelet_trio.api",
    "EnvVar": "kubelet_trio.api",
    "Probe": "kubelet_trio.api",
    "ResourceRequirements": "kubelet_trio.api",
    "Volume": "kubelet_trio.api",
    "PodStatus": "kubelet_trio.api",
    "ContainerStatus": "kubelet_trio.api",
    "ManifestError": "kubelet_trio.api",
    "default_pod": "kubelet_trio.api",
    "parse_manifest": "kubelet_trio.api",
}

__all__ = [
    "ApiModeOptions",
    "Container",
    "ContainerPort",
    "ContainerStatus",
    "EnvVar",
    "Kubelet",
    "KubeletConfig",
    "KubeletDeps",
    "KubeletNode",
    "ManifestError",
    "ObjectMeta",
    "Pod",
    "PodSpec",
    "PodStatus",
    "Probe",
    "ResourceRequirements",
    "Runtime",
    "SimNode",
    "SimRuntime",
    "Volume",
    "__version__",
    "default_pod",
    "open_cri_runtime",
    "open_kubelet",
    "open_node",
    "open_sim_node",
    "parse_manifest",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
