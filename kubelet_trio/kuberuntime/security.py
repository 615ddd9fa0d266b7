"""The CRI security context of a container (Go: ``pkg/securitycontext`` ``DetermineEffectiveSecurityContext``,
``kuberuntime/security_context.go``, ``kuberuntime_container.go`` ``verifyRunAsNonRoot`` /
``getImageUser``).

The pod's security context supplies defaults the container's overrides; ``fsGroup`` and
``supplementalGroups`` become supplemental groups; without ``runAsUser`` the image's user applies, and
``runAsNonRoot`` refuses an image that would run as root (an image that names no user runs as root).
"""

from __future__ import annotations

import attrs

from kubelet_trio.api import Container, Pod
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.kuberuntime.sandbox import namespaces_for_pod
from kubelet_trio.securitycontext import effective_security_context

__all__ = [
    "DEFAULT_MASKED_PATHS",
    "DEFAULT_READONLY_PATHS",
    "ImageUser",
    "SecurityContextError",
    "linux_container_security_context",
    "verify_run_as_non_root",
]

DEFAULT_MASKED_PATHS = (
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
)
DEFAULT_READONLY_PATHS = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")


class SecurityContextError(Exception):
    """The container cannot run under its security context (CreateContainerConfigError)."""


@attrs.frozen
class ImageUser:
    """The user an image runs as: a numeric uid, or a user name (``uid is None``)."""

    uid: int | None = 0
    username: str = ""

    @classmethod
    def from_image(cls, image: pb.Image | None) -> ImageUser:
        """``getImageUser``: the uid if set, else the user name, else root."""
        if image is not None:
            if image.uid is not None:
                return cls(uid=image.uid.value)
            if image.username:
                return cls(uid=None, username=image.username)
        return cls(uid=0)


def _format_pod(pod: Pod) -> str:
    return f"{pod.name}_{pod.namespace}({pod.uid})"


def verify_run_as_non_root(pod: Pod, container: Container, user: ImageUser) -> None:
    """``verifyRunAsNonRoot``: raise :class:`SecurityContextError` if ``runAsNonRoot`` is violated."""
    effective = effective_security_context(pod, container)
    if not effective.run_as_non_root:
        return
    who = f'(pod: "{_format_pod(pod)}", container: {container.name})'
    if effective.run_as_user is not None:
        if effective.run_as_user == 0:
            raise SecurityContextError(f"container's runAsUser breaks non-root policy {who}")
        return
    if user.uid == 0:
        raise SecurityContextError(f"container has runAsNonRoot and image will run as root {who}")
    if user.uid is None and user.username:
        raise SecurityContextError(
            f"container has runAsNonRoot and image has non-numeric user ({user.username}), "
            f"cannot verify user is non-root {who}"
        )


def linux_container_security_context(
    pod: Pod, container: Container, user: ImageUser | None = None, *, target_id: str = ""
) -> pb.LinuxContainerSecurityContext:
    """``determineEffectiveSecurityContext``: privileged, read-only rootfs, capabilities, runAsUser /
    runAsGroup (the image's user when unset), no_new_privs from allowPrivilegeEscalation=false,
    supplemental groups (fsGroup first), namespaces, and the masked/read-only /proc paths.

    ``target_id``: an ephemeral container's target; unless the pod shares one PID namespace already, the
    container joins the target's (``NamespaceMode.TARGET``), so a debugger sees its processes."""
    sc = effective_security_context(pod, container)
    namespaces = namespaces_for_pod(pod)
    if target_id and namespaces.pid is pb.NamespaceMode.CONTAINER:
        namespaces.pid = pb.NamespaceMode.TARGET
        namespaces.target_id = target_id
    security = pb.LinuxContainerSecurityContext(
        namespace_options=namespaces,
        privileged=bool(sc.privileged),
        readonly_rootfs=bool(sc.read_only_root_filesystem),
        no_new_privs=sc.allow_privilege_escalation is False,
    )
    if sc.capabilities is not None:
        security.capabilities = pb.Capability(
            add_capabilities=list(sc.capabilities.add or ()),
            drop_capabilities=list(sc.capabilities.drop or ()),
        )
    if sc.run_as_user is not None:
        security.run_as_user = pb.Int64Value(value=sc.run_as_user)
    elif user is not None:
        if user.uid is not None:
            security.run_as_user = pb.Int64Value(value=user.uid)
        security.run_as_username = user.username
    if sc.run_as_group is not None:
        security.run_as_group = pb.Int64Value(value=sc.run_as_group)
    pod_sc = pod.spec.security_context if pod.spec else None
    groups: list[int] = []
    if pod_sc is not None:
        if pod_sc.fs_group is not None:
            groups.append(pod_sc.fs_group)
        groups.extend(pod_sc.supplemental_groups or ())
    security.supplemental_groups = groups
    if not sc.privileged and sc.proc_mount != "Unmasked":
        security.masked_paths = list(DEFAULT_MASKED_PATHS)
        security.readonly_paths = list(DEFAULT_READONLY_PATHS)
    return security
