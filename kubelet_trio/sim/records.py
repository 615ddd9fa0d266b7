"""SimRuntime's in-memory sandboxes and containers, and how they read as CRI messages.

A container's state is computed when it is read, not advanced by a task: one scripted to exit after D is
EXITED at any read at or after ``started_at + D``. Only forced exits (stop, kill, crash) are stored.
All times are wall-clock nanoseconds from :class:`~kubelet_trio.clock.WallClock`.
"""

from __future__ import annotations

import ipaddress

import attrs
import trio

from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.sim.images import SimImage
from kubelet_trio.sim.script import Behaviour
from kubelet_trio.sim.shell import View

SIGKILL_EXIT = 137  # 128 + SIGKILL
SIGTERM_EXIT = 143  # 128 + SIGTERM
START_ERROR_EXIT = 128  # containerd's exit code for a container that failed to start
COMPLETED, ERROR, START_ERROR = "Completed", "Error", "StartError"


def exit_reason(code: int) -> str:
    return COMPLETED if code == 0 else ERROR


@attrs.frozen
class Exit:
    """How and when a container ended."""

    at_ns: int
    code: int
    reason: str
    message: str = ""


@attrs.define(eq=False)
class SandboxRecord:
    id: str
    config: pb.PodSandboxConfig
    runtime_handler: str
    created_ns: int
    ip: str
    ready: bool = True
    network_closed: bool = False

    @property
    def metadata(self) -> pb.PodSandboxMetadata:
        metadata = self.config.metadata  # never bool(): a message's truth scans every field
        return metadata if metadata is not None else pb.PodSandboxMetadata()

    @property
    def state(self) -> pb.PodSandboxState:
        return pb.PodSandboxState.SANDBOX_READY if self.ready else pb.PodSandboxState.SANDBOX_NOTREADY

    def to_pb(self) -> pb.PodSandbox:
        return pb.PodSandbox(
            id=self.id,
            metadata=self.metadata,
            state=self.state,
            created_at=self.created_ns,
            labels=dict(self.config.labels),
            annotations=dict(self.config.annotations),
            runtime_handler=self.runtime_handler,
        )

    def status(self) -> pb.PodSandboxStatus:
        security = self.config.linux.security_context if self.config.linux is not None else None
        options = security.namespace_options if security is not None else None
        return pb.PodSandboxStatus(
            id=self.id,
            metadata=self.metadata,
            state=self.state,
            created_at=self.created_ns,
            # Like containerd: no IP once the network is torn down (and none reported for host network).
            network=pb.PodSandboxNetworkStatus(ip="" if self.network_closed else self.ip),
            linux=pb.LinuxPodSandboxStatus(
                namespaces=pb.Namespace(options=options if options is not None else pb.NamespaceOption())
            ),
            labels=dict(self.config.labels),
            annotations=dict(self.config.annotations),
            runtime_handler=self.runtime_handler,
        )


@attrs.define(eq=False)
class ContainerRecord:
    id: str
    sandbox_id: str
    config: pb.ContainerConfig
    image: SimImage
    behaviour: Behaviour
    log_path: str
    created_ns: int
    started_ns: int | None = None
    forced_exit: Exit | None = None
    starting: bool = False
    terminated: trio.Event = attrs.Factory(trio.Event)
    #: False when no script chose the behaviour: its command then decides it (:mod:`kubelet_trio.sim.shell`).
    scripted: bool = True
    argv: tuple[str, ...] = ()
    view: View | None = None
    pid: int = 0
    repeats_written: int = 0  # how many periods of ``behaviour.repeat`` are in the log

    @property
    def metadata(self) -> pb.ContainerMetadata:
        metadata = self.config.metadata  # never bool(): a message's truth scans every field
        return metadata if metadata is not None else pb.ContainerMetadata()

    def natural_exit(self) -> Exit | None:
        """The scripted exit, if the script has one and the container has started."""
        code = self.behaviour.exit_code
        if self.started_ns is None or code is None:
            return None
        reason = self.behaviour.exit_reason or exit_reason(code)
        return Exit(self.started_ns + self.behaviour.exit_after_ns, code, reason)

    def exit_at(self, now_ns: int) -> Exit | None:
        if self.forced_exit is not None:
            return self.forced_exit
        natural = self.natural_exit()
        return natural if natural is not None and natural.at_ns <= now_ns else None

    def state(self, now_ns: int) -> pb.ContainerState:
        if self.exit_at(now_ns) is not None:
            return pb.ContainerState.CONTAINER_EXITED
        if self.started_ns is None:
            return pb.ContainerState.CONTAINER_CREATED
        return pb.ContainerState.CONTAINER_RUNNING

    def terminate(self, exit_: Exit) -> bool:
        """End a running container (a no-op unless it is running at ``exit_.at_ns``)."""
        if self.state(exit_.at_ns) is not pb.ContainerState.CONTAINER_RUNNING:
            return False
        self.forced_exit = exit_
        self.terminated.set()
        return True

    def to_pb(self, now_ns: int) -> pb.Container:
        return pb.Container(
            id=self.id,
            pod_sandbox_id=self.sandbox_id,
            metadata=self.metadata,
            image=self.config.image,
            image_ref=self.image.id,
            state=self.state(now_ns),
            created_at=self.created_ns,
            labels=dict(self.config.labels),
            annotations=dict(self.config.annotations),
        )

    def status(self, now_ns: int, image_present: bool) -> pb.ContainerStatus:
        # Like containerd: while the image is present, report its first tag and first repo digest.
        spec, image_ref = self.config.image, self.image.id
        if image_present:
            if self.image.repo_tags:
                spec = pb.ImageSpec(image=self.image.repo_tags[0])
            if self.image.repo_digests:
                image_ref = self.image.repo_digests[0]
        exit_ = self.exit_at(now_ns)
        resources = self.config.linux.resources if self.config.linux is not None else None
        return pb.ContainerStatus(
            id=self.id,
            metadata=self.metadata,
            state=self.state(now_ns),
            created_at=self.created_ns,
            started_at=self.started_ns or 0,
            finished_at=exit_.at_ns if exit_ else 0,
            exit_code=exit_.code if exit_ else 0,
            image=spec,
            image_ref=image_ref,
            reason=exit_.reason if exit_ else "",
            message=exit_.message if exit_ else "",
            labels=dict(self.config.labels),
            annotations=dict(self.config.annotations),
            mounts=list(self.config.mounts),
            log_path=self.log_path,
            resources=pb.ContainerResources(
                linux=resources if resources is not None else pb.LinuxContainerResources()
            ),
        )


@attrs.define(eq=False)
class IpPool:
    """Hands out pod IPs from a CIDR in order (skipping the network address and the gateway ``.1``)."""

    network: ipaddress.IPv4Network | ipaddress.IPv6Network
    _in_use: set[str] = attrs.Factory(set)
    _next: int = 2

    @classmethod
    def for_cidr(cls, cidr: str) -> IpPool:
        return cls(ipaddress.ip_network(cidr, strict=False))

    def allocate(self) -> str:
        size = self.network.num_addresses
        for _ in range(max(size - 3, 1)):
            offset, self._next = self._next, self._next + 1
            if self._next >= size - 1:
                self._next = 2
            ip = str(self.network.network_address + offset)
            if ip not in self._in_use:
                self._in_use.add(ip)
                return ip
        raise RuntimeError(f"pod CIDR {self.network} is exhausted")

    def release(self, ip: str) -> None:
        self._in_use.discard(ip)
