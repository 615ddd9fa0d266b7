"""An asyncio event loop on a thread of its own, for the asyncio-only gRPC library (grpclib).

The CRI client, the simulated runtime's CRI server and gRPC probes speak gRPC through grpclib, which runs
on asyncio. Rather than run asyncio inside Trio (trio-asyncio: a Trio task per asyncio callback, and no
release for Python 3.14 yet), the loop runs on its own thread and the two sides hand each other
coroutines:

- :meth:`AsyncioThread.call` runs an asyncio coroutine function there and awaits its result from Trio; a
  cancelled Trio caller cancels the asyncio task.
- :meth:`AsyncioThread.run_sync` runs a plain function on the loop's thread (objects such as a grpclib
  ``Channel`` must be created and closed there).
- :meth:`AsyncioThread.to_trio` is for asyncio code (a gRPC handler): it runs a Trio async function in the
  Trio run that opened the bridge, in the bridge's nursery, and awaits its result on asyncio.

:func:`open_asyncio_thread` owns the thread: it starts the loop, and on exit cancels what is left on it,
stops it and joins the thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import trio

__all__ = ["AsyncioThread", "open_asyncio_thread"]

T = TypeVar("T")

CANCEL_WAIT = 5.0  # seconds a cancelled call waits for its asyncio task to finish


class AsyncioThread:
    """A running asyncio loop on its own thread, and the Trio run that owns it."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self.loop = asyncio.new_event_loop()
        self._nursery = nursery
        self._token = trio.lowlevel.current_trio_token()
        self._thread = threading.Thread(target=self._run, name="asyncio-bridge", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            pending = asyncio.all_tasks(self.loop)
            for task in pending:
                task.cancel()
            if pending:
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    async def call(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """``await fn(*args, **kwargs)`` on the asyncio loop, from Trio. A cancelled caller cancels the
        asyncio task and returns once that task has finished (at most :data:`CANCEL_WAIT` later), so no
        call outlives its caller."""
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

        self.loop.call_soon_threadsafe(start)
        try:
            await finished.wait()
        except BaseException:
            abandoned = True
            self.loop.call_soon_threadsafe(cancel)
            with trio.move_on_after(CANCEL_WAIT) as scope:
                scope.shield = True
                await finished.wait()
            for task in tasks:
                if task.done() and not task.cancelled():
                    task.exception()  # retrieved: a cancelled caller no longer wants the outcome
            raise
        return tasks[0].result()

    async def run_sync(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on the loop's thread, from Trio."""

        async def run() -> T:
            return fn(*args, **kwargs)

        return await self.call(run)

    async def to_trio(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """From asyncio: ``await fn(*args)`` in the owning Trio run; its result or exception comes back."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        async def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(await fn(*args))
            except Exception as exc:  # handed to the asyncio side; Cancelled is Trio's own
                future.set_exception(exc)

        self._token.run_sync_soon(self._nursery.start_soon, run)
        return await asyncio.wrap_future(future)

    def _stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


@contextlib.asynccontextmanager
async def open_asyncio_thread() -> AsyncIterator[AsyncioThread]:
    """Start the loop; on exit cancel its remaining tasks, stop it and join its thread."""
    async with trio.open_nursery() as nursery:
        bridge = AsyncioThread(nursery)
        try:
            yield bridge
        finally:
            bridge._stop()
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(bridge._thread.join)
            nursery.cancel_scope.cancel()
