"""The public API: what ``kubelet_trio`` exports, pinned (as trio's ``test_exports`` does).

Changing this list is an API change: update the README's "Public API" section with it.
"""

from __future__ import annotations

import subprocess
import sys

import kubelet_trio

PUBLIC = [
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


def test_the_public_names_are_pinned() -> None:
    assert sorted(kubelet_trio.__all__) == PUBLIC


def test_every_public_name_resolves_to_its_defining_object() -> None:
    from kubelet_trio.api import Pod
    from kubelet_trio.kubelet_builder import open_kubelet
    from kubelet_trio.sim.runtime import SimRuntime
    from kubelet_trio.testing.node import open_sim_node

    for name in PUBLIC:
        assert getattr(kubelet_trio, name) is not None, name
        assert name in dir(kubelet_trio)
    assert kubelet_trio.Pod is Pod
    assert kubelet_trio.open_kubelet is open_kubelet
    assert kubelet_trio.SimRuntime is SimRuntime
    assert kubelet_trio.open_sim_node is open_sim_node


def test_star_import_gives_exactly_the_public_names() -> None:
    namespace: dict[str, object] = {}
    exec("from kubelet_trio import *", namespace)
    assert sorted(k for k in namespace if k != "__builtins__") == PUBLIC


def test_unknown_names_are_attribute_errors() -> None:
    try:
        kubelet_trio.no_such_name  # noqa: B018
    except AttributeError as err:
        assert "no_such_name" in str(err)
    else:
        raise AssertionError("expected AttributeError")


def test_importing_the_package_is_cheap() -> None:
    """The exports load on first use: ``import kubelet_trio`` pulls in neither Trio nor the node."""
    code = (
        "import sys, kubelet_trio; "
        "print(sorted(m for m in ('trio', 'kubelet_trio.kubelet') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"
