"""CriRuntime beyond the contract: endpoints, error mapping, cancellation and runtime restarts."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.lowlevel
from grpclib import GRPCError, Status
from grpclib.encoding.proto import ProtoCodec
from grpclib.server import Server

from kubelet_trio.aiobridge import open_asyncio_thread
from kubelet_trio.boundary import BoundaryErrors
from kubelet_trio.cri import errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.gen.runtime.v1 import services
from kubelet_trio.cri.remote import CriRuntime, open_cri_runtime, socket_path, translate_error
from kubelet_trio.logs import record_fields
from kubelet_trio.testing.env import LocalCriEnvironment
from tests.contract.targets import EXEC_SCRIPTED, FOREVER, Target, eventually_status
from tests.test_cri_h2channel import calls_in_flight


def test_socket_path() -> None:
    assert socket_path("unix:///run/containerd/containerd.sock") == "/run/containerd/containerd.sock"
    assert socket_path("/run/x.sock") == "/run/x.sock"
    for bad in ("tcp://127.0.0.1:1234", "unix://relative.sock", "npipe:////./pipe/x"):
        with pytest.raises(ValueError, match="endpoint"):
            socket_path(bad)


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (GRPCError(Status.NOT_FOUND, "no such container"), errors.NotFoundError),
        (GRPCError(Status.UNAVAILABLE, "connection refused"), errors.UnavailableError),
        (GRPCError(Status.DEADLINE_EXCEEDED, "slow"), errors.DeadlineExceededError),
        (GRPCError(Status.INVALID_ARGUMENT, "bad"), errors.InvalidArgumentError),
        (GRPCError(Status.INTERNAL, "boom"), errors.CriCallError),
        (GRPCError(Status.UNKNOWN, "server is not initialized yet"), errors.UnavailableError),
        (TimeoutError(), errors.DeadlineExceededError),
        (ConnectionRefusedError(111, "refused"), errors.UnavailableError),
        (FileNotFoundError(2, "no socket"), errors.UnavailableError),
    ],
)
def test_translate_error(exc: BaseException, expected: type[errors.CriError]) -> None:
    translated = translate_error("ListContainers", exc)
    assert type(translated) is expected
    assert str(translated).startswith("ListContainers: ")


def test_missing_image_on_pull_is_not_found() -> None:
    exc = GRPCError(Status.UNKNOWN, 'failed to resolve reference "r/x:1": r/x:1: not found')
    assert isinstance(translate_error("PullImage", exc), errors.NotFoundError)
    assert type(translate_error("ListImages", exc)) is errors.CriCallError


def test_other_exceptions_are_not_translated() -> None:
    assert translate_error("Version", ValueError("bug")) is None


async def test_unreachable_socket_is_unavailable(tmp_path: object) -> None:
    endpoint = f"unix://{tmp_path}/nothing-here.sock"
    async with open_cri_runtime(endpoint) as rt:
        with pytest.raises(errors.UnavailableError) as info:
            await rt.version()
    assert str(info.value).startswith(f"Version: runtime unreachable at {endpoint}: ")


@pytest.fixture
async def containerd_target(cri_env: LocalCriEnvironment, tmp_path: object) -> AsyncIterator[Target]:
    async with open_cri_runtime(cri_env.endpoint, request_timeout=30) as rt:
        target = Target(
            "containerd", rt, cri_env.images.busybox, cri_env.missing_image, trio.Path(str(tmp_path))
        )
        try:
            yield target
        finally:
            await target.cleanup()


@pytest.fixture
async def sim_cri_target(sim_cri_endpoint: str, tmp_path: object) -> AsyncIterator[Target]:
    async with open_cri_runtime(sim_cri_endpoint, request_timeout=30) as rt:
        target = Target("sim-cri", rt, "registry.sim/busybox:1", "sim.invalid/x:1", trio.Path(str(tmp_path)))
        try:
            yield target
        finally:
            await target.cleanup()


async def assert_cancelled_promptly(target: Target, call: object) -> None:
    """Cancel a blocking call after 0.3 s: it must return within 1 s and leave no call in flight."""
    assert isinstance(target.runtime, CriRuntime)
    started = trio.current_time()
    with trio.move_on_after(0.3) as scope:
        await call  # type: ignore[misc]
    assert scope.cancelled_caught, "the call returned instead of blocking"
    assert trio.current_time() - started < 1.0
    await trio.lowlevel.checkpoint()
    assert calls_in_flight(target.runtime.runtime_channel) == 0
    assert calls_in_flight(target.runtime.image_channel) == 0
    await target.runtime.version()  # the session is still usable after a cancel


@pytest.mark.containerd
async def test_cancel_hanging_exec_containerd(containerd_target: Target) -> None:
    sandbox_id, config = await containerd_target.new_sandbox({"app": EXEC_SCRIPTED})
    cid = await containerd_target.new_container(sandbox_id, config, "app", EXEC_SCRIPTED)
    await eventually_status(
        containerd_target.runtime, cid, lambda s: s.state == pb.ContainerState.CONTAINER_RUNNING
    )
    await assert_cancelled_promptly(
        containerd_target, containerd_target.runtime.exec_sync(cid, ["sleep", "30"])
    )


async def test_cancel_hanging_exec_sim_cri(sim_cri_target: Target) -> None:
    sandbox_id, config = await sim_cri_target.new_sandbox({"app": EXEC_SCRIPTED})
    cid = await sim_cri_target.new_container(sandbox_id, config, "app", EXEC_SCRIPTED)
    await assert_cancelled_promptly(sim_cri_target, sim_cri_target.runtime.exec_sync(cid, ["sleep", "30"]))


async def silent_registry(task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    """A TCP listener on loopback that accepts connections and never answers: a pull hangs on it."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    held: list[trio.SocketStream] = []
    async with listeners[0]:
        task_status.started(port)
        try:
            while True:
                held.append(await listeners[0].accept())
        finally:
            for stream in held:
                stream.socket.close()


