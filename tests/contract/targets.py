"""What a contract test needs to know about the runtime under test."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from contextlib import aclosing

import attrs
import trio
import trio_util

from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.runtime import Runtime
from kubelet_trio.testing.env import stop_and_remove_sandbox

SIM_ANNOTATION_PREFIX = "sim.kubelet-trio.io/"
TEST_LABEL = "contract.kubelet-trio.io/test"


@attrs.frozen
class Behaviour:
    """One container behaviour, said twice: as a real command and as a SimRuntime script."""

    command: list[str]
    sim: str


FOREVER = Behaviour(["sh", "-c", "trap 'exit 143' TERM; sleep 3600 & wait"], "run")
IGNORES_SIGTERM = Behaviour(["sh", "-c", "trap '' TERM; sleep 3600 & wait"], "ignore-sigterm")
EXIT_3_AFTER_1S = Behaviour(
    ["sh", "-c", "echo hello; echo world; sleep 1; exit 3"], 'print "hello" "world"; exit 3 after 1s'
)
EXIT_0 = Behaviour(["sh", "-c", "echo done"], 'print "done"; exit 0')
EXEC_SCRIPTED = Behaviour(FOREVER.command, 'run; exec sh -c "exit 4" -> 4; exec sleep 30 -> 0 after 30s')


@attrs.define(eq=False)
class Target:
    """A runtime plus the image references that exist (or not) for it."""

    name: str
    runtime: Runtime
    image: str
    missing_image: str
    log_root: trio.Path
    created_sandboxes: list[str] = attrs.Factory(list)

    async def new_sandbox(
        self,
        behaviours: dict[str, Behaviour] | None = None,
        *,
        name: str | None = None,
        uid: str | None = None,
        attempt: int = 0,
        labels: dict[str, str] | None = None,
    ) -> tuple[str, pb.PodSandboxConfig]:
        uid = uid or secrets.token_hex(8)
        name = name or f"pod-{uid[:6]}"
        annotations = {"contract": "yes"}
        for container, behaviour in (behaviours or {}).items():
            annotations[SIM_ANNOTATION_PREFIX + container] = behaviour.sim
        log_dir = self.log_root / f"default_{name}_{uid}"
        await log_dir.mkdir(parents=True, exist_ok=True)
        config = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, uid=uid, namespace="default", attempt=attempt),
            hostname=name,
            log_directory=str(log_dir),
            labels={TEST_LABEL: "1", **(labels or {})},
            annotations=annotations,
            linux=pb.LinuxPodSandboxConfig(cgroup_parent=""),
        )
        sandbox_id = await self.runtime.run_pod_sandbox(config)
        self.created_sandboxes.append(sandbox_id)
        return sandbox_id, config

    async def new_container(
        self,
        sandbox_id: str,
        sandbox_config: pb.PodSandboxConfig,
        name: str,
        behaviour: Behaviour,
        *,
        attempt: int = 0,
        labels: dict[str, str] | None = None,
        start: bool = True,
    ) -> str:
        await self.runtime.pull_image(pb.ImageSpec(image=self.image))
        config = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=name, attempt=attempt),
            image=pb.ImageSpec(image=self.image),
            command=behaviour.command,
            log_path=f"{name}/{attempt}.log",
            labels={TEST_LABEL: "1", **(labels or {})},
            annotations={"container": name},
            linux=pb.LinuxContainerConfig(resources=pb.LinuxContainerResources()),
        )
        container_id = await self.runtime.create_container(sandbox_id, config, sandbox_config)
        if start:
            await self.runtime.start_container(container_id)
        return container_id

    async def cleanup(self) -> None:
        with trio.move_on_after(60, shield=True):
            for sandbox_id in self.created_sandboxes:
                await stop_and_remove_sandbox(self.runtime, sandbox_id)


async def eventually_status(
    runtime: Runtime,
    container_id: str,
    done: Callable[[pb.ContainerStatus], bool],
    *,
    limit: float = 20.0,
) -> pb.ContainerStatus:
    """Re-read a container's status (like PLEG does) until ``done`` holds, failing after ``limit`` s."""
    with trio.fail_after(limit):
        async with aclosing(trio_util.periodic(0.05)) as ticks:
            async for _ in ticks:
                status = (await runtime.container_status(container_id)).status
                assert status is not None
                if done(status):
                    return status
    raise AssertionError("unreachable")


def running(status: pb.ContainerStatus) -> bool:
    return status.state is pb.ContainerState.CONTAINER_RUNNING


def exited(status: pb.ContainerStatus) -> bool:
    return status.state is pb.ContainerState.CONTAINER_EXITED
