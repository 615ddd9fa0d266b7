"""The asyncio thread bridge: results and cancellation in both directions (real threads, real clock)."""

from __future__ import annotations

import asyncio
import pathlib
import socket
import threading

import pytest
import trio
import trio.lowlevel
import trio.socket

from kubelet_trio import aiobridge
from kubelet_trio.aiobridge import (
    AsyncioThread,
    SharedAsyncioThread,
    open_asyncio_thread,
    open_lazy_asyncio_thread,
)


async def _outcome(task: asyncio.Task[object]) -> str:
    """How an asyncio task ended, awaited on the loop."""
    await asyncio.wait({task})
    if task.cancelled():
        return "cancelled"
    return f"raised {task.exception()!r}" if task.exception() else f"returned {task.result()!r}"


async def _start(bridge: AsyncioThread, coro: object) -> asyncio.Task[object]:
    return await bridge.run_sync(bridge.loop.create_task, coro)


async def test_results_and_errors_cross_both_ways() -> None:
    async def double(x: int) -> int:
        await trio.lowlevel.checkpoint()
        return 2 * x

    async def fail() -> None:
        raise ValueError("no")

    async def from_asyncio(bridge: AsyncioThread) -> tuple[int, str]:
        try:
            await bridge.to_trio(fail)
        except ValueError as err:
            return await bridge.to_trio(double, 21), str(err)
        raise AssertionError("to_trio did not raise")

    with trio.fail_after(10):
        async with open_asyncio_thread() as bridge:
            assert await bridge.call(from_asyncio, bridge) == (42, "no")
            assert await bridge.run_sync(threading.current_thread) is not threading.current_thread()


async def test_a_cancelled_asyncio_awaiter_cancels_the_trio_side() -> None:
    """The handler's task is cancelled (a client went away): the Trio work it awaited is cancelled, and
    has ended by the time the handler's task has."""
    entered = trio.Event()
    seen: list[str] = []

    async def trio_side() -> None:
        entered.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            seen.append("trio cancelled")
            raise
        finally:
            seen.append("trio finally")

    async def handler(bridge: AsyncioThread) -> None:
        try:
            await bridge.to_trio(trio_side)
        finally:
            seen.append("asyncio finally")

    with trio.fail_after(10):
        async with open_asyncio_thread() as bridge:
            task = await _start(bridge, handler(bridge))
            await entered.wait()
            await bridge.run_sync(task.cancel)
            assert await bridge.call(_outcome, task) == "cancelled"
            assert seen == ["trio cancelled", "trio finally", "asyncio finally"]


async def test_a_cancelled_trio_side_cancels_the_asyncio_future() -> None:
    """The bridge's owner is cancelled under an asyncio handler awaiting Trio work: the Trio work ends
    cancelled and the handler's future with it, while the loop still runs (the handler's CancelledError
    is not the loop's shutdown cancelling its task, which would count in ``cancelling()``)."""
    entered = trio.Event()
    seen: list[object] = []

    async def trio_side() -> None:
        entered.set()
        try:
            await trio.sleep_forever()
        finally:
            seen.append("trio finally")

    async def handler(bridge: AsyncioThread) -> None:
        try:
            await bridge.to_trio(trio_side)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            assert task is not None
            seen.append(("asyncio cancelled", task.cancelling()))
            raise

    with trio.fail_after(10):
        with trio.CancelScope() as owner:
            async with open_asyncio_thread() as bridge:
                task = await _start(bridge, handler(bridge))
                await entered.wait()
                owner.cancel()
                await trio.sleep_forever()
    assert task.cancelled()
    assert seen == ["trio finally", ("asyncio cancelled", 0)]


async def test_lazy_thread_starts_at_first_use_and_is_joined_on_exit() -> None:
    with trio.fail_after(10):
        async with open_lazy_asyncio_thread() as lazy:
            assert not lazy.started
            bridge = lazy.get()
            assert lazy.get() is bridge
            thread = await bridge.run_sync(threading.current_thread)
            assert thread.is_alive()
        assert not thread.is_alive()
        with pytest.raises(RuntimeError):
            lazy.get()


