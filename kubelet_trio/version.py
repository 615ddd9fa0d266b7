"""This kubelet's version (Go: ``component-base/version``): the Kubernetes release whose kubelet it
follows, with the package version as build metadata, ``v1.36.0+kubelet-trio.0.1.0``.

The package version itself is declared once, here as ``__version__`` (``pyproject.toml`` reads it from
here, ``kubelet_trio.__version__`` re-exports it); the Node object's ``kubeletVersion``, ``--version`` and
the API client's user agent use it. It lives in this leaf module rather than in the package ``__init__`` so
that a module needing it does not import the package facade.
"""

from __future__ import annotations

import platform

__all__ = ["KUBELET_VERSION", "KUBERNETES_MINOR", "KUBERNETES_VERSION", "__version__", "raw_info"]

#: This package's version (the one place it is declared).
__version__ = "0.1.0"

#: The Kubernetes release whose kubelet this one follows (its API and its flags).
KUBERNETES_VERSION = "v1.36.0"
KUBELET_VERSION = f"{KUBERNETES_VERSION}+kubelet-trio.{__version__}"
#: ``1.36``: what Go puts in user agents such as ``kube-probe/1.36``.
KUBERNETES_MINOR = ".".join(KUBERNETES_VERSION.removeprefix("v").split(".")[:2])

_GO_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le", "s390x": "s390x"}


def raw_info() -> str:
    """``--version=raw``: Go's ``version.Info`` record as it prints it (``%#v``), with the Python runtime
    in place of the Go toolchain."""
    major, minor, _ = KUBERNETES_VERSION.removeprefix("v").split(".", 2)
    machine = platform.machine().lower()
    fields = {
        "Major": major,
        "Minor": minor,
        "GitVersion": KUBELET_VERSION,
        "GitCommit": "",
        "GitTreeState": "",
        "BuildDate": "",
        "GoVersion": "",
        "Compiler": f"{platform.python_implementation()} {platform.python_version()}",
        "Platform": f"{platform.system().lower()}/{_GO_ARCH.get(machine, machine)}",
    }
    return "version.Info{" + ", ".join(f"{key}:{_go_quote(value)}" for key, value in fields.items()) + "}"


def _go_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
