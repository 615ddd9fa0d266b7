"""SimRuntime served over a real CRI socket, driven by raw grpclib stubs (real clock: grpclib's deadlines
are wall-clock), plus the ``kubelet-trio sim-cri`` command as a subprocess."""

from __future__ import annotations

import contextvars
import functools
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
import trio_util
from grpclib import GRPCError, Status
from grpclib.client import Channel

from kubelet_trio.aiobridge import AsyncioThread, open_asyncio_thread
from kubelet_trio.cri import errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.gen.runtime.v1 import services
from kubelet_trio.cri.remote import open_cri_runtime
from kubelet_trio.sim.runtime import SIM_ANNOTATION_PREFIX, SimRuntime
from kubelet_trio.sim.server import serve_sim_cri

REPO = Path(__file__).resolve().parents[2]
IMAGE = "registry.sim/kubelet-trio/busybox:1.36"
TEST_DEADLINE = 30  # seconds: every real-I/O test carries an absolute deadline


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    """A short directory (unix socket paths are limited to ~108 bytes)."""
    with tempfile.TemporaryDirectory(prefix="sim-cri-") as d:
        yield Path(d)


@asynccontextmanager
async def stubs(path: Path) -> AsyncIterator[tuple[services.RuntimeServiceStub, services.ImageServiceStub]]:
    """An independent client: its own asyncio loop (thread) and grpclib channel."""
    async with open_asyncio_thread() as bridge:
        channel = await bridge.run_sync(Channel, path=str(path))
        token = _BRIDGE.set(bridge)
        try:
            yield services.RuntimeServiceStub(channel), services.ImageServiceStub(channel)
        finally:
            _BRIDGE.reset(token)
            await bridge.run_sync(channel.close)


_BRIDGE: contextvars.ContextVar[AsyncioThread] = contextvars.ContextVar("bridge")


def aio(fn: Any) -> Any:
    """Call a grpclib stub method from Trio, on the current client's asyncio loop."""
    return functools.partial(_BRIDGE.get().call, fn)


@asynccontextmanager
async def served(sim: SimRuntime, path: Path) -> AsyncIterator[None]:
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_sim_cri, sim, str(path))
        yield
        nursery.cancel_scope.cancel()


async def test_cri_calls_over_the_socket(socket_dir: Path) -> None:
    sock = socket_dir / "sim.sock"
    sandbox_config = pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name="web", namespace="default", uid="u1"),
        log_directory=str(socket_dir / "logs"),
        annotations={SIM_ANNOTATION_PREFIX + "app": 'print "hello"; exec ready -> 0 "yes"'},
    )
    container_config = pb.ContainerConfig(
        metadata=pb.ContainerMetadata(name="app"), image=pb.ImageSpec(image=IMAGE), log_path="app/0.log"
    )
    with trio.fail_after(TEST_DEADLINE):
        async with served(SimRuntime(), sock), stubs(sock) as (runtime, images):
            call = aio
            version = await call(runtime.version)(pb.VersionRequest(version="v1"))
            assert (version.runtime_name, version.runtime_api_version) == ("kubelet-trio-sim", "v1")

            pulled = await call(images.pull_image)(pb.PullImageRequest(image=pb.ImageSpec(image=IMAGE)))
            assert pulled.image_ref.startswith("sha256:")
            sandbox = await call(runtime.run_pod_sandbox)(pb.RunPodSandboxRequest(config=sandbox_config))
            created = await call(runtime.create_container)(
                pb.CreateContainerRequest(
                    pod_sandbox_id=sandbox.pod_sandbox_id,
                    config=container_config,
                    sandbox_config=sandbox_config,
                )
            )
            cid = created.container_id
            await call(runtime.start_container)(pb.StartContainerRequest(container_id=cid))

            listed = await call(runtime.list_containers)(
                pb.ListContainersRequest(filter=pb.ContainerFilter(pod_sandbox_id=sandbox.pod_sandbox_id))
            )
            assert [(c.id, c.state) for c in listed.containers] == [
                (cid, pb.ContainerState.CONTAINER_RUNNING)
            ]
            status = (
                await call(runtime.container_status)(pb.ContainerStatusRequest(container_id=cid))
            ).status
            assert status is not None
            assert status.state is pb.ContainerState.CONTAINER_RUNNING
            assert status.metadata == pb.ContainerMetadata(name="app")
            assert (await trio.Path(status.log_path).read_text()).endswith(" stdout F hello\n")
            answer = await call(runtime.exec_sync)(
                pb.ExecSyncRequest(container_id=cid, cmd=["ready"], timeout=5)
            )
            assert (answer.exit_code, answer.stdout) == (0, b"yes")

            missing = await call(images.image_status)(
                pb.ImageStatusRequest(image=pb.ImageSpec(image="nope:1"))
            )
            assert missing.image is None


