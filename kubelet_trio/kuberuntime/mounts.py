"""What the kubelet adds to a container beyond its image: mounts and the run options (Go:
``kubelet_pods.go`` ``GenerateRunContainerOptions`` / ``makeMounts``, ``kuberuntime_container.go``
``makeMounts`` for the termination message file).

:class:`RunOptionsGenerator` is the runtime manager's ``run_options`` seam: for each container start it
builds the environment (``env``/``envFrom``/downward API), expands ``$(VAR)`` in command and args, turns
``volumeMounts`` into CRI mounts (``subPath``/``subPathExpr``, ``readOnly``, ``mountPropagation``), adds
the pod's managed ``/etc/hosts`` and the termination message file, and the CRI resources. Any error
becomes the container's ``CreateContainerConfigError``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence

import attrs

from kubelet_trio.api import Container, Pod, VolumeMount
from kubelet_trio.cm.allocatable import NodeAllocatable
from kubelet_trio.container.expansion import expand_command_and_args, expand_subpath_expr
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.envvars import ServiceLister, service_env_map
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.kuberuntime.container import RunContainerOptions
from kubelet_trio.kuberuntime.envvars import INVALID_ENV_NAMES_REASON, make_environment_variables
from kubelet_trio.kuberuntime.resources import linux_container_resources
from kubelet_trio.kuberuntime.termination import create_termination_message_file
from kubelet_trio.network.hosts import ETC_HOSTS_PATH, hosts_file_content, write_hosts_file
from kubelet_trio.objects import NO_OBJECTS, EnvError, ObjectStore
from kubelet_trio.volumemanager.manager import MountedVolume, VolumeManager
from kubelet_trio.volumemanager.paths import pod_container_dir, pod_etc_hosts_path

__all__ = ["MountConfigError", "RunOptionsGenerator", "make_mounts", "translate_propagation"]

logger = logging.getLogger(__name__)

_PROPAGATION = {
    None: pb.MountPropagation.PROPAGATION_PRIVATE,
    "None": pb.MountPropagation.PROPAGATION_PRIVATE,
    "HostToContainer": pb.MountPropagation.PROPAGATION_HOST_TO_CONTAINER,
    "Bidirectional": pb.MountPropagation.PROPAGATION_BIDIRECTIONAL,
}


class MountConfigError(ValueError):
    """A volume mount cannot be made (unknown volume, bad subPath, ...)."""


def translate_propagation(mode: str | None) -> pb.MountPropagation:
    try:
        return _PROPAGATION[mode]
    except KeyError:
        raise MountConfigError(f'invalid MountPropagation mode: "{mode}"') from None


def _within(path: str, root: str) -> bool:
    real, base = os.path.realpath(path), os.path.realpath(root)
    return real == base or real.startswith(base.rstrip("/") + "/")


def _sub_path_host(
    container: Container, mount: VolumeMount, volume_path: str, envs: Sequence[tuple[str, str]]
) -> str:
    """The host path of a subPath mount, created like the volume's root when missing; it must stay inside
    the volume even through symlinks (Go prepares a safe bind mount; here the path is checked)."""
    sub_path = mount.sub_path or ""
    if mount.sub_path_expr:
        sub_path = expand_subpath_expr(mount, envs)
    if not sub_path:
        return volume_path
    if os.path.isabs(sub_path):
        raise MountConfigError(f"error SubPath `{sub_path}` must not be an absolute path")
    if ".." in sub_path.split("/"):
        raise MountConfigError(f"unable to provision SubPath `{sub_path}`: must not contain '..'")
    host = os.path.join(volume_path, sub_path)
    if not _within(host, volume_path):
        raise MountConfigError(
            f'failed to prepare subPath for volumeMount "{mount.name}" of container "{container.name}"'
        )
    if not os.path.lexists(host):
        mode = os.stat(volume_path).st_mode & 0o7777
        os.makedirs(host, exist_ok=True)
        os.chmod(host, mode)
    return host


def make_mounts(
    pod: Pod,
    container: Container,
    volumes: Mapping[str, MountedVolume],
    envs: Sequence[tuple[str, str]] = (),
) -> list[pb.Mount]:
    """The CRI mounts of ``container.volumeMounts``; blocking (subPath directories may be created)."""
    mounts: list[pb.Mount] = []
    for mount in container.volume_mounts or ():
        volume = volumes.get(mount.name or "")
        if volume is None:
            raise MountConfigError(
                f'cannot find volume "{mount.name}" to mount into container "{container.name}"'
            )
        if mount.recursive_read_only == "Enabled":
            raise MountConfigError("recursive read-only mount is not supported by this kubelet")
        host = _sub_path_host(container, mount, volume.host_path, envs)
        mounts.append(
            pb.Mount(
                container_path=mount.mount_path or "",
                host_path=host,
                readonly=bool(mount.read_only) or volume.read_only,
                propagation=translate_propagation(mount.mount_propagation),
            )
        )
    return mounts


def _read_node_hosts() -> str:
    try:
        with open(ETC_HOSTS_PATH, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


@attrs.define(eq=False, kw_only=True)
class RunOptionsGenerator:
    """``(pod, container, pod_ip) → RunContainerOptions`` for :class:`KubeRuntimeManager`."""

    root_dir: str
    volumes: VolumeManager
    host_ips: Sequence[str] = ()
    cluster_domain: str = ""
    objects: ObjectStore = NO_OBJECTS
    allocatable: NodeAllocatable | None = None
    run_sync: RunSync = run_in_thread
    #: The cluster's services (API mode): their variables go into every container's environment.
    services: ServiceLister | None = None

    def _service_env(self, pod: Pod) -> dict[str, str]:
        """Go: a pod from the API server waits until the services were listed once, so that no container
        starts without ``KUBERNETES_SERVICE_HOST``; a static pod does not wait."""
        if self.services is None:
            return {}
        if not self.services.has_synced() and not pod.is_static:
            raise EnvError("services have not yet been read at least once, cannot construct envvars")
        links = pod.spec is None or pod.spec.enable_service_links is not False
        return service_env_map(self.services.services(), pod.namespace, links)

    async def __call__(self, pod: Pod, container: Container, pod_ip: str) -> RunContainerOptions:
        pod_ips = (pod_ip,) if pod_ip else ()
        warnings: list[str] = []
        envs = make_environment_variables(
            pod,
            container,
            pod_ips=pod_ips,
            host_ips=self.host_ips,
            objects=self.objects,
            allocatable=self.allocatable,
            warnings=warnings,
            service_env=self._service_env(pod),
        )
        command, args = expand_command_and_args(container, envs)
        mounts = await self.run_sync(self._mounts, pod, container, pod_ips, envs)
        memory = self.allocatable.oom_memory_capacity if self.allocatable is not None else 0
        return RunContainerOptions(
            envs=tuple(envs),
            mounts=tuple(mounts),
            command=command,
            args=args,
            linux_resources=linux_container_resources(pod, container, memory),
            warnings=tuple((INVALID_ENV_NAMES_REASON, message) for message in warnings),
        )

    def _mounts(
        self, pod: Pod, container: Container, pod_ips: Sequence[str], envs: Sequence[tuple[str, str]]
    ) -> list[pb.Mount]:
        mounts = make_mounts(pod, container, self.volumes.mounted_volumes(pod.uid), envs)
        mounts_hosts = any(m.container_path == ETC_HOSTS_PATH for m in mounts)
        if pod_ips and not mounts_hosts:
            path = pod_etc_hosts_path(self.root_dir, pod.uid)
            host_network = bool(pod.spec and pod.spec.host_network)
            node_hosts = _read_node_hosts() if host_network else ""
            write_hosts_file(path, hosts_file_content(pod, pod_ips, self.cluster_domain, node_hosts))
            mounts.append(pb.Mount(container_path=ETC_HOSTS_PATH, host_path=path, selinux_relabel=True))
        if container.termination_message_path:
            directory = pod_container_dir(self.root_dir, pod.uid, container.name or "")
            path = create_termination_message_file(directory)
            mounts.append(
                pb.Mount(
                    container_path=container.termination_message_path, host_path=path, selinux_relabel=False
                )
            )
        return mounts