async def test_shared_thread_serves_its_users_only_while_its_owner_runs_it() -> None:
    shared = SharedAsyncioThread()
    with pytest.raises(RuntimeError, match="not running"):
        shared.get()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(shared.run)
            bridge = shared.get()
            assert shared.get() is bridge  # one thread for every user
            thread = await bridge.run_sync(threading.current_thread)
            nursery.cancel_scope.cancel()
    assert not thread.is_alive()
    with pytest.raises(RuntimeError, match="not running"):
        shared.get()


async def test_closing_waits_for_a_stuck_loop_a_bounded_time(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Code that holds the loop's thread without yielding (a peer's request costing minutes of CPU)
    cannot hold the owner's shutdown: it goes on after JOIN_WAIT, with a log line."""
    monkeypatch.setattr(aiobridge, "JOIN_WAIT", 0.5)
    release = threading.Event()
    try:
        with trio.fail_after(10):
            started = trio.current_time()
            async with open_asyncio_thread() as bridge:
                bridge.loop.call_soon_threadsafe(release.wait, 30)  # the loop's thread is stuck
            waited = trio.current_time() - started
        assert 0.5 <= waited < 5
        [record] = [r for r in caplog.records if r.name == "kubelet_trio.aiobridge"]
        assert record.getMessage() == "The asyncio thread did not stop in time; going on without it"
    finally:
        release.set()  # the thread ends


async def test_closing_aborts_a_connection_stuck_with_unsent_bytes(tmp_path: pathlib.Path) -> None:
    """A connection closed while its peer had stopped reading waits for its unsent bytes forever: closing
    the bridge aborts it, so its socket is closed then and the peer sees the end of the stream."""
    path = str(tmp_path / "peer.sock")
    listener = trio.socket.socket(trio.socket.AF_UNIX)
    await listener.bind(path)
    listener.listen()

    async def write_and_close() -> socket.socket:
        transport, _ = await asyncio.get_running_loop().create_unix_connection(asyncio.Protocol, path)
        transport.write(b"x" * (16 * 1024 * 1024))  # far more than the socket buffers hold
        transport.close()
        assert transport.is_closing() and transport.get_write_buffer_size() > 0
        sock: socket.socket = transport.get_extra_info("socket")
        return sock

    with trio.fail_after(10):
        async with open_asyncio_thread() as bridge:
            sock = await bridge.call(write_and_close)
            peer, _ = await listener.accept()  # and reads nothing while the bridge is open
        assert sock.fileno() == -1
        with peer:
            while await peer.recv(1 << 20):
                pass
    listener.close()


async def test_closing_passes_over_a_connection_that_ended_once_its_bytes_were_sent(
    tmp_path: pathlib.Path,
) -> None:
    """A connection closed with bytes unsent ends when its peer has read them (asyncio then forgets its
    loop but keeps it in the loop's table while someone holds it): closing the bridge leaves it alone."""
    path = str(tmp_path / "peer.sock")
    listener = trio.socket.socket(trio.socket.AF_UNIX)
    await listener.bind(path)
    listener.listen()
    held: list[asyncio.BaseTransport] = []

    async def write_and_close() -> None:
        transport, _ = await asyncio.get_running_loop().create_unix_connection(asyncio.Protocol, path)
        transport.write(b"x" * (4 * 1024 * 1024))
        transport.close()
        assert transport.get_write_buffer_size() > 0
        held.append(transport)

    async def ended() -> bool:
        return held[0].get_extra_info("socket").fileno() == -1

    with trio.fail_after(10):
        async with open_asyncio_thread() as bridge:
            await bridge.call(write_and_close)
            peer, _ = await listener.accept()
            with peer:
                while await peer.recv(1 << 20):
                    pass
            for _ in range(1000):  # the write callback that ends it runs on the bridge's loop
                if await bridge.call(ended):
                    break
                await trio.sleep(0.01)
            assert await bridge.call(ended)
    listener.close()