async def test_errors_map_to_grpc_statuses(socket_dir: Path) -> None:
    sock = socket_dir / "sim.sock"
    config = pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name="web", namespace="default", uid="u1"),
        annotations={
            SIM_ANNOTATION_PREFIX + "bad": "explode",
            SIM_ANNOTATION_PREFIX + "slow": "exec s -> 0 after 1h",
        },
    )

    async def grpc_error(coro_fn: object, request: object) -> GRPCError:
        with pytest.raises(GRPCError) as info:
            await aio(coro_fn)(request)  # type: ignore[arg-type]
        return info.value

    with trio.fail_after(TEST_DEADLINE):
        async with served(SimRuntime(preloaded_images=[IMAGE]), sock), stubs(sock) as (runtime, images):
            err = await grpc_error(runtime.container_status, pb.ContainerStatusRequest(container_id="f" * 64))
            assert err.status is Status.NOT_FOUND
            assert err.message == f'an error occurred when try to find container "{"f" * 64}": not found'

            err = await grpc_error(
                images.pull_image, pb.PullImageRequest(image=pb.ImageSpec(image="sim.invalid/x:1"))
            )
            assert err.status is Status.NOT_FOUND
            assert err.message is not None and "sim.invalid/x:1: not found" in err.message

            sandbox = await aio(runtime.run_pod_sandbox)(pb.RunPodSandboxRequest(config=config))
            err = await grpc_error(runtime.run_pod_sandbox, pb.RunPodSandboxRequest(config=config))
            assert err.status is Status.UNKNOWN
            assert err.message is not None and "is reserved for" in err.message

            def create(name: str) -> pb.CreateContainerRequest:
                return pb.CreateContainerRequest(
                    pod_sandbox_id=sandbox.pod_sandbox_id,
                    config=pb.ContainerConfig(
                        metadata=pb.ContainerMetadata(name=name), image=pb.ImageSpec(image=IMAGE)
                    ),
                    sandbox_config=config,
                )

            err = await grpc_error(runtime.create_container, create("bad"))
            assert err.status is Status.INVALID_ARGUMENT
            assert err.message is not None and "clause 1 'explode'" in err.message

            slow = await aio(runtime.create_container)(create("slow"))
            await aio(runtime.start_container)(pb.StartContainerRequest(container_id=slow.container_id))
            err = await grpc_error(
                runtime.exec_sync, pb.ExecSyncRequest(container_id=slow.container_id, cmd=["s"], timeout=1)
            )
            assert err.status is Status.DEADLINE_EXCEEDED
            assert (
                err.message == "failed to exec in container: timeout 1s exceeded: context deadline exceeded"
            )


async def test_shutdown_removes_the_socket(socket_dir: Path) -> None:
    sock = socket_dir / "sim.sock"
    with trio.fail_after(TEST_DEADLINE):
        async with served(SimRuntime(), sock):
            assert sock.is_socket()
        assert not sock.exists()


async def test_sim_cri_command(socket_dir: Path) -> None:
    sock = socket_dir / "x.sock"
    command = [sys.executable, "-m", "kubelet_trio", "sim-cri", "--listen", f"unix://{sock}"]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    done: list[subprocess.CompletedProcess[bytes]] = []

    async def run(task_status: trio.TaskStatus[trio.Process] = trio.TASK_STATUS_IGNORED) -> None:
        done.append(
            await trio.run_process(
                command, capture_stderr=True, check=False, env=env, task_status=task_status
            )
        )

    with trio.fail_after(TEST_DEADLINE):
        async with trio.open_nursery() as nursery:
            process: trio.Process = await nursery.start(run)
            async with aclosing(trio_util.periodic(0.05)) as ticks:
                async for _ in ticks:
                    if await trio.Path(sock).exists() or process.returncode is not None:
                        break
            async with stubs(sock) as (runtime, _images):
                version = await aio(runtime.version)(pb.VersionRequest(version="v1"))
                # with no flag, the CRI's answer: stopping what does not exist succeeds
                await aio(runtime.stop_container)(pb.StopContainerRequest(container_id="f" * 64))
            assert version.runtime_name == "kubelet-trio-sim"
            process.send_signal(signal.SIGTERM)

    [completed] = done
    assert completed.returncode == 0, completed.stderr.decode()
    [serving] = [line for line in completed.stderr.splitlines() if b"serving CRI on" in line]
    assert f"serving CRI on unix://{sock}".encode() in serving and b"pod_cidr=127." in serving
    assert not sock.exists()


async def test_shutdown_drops_in_flight_calls(socket_dir: Path) -> None:
    """Stopping the server ends hanging calls (the client sees the runtime go away) instead of leaving
    the connection open forever."""
    sock = socket_dir / "sim.sock"
    sim = SimRuntime(preloaded_images=[IMAGE])
    config = pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name="web", namespace="default", uid="u1"),
        annotations={SIM_ANNOTATION_PREFIX + "app": "exec hang -> 0 after 1h"},
    )
    container = pb.ContainerConfig(metadata=pb.ContainerMetadata(name="app"), image=pb.ImageSpec(image=IMAGE))
    with trio.fail_after(TEST_DEADLINE):
        async with trio.open_nursery() as nursery:
            server_scope = trio.CancelScope()

            async def server(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
                with server_scope:
                    await serve_sim_cri(sim, str(sock), task_status=task_status)

            await nursery.start(server)
            async with open_cri_runtime(f"unix://{sock}", request_timeout=TEST_DEADLINE) as runtime:
                sandbox_id = await runtime.run_pod_sandbox(config)
                cid = await runtime.create_container(sandbox_id, container, config)
                await runtime.start_container(cid)
                with pytest.RaisesGroup(errors.UnavailableError):
                    async with trio.open_nursery() as calls:
                        calls.start_soon(runtime.exec_sync, cid, ["hang"])
                        await trio.testing.wait_all_tasks_blocked()
                        server_scope.cancel()
