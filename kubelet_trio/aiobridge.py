"""An asyncio event loop on a thread of its own, for the asyncio-only gRPC library (grpclib).

The CRI client, the simulated runtime's CRI server and gRPC probes speak gRPC through grpclib, which runs
on asyncio. Rather than run asyncio inside Trio (trio-asyncio: a Trio task per asyncio callback, and no
release for Python 3.14 yet), the loop runs on its own thread and the two sides hand each other
coroutines:

- :meth:`AsyncioThread.call` runs an asyncio coroutine function there and awaits its result from Trio; a
  cancelled Trio caller cancels the asyncio task and waits for it to end.
- :meth:`AsyncioThread.run_sync` runs a plain function on the loop's thread (objects such as a grpclib
  ``Channel`` must be created and closed there).
- :meth:`AsyncioThread.to_trio` is for asyncio code (a gRPC handler): it runs a Trio async function in the
  Trio run that opened the bridge, in the bridge's nursery under a cancel scope the bridge holds, and
  awaits its result on asyncio. A cancelled asyncio awaiter cancels the Trio task and waits for it to
  end; a Trio task that ends cancelled (its owner is cancelled, or the bridge closes) ends its awaiter
  with ``CancelledError``.

**Abandonment.** A cancelled caller on either side waits for the other side's work to end, but at most
:data:`CANCEL_WAIT`; then it abandons that work and raises its own cancellation (``trio.Cancelled`` or
``asyncio.CancelledError``), as ``trio.to_thread.run_sync(..., abandon_on_cancel=True)`` abandons its
thread. Abandoned work keeps running in the background, already asked to cancel; its result or exception
is discarded (retrieved, so nothing is logged as "never retrieved"). The caller may therefore not assume
that the work had no effect (an RPC may still reach its peer), nor that what the work uses is free again
(don't close a ``Channel`` under it as if it had finished). It may assume that the work does not outlive
the bridge: closing it cancels its Trio calls, then the asyncio tasks left on the loop, and waits for both.

:func:`open_asyncio_thread` owns the thread: it starts the loop, and on exit cancels the Trio calls and
waits for their awaiters, cancels what is left on the loop, stops it and joins the thread — for at most
:data:`JOIN_WAIT`: a loop held by code that never yields (a peer's request that costs minutes of CPU) cannot
hold the node's shutdown too; the thread is then left behind, a daemon, with a log line.
:func:`open_lazy_asyncio_thread` is the same for an owner that may never need the loop (the prober: most
pods have no gRPC probe); the thread starts at the first :meth:`LazyAsyncioThread.get`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import attrs
import trio

from kubelet_trio.logs import kv

if TYPE_CHECKING:  # asyncio itself is imported by the first bridge: a node without one never loads it
    import asyncio

__all__ = [
    "CANCEL_WAIT",
    "JOIN_WAIT",
    "AsyncioThread",
    "AsyncioThreadSource",
    "LazyAsyncioThread",
    "SharedAsyncioThread",
    "open_asyncio_thread",
    "open_lazy_asyncio_thread",
]

T = TypeVar("T")

logger = logging.getLogger(__name__)

CANCEL_WAIT = 5.0  # seconds a cancelled caller waits for the other side's work to end before abandoning it
JOIN_WAIT = 5.0  # seconds closing waits for the loop's thread to end before going on without it


def _discard(future: asyncio.Future[Any]) -> None:
    """Retrieve a finished future's outcome that nobody wants, so asyncio does not log it as lost."""
    if not future.cancelled():
        future.exception()


