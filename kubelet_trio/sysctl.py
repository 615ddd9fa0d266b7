"""Which pod sysctls this node runs (Go: ``pkg/kubelet/sysctl``: ``safe_sysctls.go``, ``namespace.go``,
``allowlist.go``).

``securityContext.sysctls`` are set by the runtime inside the pod's own namespaces (see
:func:`kubelet_trio.kuberuntime.sandbox.pod_sysctls`), so only sysctls the kernel namespaces may be used:
the *safe* ones (namespaced and without effect on other pods) always, others only when the node allows
them with ``--allowed-unsafe-sysctls`` (names, or prefixes ending in ``*``, each of which must be known to
be namespaced). A pod asking for anything else is rejected at admission (``SysctlForbidden``), as are
network sysctls in a host-network pod and IPC ones in a host-IPC pod, which would change the node's.
"""

from __future__ import annotations

import enum
import logging
import platform
import re
from collections.abc import Iterable, Mapping

import attrs

from kubelet_trio.api import Pod
from kubelet_trio.kuberuntime.sandbox import sysctl_dotted_name
from kubelet_trio.lifecycle.predicate import AdmitResult

__all__ = [
    "SAFE_SYSCTLS",
    "SYSCTL_FORBIDDEN",
    "SysctlAllowlist",
    "SysctlNamespace",
    "namespaced_by",
    "safe_sysctls",
]

logger = logging.getLogger(__name__)

SYSCTL_FORBIDDEN = "SysctlForbidden"

#: Safe sysctls, each with the first kernel that namespaces it ("" for all).
SAFE_SYSCTLS: Mapping[str, str] = {
    "kernel.shm_rmid_forced": "",
    "net.ipv4.ip_local_port_range": "",
    "net.ipv4.tcp_syncookies": "",
    "net.ipv4.ping_group_range": "",
    "net.ipv4.ip_unprivileged_port_start": "",
    "net.ipv4.tcp_keepalive_time": "",
    "net.ipv4.tcp_fin_timeout": "",
    "net.ipv4.tcp_keepalive_intvl": "",
    "net.ipv4.tcp_keepalive_probes": "",
    "net.ipv4.ip_local_reserved_ports": "3.16",
    "net.ipv4.tcp_rmem": "4.15",
    "net.ipv4.tcp_wmem": "4.15",
}

#: Go's ``IsValidSysctlPattern``: dot- or slash-separated segments, the last one may end in ``*``.
_SEGMENT = r"[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
_PATTERN = re.compile(rf"^({_SEGMENT}[./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]$")
_MAX_LENGTH = 253


class SysctlNamespace(enum.Enum):
    IPC = "ipc"
    NET = "net"


_BY_NAME = {"kernel.sem": SysctlNamespace.IPC}
_BY_PREFIX = {
    "kernel.shm": SysctlNamespace.IPC,
    "kernel.msg": SysctlNamespace.IPC,
    "fs.mqueue.": SysctlNamespace.IPC,
    "net.": SysctlNamespace.NET,
}


def namespaced_by(name: str) -> SysctlNamespace | None:
    """The kernel namespace that isolates sysctl ``name`` (dotted), None when it is not namespaced."""
    if name in _BY_NAME:
        return _BY_NAME[name]
    return next((ns for prefix, ns in _BY_PREFIX.items() if name.startswith(prefix)), None)


def _kernel(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", release)[:3])


def safe_sysctls(kernel_release: str | None = None) -> list[str]:
    """The safe sysctls this kernel namespaces (all of them when its version cannot be read)."""
    version = _kernel(kernel_release if kernel_release is not None else platform.release())
    return [
        name
        for name, minimum in SAFE_SYSCTLS.items()
        if not minimum or not version or version >= _kernel(minimum)
    ]


@attrs.frozen
class SysctlAllowlist:
    """The sysctls pods may set: exact names and prefixes, each with its namespace."""

    names: Mapping[str, SysctlNamespace]
    prefixes: Mapping[str, SysctlNamespace]

    @classmethod
    def build(cls, allowed_unsafe: Iterable[str] = (), kernel_release: str | None = None) -> SysctlAllowlist:
        """The safe sysctls plus ``allowed_unsafe`` (``--allowed-unsafe-sysctls``); raises ValueError for
        a malformed pattern or one the kernel does not namespace."""
        names: dict[str, SysctlNamespace] = {}
        prefixes: dict[str, SysctlNamespace] = {}
        for pattern in [*safe_sysctls(kernel_release), *allowed_unsafe]:
            if len(pattern) > _MAX_LENGTH or not _PATTERN.match(pattern):
                raise ValueError(
                    f"sysctl {pattern!r} must have at most {_MAX_LENGTH} characters and be a dot- or "
                    "slash-separated name, optionally ending in *"
                )
            dotted = sysctl_dotted_name(pattern)
            prefix = dotted.endswith("*")
            stem = dotted[:-1] if prefix else dotted
            namespace = namespaced_by(stem)
            if namespace is None:
                raise ValueError(f"sysctl {pattern!r} is not known to be namespaced")
            (prefixes if prefix else names)[stem] = namespace
        return cls(names, prefixes)

    def _check(self, name: str, host_network: bool, host_ipc: bool) -> str | None:
        """Why ``name`` is not allowed for this pod, or None."""
        dotted = sysctl_dotted_name(name)
        namespace = self.names.get(dotted)
        if namespace is None:
            namespace = next((ns for p, ns in self.prefixes.items() if dotted.startswith(p)), None)
        if namespace is None:
            return f'"{dotted}" not allowlisted'
        if (namespace is SysctlNamespace.IPC and host_ipc) or (
            namespace is SysctlNamespace.NET and host_network
        ):
            return f'"{dotted}" not allowed with host {namespace.value} enabled'
        return None

    def admit(self, pod: Pod) -> AdmitResult | None:
        """``SysctlForbidden`` for the first sysctl of the pod that may not be set here, else None."""
        spec = pod.spec
        context = spec.security_context if spec is not None else None
        for sysctl in (context.sysctls if context is not None else None) or ():
            assert spec is not None
            problem = self._check(sysctl.name or "", bool(spec.host_network), bool(spec.host_ipc))
            if problem is not None:
                return AdmitResult(SYSCTL_FORBIDDEN, f"forbidden sysctl: {problem}")
        return None
