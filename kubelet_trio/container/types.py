"""What the kubelet knows about a pod from the runtime, independent of the CRI's wire types.

Mirrors ``kubecontainer.PodStatus``/``Status``/``Pod``: the PLEG builds these on every relist, the pod
cache stores them, ``computePodActions`` and status generation read them. Timestamps are CRI nanoseconds
since the epoch (0 = unset), so nothing is lost converting from and to the runtime.
"""

from __future__ import annotations

import enum

import attrs


class ContainerState(enum.Enum):
    CREATED = "created"
    RUNNING = "running"
    EXITED = "exited"
    UNKNOWN = "unknown"


@attrs.frozen
class ContainerResources:
    """The CPU and memory the runtime reports a container runs with (CRI ``LinuxContainerResources``);
    ``memory_request`` (bytes), which no cgroup holds, is the one the kubelet last actuated (Go fills it
    in ``toKubeContainerStatus``), None when unknown."""

    cpu_shares: int = 0
    cpu_quota: int = 0
    cpu_period: int = 0
    memory_limit: int = 0
    memory_request: int | None = None


@attrs.frozen
class ContainerStatus:
    """One container instance as the runtime reports it (kubecontainer.Status)."""

    id: str
    name: str
    state: ContainerState
    created_at: int = 0
    started_at: int = 0
    finished_at: int = 0
    exit_code: int = 0
    image: str = ""
    image_ref: str = ""
    hash: str = ""  # the spec hash the kubelet stamped on the container
    restart_count: int = 0
    reason: str = ""
    message: str = ""
    runtime_type: str = "containerd"  # "<type>://<id>" is the API's containerID
    resources: ContainerResources | None = None  # None: the runtime reported none

    @property
    def container_id(self) -> str:
        return f"{self.runtime_type}://{self.id}"


@attrs.frozen
class SandboxStatus:
    """One sandbox instance (the useful part of CRI PodSandboxStatus)."""

    id: str
    attempt: int
    ready: bool
    created_at: int = 0
    ip: str = ""
    additional_ips: tuple[str, ...] = ()
    host_network: bool = False


@attrs.frozen
class PodStatus:
    """Everything the runtime has for one pod UID (kubecontainer.PodStatus).

    ``container_statuses`` and ``sandbox_statuses`` are sorted newest first (by created_at), so the first
    entry for a name is the current instance and the second is its previous one.
    """

    uid: str
    name: str = ""
    namespace: str = ""
    ips: tuple[str, ...] = ()
    container_statuses: tuple[ContainerStatus, ...] = ()
    sandbox_statuses: tuple[SandboxStatus, ...] = ()
    timestamp: float = 0.0  # trio time of the relist that produced it

    def find(self, name: str) -> ContainerStatus | None:
        """The newest instance of the named container."""
        return next((c for c in self.container_statuses if c.name == name), None)

    def instances(self, name: str) -> list[ContainerStatus]:
        return [c for c in self.container_statuses if c.name == name]

    @property
    def running_containers(self) -> list[ContainerStatus]:
        return [c for c in self.container_statuses if c.state is ContainerState.RUNNING]

    @property
    def could_be_running(self) -> bool:
        """A container runs or a sandbox is ready: the pod still holds something to stop."""
        return any(c.state is ContainerState.RUNNING for c in self.container_statuses) or any(
            s.ready for s in self.sandbox_statuses
        )


@attrs.frozen
class RuntimeContainer:
    """A container or sandbox as listed by the runtime (for PLEG diffs and orphan cleanup)."""

    id: str
    name: str
    state: ContainerState
    created_at: int = 0
    hash: str = ""


@attrs.frozen
class RuntimePod:
    """The runtime's grouping of containers and sandboxes by pod UID (kubecontainer.Pod)."""

    uid: str
    name: str
    namespace: str
    containers: tuple[RuntimeContainer, ...] = ()
    sandboxes: tuple[RuntimeContainer, ...] = ()

    @property
    def full_name(self) -> str:
        return f"{self.name}_{self.namespace}"
