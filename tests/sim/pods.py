"""A small pod builder for the SimRuntime tests (sandboxes and containers with the boilerplate filled in)."""

from __future__ import annotations

import itertools
from pathlib import Path

import attrs

from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.sim.runtime import SIM_ANNOTATION_PREFIX, SimRuntime

IMAGE = "registry.sim/kubelet-trio/busybox:1.36"
WALL_START_NS = 1_700_000_000_123_456_000  # 2023-11-14T22:13:20.123456Z


@attrs.define(eq=False)
class Pods:
    """Creates sandboxes and containers on a SimRuntime with the boilerplate filled in."""

    sim: SimRuntime
    log_root: Path
    image: str = IMAGE
    _counter: itertools.count[int] = attrs.Factory(lambda: itertools.count(1))

    def sandbox_config(
        self,
        scripts: dict[str, str] | None = None,
        *,
        name: str | None = None,
        uid: str | None = None,
        attempt: int = 0,
        labels: dict[str, str] | None = None,
        host_network: bool = False,
        log_directory: str | None = None,
    ) -> pb.PodSandboxConfig:
        n = next(self._counter)
        name = name or f"pod-{n}"
        uid = uid or f"uid-{n}"
        linux = pb.LinuxPodSandboxConfig()
        if host_network:
            linux.security_context = pb.LinuxSandboxSecurityContext(
                namespace_options=pb.NamespaceOption(network=pb.NamespaceMode.NODE)
            )
        return pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, uid=uid, namespace="default", attempt=attempt),
            hostname=name,
            log_directory=str(self.log_root / f"default_{name}_{uid}")
            if log_directory is None
            else log_directory,
            labels=labels or {},
            annotations={SIM_ANNOTATION_PREFIX + c: s for c, s in (scripts or {}).items()},
            linux=linux,
        )

    async def sandbox(
        self, scripts: dict[str, str] | None = None, **kwargs: object
    ) -> tuple[str, pb.PodSandboxConfig]:
        config = self.sandbox_config(scripts, **kwargs)  # type: ignore[arg-type]
        return await self.sim.run_pod_sandbox(config), config

    async def container(
        self,
        sandbox_id: str,
        sandbox_config: pb.PodSandboxConfig,
        name: str,
        *,
        attempt: int = 0,
        image: str | None = None,
        labels: dict[str, str] | None = None,
        start: bool = True,
    ) -> str:
        config = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=name, attempt=attempt),
            image=pb.ImageSpec(image=image or self.image),
            log_path=f"{name}/{attempt}.log",
            labels=labels or {},
            annotations={"container": name},
            mounts=[pb.Mount(container_path="/data", host_path="/srv/data")],
        )
        container_id = await self.sim.create_container(sandbox_id, config, sandbox_config)
        if start:
            await self.sim.start_container(container_id)
        return container_id

    async def status(self, container_id: str) -> pb.ContainerStatus:
        status = (await self.sim.container_status(container_id)).status
        assert status is not None
        return status
