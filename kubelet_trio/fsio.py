"""How small local file operations (log directories, log lines, manifest scans) leave the event loop.

Production runs them in a worker thread (``trio.to_thread.run_sync``) so a slow disk never stalls the
node. Under an autojump ``MockClock`` a thread in flight counts as idle time and the clock jumps past
timers while the thread runs, so harnesses pass :func:`run_inline` instead: the operations are tiny and
the virtual timeline stays exact.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

T = TypeVar("T")

RunSync = Callable[..., Awaitable[Any]]


async def run_inline(fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn`` on the event loop itself (a checkpoint first, like a thread hop would be)."""
    await trio.lowlevel.checkpoint()
    return fn(*args)


run_in_thread: RunSync = trio.to_thread.run_sync
