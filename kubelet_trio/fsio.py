"""How small local file operations (log directories, log lines, manifest scans) leave the event loop.

Production runs them in a worker thread (``trio.to_thread.run_sync``) so a slow disk never stalls the
node. Under an autojump ``MockClock`` a thread in flight counts as idle time and the clock jumps past
timers while the thread runs, so harnesses pass :func:`run_inline` instead: the operations are tiny and
the virtual timeline stays exact.

:func:`make_dirs` is the blocking helper for directories whose mode matters (Go's ``os.MkdirAll``).
"""

from __future__ import annotations

import errno
import os
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


def make_dirs(path: str, mode: int) -> list[str]:
    """Create ``path`` and every missing parent with ``mode`` (less the umask), like Go's ``os.MkdirAll``;
    ``os.makedirs`` would give the parents 0777 and so open a 0750 tree to everyone. Existing directories
    are left as they are. Returns the directories created, outermost first. Blocking."""
    missing: list[str] = []
    current = os.path.abspath(path)
    while not os.path.isdir(current):
        if os.path.lexists(current):  # a file in the way
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), current)
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    created: list[str] = []
    for directory in reversed(missing):
        try:
            os.mkdir(directory, mode)
        except FileExistsError:
            if not os.path.isdir(directory):
                raise
            continue  # made meanwhile by someone else
        created.append(directory)
    return created
