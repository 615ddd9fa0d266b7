"""Fixtures for the runtime-manager tests: a SimRuntime and a KubeRuntimeManager sharing one wall clock,
under pytest-trio's ``autojump_clock`` (a MockClock: time only moves when every task sleeps).

pytest-trio only runs a test under a clock that is one of the *test's own* arguments, so every test
using these fixtures takes ``autojump_clock`` too (the factory checks).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from kubelet_trio.api import Container, Pod, default_pod
from kubelet_trio.clock import WallClock
from kubelet_trio.container.runtime import PodSyncResult
from kubelet_trio.container.types import PodStatus
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.kuberuntime import KubeRuntimeManager
from kubelet_trio.sim import SIM_ANNOTATION_PREFIX, SimRuntime

WALL_START_NS = 1_700_000_000 * 10**9
IMAGE = "registry.sim/kubelet-trio/app:1"
MISSING_IMAGE = "sim.invalid/kubelet-trio/nope:1"
NODE = "node-a"


@attrs.define(eq=False, kw_only=True)
class RecordingSim(SimRuntime):
    """SimRuntime that records StopContainer calls as ``(trio time, container id, timeout)`` and the
    image each ImageStatus asked for."""

    stop_calls: list[tuple[float, str, int]] = attrs.field(factory=list, init=False)
    image_status_calls: list[str] = attrs.field(factory=list, init=False)

    async def image_status(self, image: pb.ImageSpec, verbose: bool = False) -> pb.Image | None:
        self.image_status_calls.append(image.image)
        return await super().image_status(image, verbose)

    async def stop_container(self, container_id: str, timeout_seconds: int) -> None:
        self.stop_calls.append((trio.current_time(), container_id, timeout_seconds))
        await super().stop_container(container_id, timeout_seconds)


def make_pod(
    containers: list[dict[str, Any]],
    *,
    scripts: dict[str, str] | None = None,
    name: str = "web",
    namespace: str = "default",
    uid: str = "uid-1",
    init_containers: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    metadata: dict[str, Any] | None = None,
    **spec: Any,
) -> Pod:
    """A defaulted pod; ``scripts`` are SimRuntime behaviour scripts per container name."""
    annotations = {SIM_ANNOTATION_PREFIX + c: s for c, s in (scripts or {}).items()}
    data: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid, **(metadata or {})},
        "spec": {"containers": containers, **spec},
    }
    if annotations:
        data["metadata"]["annotations"] = annotations
    if labels:
        data["metadata"]["labels"] = labels
    if init_containers:
        data["spec"]["initContainers"] = init_containers
    return default_pod(Pod.from_dict(data))


def spec_of(pod: Pod, index: int = 0) -> Container:
    """The pod's ``index``-th app container spec."""
    assert pod.spec is not None and pod.spec.containers is not None
    return pod.spec.containers[index]


def app(name: str = "app", image: str = IMAGE, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": image, **extra}


@attrs.define(eq=False)
class Env:
    sim: RecordingSim
    mgr: KubeRuntimeManager
    clock: WallClock
    logs: Path
    events: list[tuple[str, str, str, str]]  # (pod uid, type, reason, message)

    async def status(self, pod: Pod) -> PodStatus:
        return await self.mgr.get_pod_status(pod.uid, pod.name, pod.namespace)

    async def sync(self, pod: Pod) -> PodSyncResult:
        return await self.mgr.sync_pod(pod, await self.status(pod))

    def event_reasons(self) -> list[str]:
        return [reason for _, _, reason, _ in self.events]

    async def containers(self, name: str | None = None) -> list[pb.ContainerStatus]:
        """Every container of the runtime (any node), oldest first, optionally of one name."""
        result = []
        for c in await self.sim.list_containers():
            status = (await self.sim.container_status(c.id)).status
            assert status is not None
            if name is None or (status.metadata is not None and status.metadata.name == name):
                result.append(status)
        return result

    async def sandboxes(self) -> list[pb.PodSandboxStatus]:
        result = []
        for s in await self.sim.list_pod_sandbox():
            status = (await self.sim.pod_sandbox_status(s.id)).status
            assert status is not None
            result.append(status)
        return result


EnvFactory = Callable[..., Awaitable[Env]]


@pytest.fixture
def make_env(autojump_clock: trio.testing.MockClock, tmp_path: Path) -> EnvFactory:
    """Build an Env inside the test's Trio run; keyword arguments go to the SimRuntime (or, for
    ``node_name``/``manager``, to the manager)."""

    async def factory(*, node_name: str = NODE, manager: dict[str, Any] | None = None, **sim: Any) -> Env:
        # pytest-trio only uses a clock passed to the test itself: tests must ask for autojump_clock.
        assert trio.lowlevel.current_clock() is autojump_clock, "the test must request autojump_clock"
        sim.setdefault("id_seed", 7)
        runtime = RecordingSim(wall_clock_start_ns=WALL_START_NS, **sim)
        clock = WallClock(base_wall_ns=WALL_START_NS, base_trio=trio.current_time())
        logs = tmp_path / "pods"
        events: list[tuple[str, str, str, str]] = []
        mgr = KubeRuntimeManager(
            runtime,
            node_name=node_name,
            clock=clock,
            pod_logs_dir=str(logs),
            events=lambda pod, type_, reason, message: events.append((pod.uid, type_, reason, message)),
            **(manager or {}),
        )
        return Env(runtime, mgr, clock, logs, events)

    return factory


@pytest.fixture
async def env(make_env: EnvFactory) -> Env:
    return await make_env()