@pytest.mark.containerd
async def test_cancel_slow_pull_containerd(containerd_target: Target, nursery: trio.Nursery) -> None:
    port = await nursery.start(silent_registry)
    image = pb.ImageSpec(image=f"127.0.0.1:{port}/kubelet-trio/slow:1")
    await assert_cancelled_promptly(containerd_target, containerd_target.runtime.pull_image(image))


@pytest.mark.containerd
async def test_session_survives_containerd_restart(
    containerd_target: Target, cri_env: LocalCriEnvironment
) -> None:
    rt = containerd_target.runtime
    sandbox_id, config = await containerd_target.new_sandbox({"app": FOREVER})
    cid = await containerd_target.new_container(sandbox_id, config, "app", FOREVER)
    await eventually_status(rt, cid, lambda s: s.state == pb.ContainerState.CONTAINER_RUNNING)

    await trio.to_thread.run_sync(cri_env.containerd.stop)
    with pytest.raises(errors.UnavailableError):
        await rt.list_containers()
    await trio.to_thread.run_sync(cri_env.containerd.start)

    # The socket answers before the CRI plugin is ready ("server is not initialized yet": Unavailable).
    with trio.fail_after(30):
        while True:
            try:
                listed = await rt.list_containers(pb.ContainerFilter(id=cid))  # same session, no reopen
                break
            except errors.UnavailableError:
                await trio.sleep(0.1)
    assert [c.id for c in listed] == [cid]
    assert listed[0].state is pb.ContainerState.CONTAINER_RUNNING  # containers outlive containerd


class _GarbledOnce(ProtoCodec):
    """A runtime's codec whose first answer is bytes that do not decode (field 1, a string, not UTF-8)."""

    def __init__(self) -> None:
        self.answers = 0

    def encode(self, message: Any, message_type: Any) -> bytes:
        self.answers += 1
        return b"\x0a\x02\xff\xfe" if self.answers == 1 else super().encode(message, message_type)


class _VersionOnly(services.RuntimeServiceBase):
    async def version(self, message: pb.VersionRequest) -> pb.VersionResponse:
        return pb.VersionResponse(version="0.1.0", runtime_name="garbled", runtime_api_version="v1")


async def test_an_answer_that_does_not_decode_fails_that_call_only(caplog: pytest.LogCaptureFixture) -> None:
    """It used to raise ValueError out of the call, which no caller retries: a runtime's bytes ended the
    node. Now the call fails as INTERNAL (logged once, counted under ``grpc``) and the session goes on."""
    with tempfile.TemporaryDirectory(prefix="cri-") as directory:  # unix socket paths are short
        await _answer_garbage_once(f"{directory}/rt.sock", caplog)


async def _answer_garbage_once(sock: str, caplog: pytest.LogCaptureFixture) -> None:
    counted = BoundaryErrors()
    with trio.fail_after(30):
        async with open_asyncio_thread() as bridge:
            server = await bridge.run_sync(Server, [_VersionOnly()], codec=_GarbledOnce())
            await bridge.call(server.start, path=sock)
            try:
                async with open_cri_runtime(f"unix://{sock}", boundary_errors=counted) as rt:
                    with pytest.raises(errors.CriCallError) as info:
                        await rt.version()
                    assert info.value.code == "INTERNAL"
                    assert info.value.message.startswith("failed to unmarshal the answer: cannot decode")
                    assert (await rt.version()).runtime_name == "garbled"
            finally:
                await bridge.run_sync(server.close)
                await bridge.call(server.wait_closed)
    assert counted.counts == {"grpc": 1}
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert record.getMessage() == "Peer failed; closing it"
    assert record_fields(record) == {"boundary": "grpc", "op": "Version", "endpoint": f"unix://{sock}"}