class AsyncioThread:
    """A running asyncio loop on its own thread, and the Trio run (and nursery) that owns it."""

    def __init__(self, nursery: trio.Nursery) -> None:
        import asyncio

        self.loop = asyncio.new_event_loop()
        self._nursery = nursery
        self._token = trio.lowlevel.current_trio_token()
        # The scopes of to_trio calls whose awaiters have not returned; touched on the Trio thread only.
        self._trio_calls: set[trio.CancelScope] = set()
        self._closing = False
        self._drained: trio.Event | None = None  # set when the last Trio call ends, once closing
        self._thread = threading.Thread(target=self._run, name="asyncio-bridge", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import asyncio

        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            try:
                pending = asyncio.all_tasks(self.loop)
                for task in pending:
                    task.cancel()
                if pending:
                    self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                self._abort_transports()
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            finally:
                self.loop.close()

    def _abort_transports(self) -> None:
        """Abort the sockets still open on the loop, and let their ``connection_lost`` run. A transport
        closed with bytes unsent to a peer that stopped reading waits for them forever: closing the loop
        leaves its socket to the garbage collector, at a time nobody chose."""
        import asyncio

        transports = getattr(self.loop, "_transports", None)  # the selector loop's fd -> transport map
        if transports is None:
            return
        for transport in list(transports.values()):
            # one that ended once its last bytes were sent has let go of its loop but stays in the map
            # while something holds it
            if getattr(transport, "_loop", None) is self.loop:
                transport.abort()
        self.loop.run_until_complete(asyncio.sleep(0))

    def get(self) -> AsyncioThread:
        """A running bridge is its own :class:`AsyncioThreadSource`."""
        return self

    async def call(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """``await fn(*args, **kwargs)`` on the asyncio loop, from Trio.

        A cancelled caller cancels the asyncio task and returns once that task has finished, so that no
        call outlives its caller; a call cancelled before its task started never starts it. A task still
        running :data:`CANCEL_WAIT` after it was cancelled is abandoned, as ``abandon_on_cancel=True``
        abandons a thread: the caller gets ``trio.Cancelled`` at once while the task, already cancelled,
        runs on in the background until it ends or the bridge closes. Its result or exception is
        discarded. The caller may not assume it had no effect (an RPC may still reach the runtime) nor
        that what it uses is free; it may assume it does not outlive the bridge.
        """
        finished = trio.Event()
        tasks: list[asyncio.Task[T]] = []
        abandoned = False

        def wake(_: object = None) -> None:
            with contextlib.suppress(trio.RunFinishedError):
                self._token.run_sync_soon(finished.set)

        async def run() -> T:
            return await fn(*args, **kwargs)

        def start() -> None:  # on the loop's thread
            if abandoned:  # cancelled before it started
                wake()
                return
            task = self.loop.create_task(run())
            task.add_done_callback(wake)  # called once the task is done, not merely finishing
            tasks.append(task)

        def cancel() -> None:  # on the loop's thread, after start()
            for task in tasks:
                task.cancel()
                task.add_done_callback(_discard)  # its outcome, even after CANCEL_WAIT, is nobody's

        self.loop.call_soon_threadsafe(start)
        try:
            await finished.wait()
        except BaseException:
            abandoned = True
            self.loop.call_soon_threadsafe(cancel)
            with trio.move_on_after(CANCEL_WAIT) as scope:
                scope.shield = True
                await finished.wait()
            raise
        return tasks[0].result()

    async def run_sync(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on the loop's thread, from Trio."""

        async def run() -> T:
            return fn(*args, **kwargs)

        return await self.call(run)

    async def to_trio(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """From asyncio: ``await fn(*args)`` in the owning Trio run; its result or exception comes back.

        Cancellation crosses both ways. A cancelled awaiter cancels the Trio task and waits for it to end,
        at most :data:`CANCEL_WAIT` (then abandons it, as :meth:`call` does), before raising
        ``CancelledError``. A Trio task that ends cancelled (its owner is cancelled, or the bridge closes)
        resolves the awaiter's future as cancelled: the awaiter raises ``CancelledError`` although its own
        task was not cancelled. Either way the future is resolved and the Trio task ends in the bridge's
        nursery.
        """
        future: asyncio.Future[T] = self.loop.create_future()
        scope = trio.CancelScope()  # cancelled from asyncio (awaiter gone) or by closing the bridge

        def settle(resolve: Callable[[], object]) -> None:  # on the Trio thread
            def apply() -> None:
                if not future.done():
                    resolve()

            with contextlib.suppress(RuntimeError):  # the loop is closed, and its awaiters are gone
                self.loop.call_soon_threadsafe(apply)

        async def run() -> None:
            try:
                with scope:
                    result = await fn(*args)
                    settle(functools.partial(future.set_result, result))
                    return
            except Exception as exc:  # handed to the asyncio side
                settle(functools.partial(future.set_exception, exc))
                return
            except BaseException:  # Cancelled by an owner's scope, KeyboardInterrupt: Trio's own
                settle(future.cancel)
                raise
            settle(future.cancel)  # the scope caught its Cancelled

        def start() -> None:  # on the Trio thread
            if self._closing:
                settle(future.cancel)
                return
            self._trio_calls.add(scope)
            try:
                self._nursery.start_soon(run, name=f"to_trio:{getattr(fn, '__qualname__', fn)}")
            except RuntimeError:  # the nursery is closed
                settle(future.cancel)

        def release() -> None:  # on the Trio thread, after start()
            self._trio_calls.discard(scope)
            if not self._trio_calls and self._drained is not None:
                self._drained.set()

        try:
            self._token.run_sync_soon(start)
        except trio.RunFinishedError:  # no Trio run to cancel the call: it ends as a cancelled one
            future.cancel()
        import asyncio

        try:
            return await asyncio.shield(future)  # a cancelled awaiter leaves the future to the Trio task
        except asyncio.CancelledError:
            if not future.done():  # the awaiter was cancelled, not the Trio task
                with contextlib.suppress(trio.RunFinishedError):
                    self._token.run_sync_soon(scope.cancel)
                await asyncio.wait({future}, timeout=CANCEL_WAIT)
            raise
        finally:
            if future.done():
                _discard(future)
            else:  # abandoned
                future.add_done_callback(_discard)
            with contextlib.suppress(trio.RunFinishedError):
                self._token.run_sync_soon(release)

    async def aclose(self) -> None:
        """Cancel the Trio calls and wait for their awaiters (at most :data:`CANCEL_WAIT`), then stop the
        loop (cancelling what is left on it) and join its thread (at most :data:`JOIN_WAIT`, then it is
        abandoned with a log line). Later :meth:`to_trio` calls end cancelled. Shielded: a cancelled
        owner still gets its thread back, or its bounded wait for it."""
        with trio.CancelScope(shield=True):
            self._closing = True
            if self._trio_calls:
                self._drained = trio.Event()
                for scope in self._trio_calls:
                    scope.cancel()
                with trio.move_on_after(CANCEL_WAIT):
                    await self._drained.wait()
            self.loop.call_soon_threadsafe(self.loop.stop)
            with trio.move_on_after(JOIN_WAIT) as joining:
                await trio.to_thread.run_sync(self._thread.join, abandon_on_cancel=True)
            if joining.cancelled_caught:
                logger.warning(
                    "The asyncio thread did not stop in time; going on without it",
                    extra=kv(thread=self._thread.name, waited=JOIN_WAIT),
                )


@attrs.define(eq=False)
class LazyAsyncioThread:
    """An :class:`AsyncioThread` started at the first :meth:`get` and shared by every later one, for an
    owner that may never need it; :func:`open_lazy_asyncio_thread` closes it."""

    _nursery: trio.Nursery
    _bridge: AsyncioThread | None = None
    _closed: bool = False

    @property
    def started(self) -> bool:
        return self._bridge is not None

    def get(self) -> AsyncioThread:
        """The bridge, started now if this is the first use; a closed one raises ``RuntimeError``."""
        if self._closed:
            raise RuntimeError("the asyncio thread is closed")
        if self._bridge is None:
            self._bridge = AsyncioThread(self._nursery)
        return self._bridge

    async def aclose(self) -> None:
        self._closed = True
        if self._bridge is not None:
            await self._bridge.aclose()


class AsyncioThreadSource(Protocol):
    """Where a component gets the bridge when it first needs one (:class:`LazyAsyncioThread`,
    :class:`SharedAsyncioThread`)."""

    def get(self) -> AsyncioThread: ...


@attrs.define(eq=False)
class SharedAsyncioThread:
    """One lazily started bridge for components built before the node runs (the plugin manager, CSI
    drivers' clients): their owner runs :meth:`run` first, and :meth:`get` works while it runs."""

    _lazy: LazyAsyncioThread | None = None

    def get(self) -> AsyncioThread:
        if self._lazy is None:
            raise RuntimeError("the shared asyncio thread is not running")
        return self._lazy.get()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with open_lazy_asyncio_thread() as lazy:
            self._lazy = lazy
            try:
                task_status.started()
                await trio.sleep_forever()
            finally:
                self._lazy = None


@contextlib.asynccontextmanager
async def open_lazy_asyncio_thread() -> AsyncIterator[LazyAsyncioThread]:
    """A :class:`LazyAsyncioThread`; on exit its bridge (if started) is closed as
    :func:`open_asyncio_thread` closes one."""
    async with trio.open_nursery() as nursery:
        lazy = LazyAsyncioThread(nursery)
        try:
            yield lazy
        finally:
            await lazy.aclose()
            nursery.cancel_scope.cancel()  # Trio calls their awaiters abandoned


@contextlib.asynccontextmanager
async def open_asyncio_thread() -> AsyncIterator[AsyncioThread]:
    """Start the loop; on exit cancel the Trio calls and wait for their awaiters, cancel the loop's
    remaining tasks, stop it and join its thread."""
    async with open_lazy_asyncio_thread() as lazy:
        yield lazy.get()
