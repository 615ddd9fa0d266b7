"""Minimal Linux inotify through ctypes, waited on with Trio (``trio.lowlevel.wait_readable``).

Used only to notice changes promptly (manifests, image archives); whoever watches still re-scans
periodically, so when inotify is missing (not Linux, no libc symbol, watch limit reached) nothing but
latency is lost. :func:`kick_every` and :func:`kick_on_events` are those two triggers of a re-scan.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import logging
import os
import struct
import sys
from collections.abc import Callable

import attrs
import trio
import trio_util

from kubelet_trio.logs import kv

__all__ = [
    "INOTIFY_SETTLE",
    "IN_ALL_CHANGES",
    "Inotify",
    "InotifyEvent",
    "kick",
    "kick_every",
    "kick_on_events",
]

logger = logging.getLogger(__name__)

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_IGNORED = 0x00008000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = getattr(os, "O_CLOEXEC", 0o2000000)
IN_ALL_CHANGES = (
    IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
    | IN_DELETE_SELF | IN_MOVE_SELF
)  # fmt: skip
_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len
_READ_SIZE = 64 * 1024


@attrs.frozen
class InotifyEvent:
    wd: int
    mask: int
    name: str


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        return libc
    except (OSError, AttributeError):
        return None


@attrs.define(eq=False)
class Inotify:
    """An inotify instance. Create with :meth:`open` (``None`` when unavailable); close when done."""

    _libc: ctypes.CDLL
    _fd: int
    _closed: bool = False

    @classmethod
    def open(cls) -> Inotify | None:
        libc = _libc()
        if libc is None:
            return None
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            logger.warning("inotify unavailable", extra=kv(error=os.strerror(ctypes.get_errno())))
            return None
        return cls(libc, fd)

    def add_watch(self, path: str, mask: int = IN_ALL_CHANGES) -> int | None:
        """Watch ``path``; returns the watch descriptor (the same one again for an inode already
        watched), or ``None`` if the path cannot be watched (it does not exist, limit reached)."""
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(path), mask)
        if wd < 0:
            err = ctypes.get_errno()
            if err not in (errno.ENOENT, errno.ENOTDIR):
                logger.warning("inotify watch failed", extra=kv(path=path, error=os.strerror(err)))
            return None
        return int(wd)

    def read_nowait(self) -> list[InotifyEvent]:
        """Every event queued right now (possibly none)."""
        events: list[InotifyEvent] = []
        while True:
            try:
                data = os.read(self._fd, _READ_SIZE)
            except BlockingIOError:
                return events
            if not data:
                return events
            offset = 0
            while offset + _HEADER.size <= len(data):
                wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
                offset += _HEADER.size
                name = data[offset : offset + length].split(b"\0", 1)[0]
                offset += length
                events.append(InotifyEvent(wd, mask, os.fsdecode(name)))

    async def wait(self) -> list[InotifyEvent]:
        """Wait until at least one event is queued and return all queued events."""
        while True:
            await trio.lowlevel.wait_readable(self._fd)
            events = self.read_nowait()
            if events:
                return events

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            with contextlib.suppress(RuntimeError):  # outside Trio nobody can be waiting on it
                trio.lowlevel.notify_closing(self._fd)
            os.close(self._fd)


#: How long a burst of events may go on before the re-scan it triggers.
INOTIFY_SETTLE = 0.1


def kick(channel: trio.MemorySendChannel[None]) -> None:
    """Ask for a re-scan on a channel of buffer 1: one pending scan covers any number of asks."""
    with contextlib.suppress(trio.WouldBlock):
        channel.send_nowait(None)


async def kick_every(period: float, channel: trio.MemorySendChannel[None]) -> None:
    """Ask for a re-scan every ``period`` (the first one a period from now), until cancelled."""
    async with channel, contextlib.aclosing(trio_util.periodic(period)) as ticks:
        first = True
        async for _ in ticks:
            if not first:
                kick(channel)
            first = False


async def kick_on_events(
    inotify: Inotify, relevant: Callable[[InotifyEvent], bool], channel: trio.MemorySendChannel[None]
) -> None:
    """Ask for a re-scan once a burst of events with a ``relevant`` one has settled, until cancelled."""
    async with channel:
        while True:
            events = await inotify.wait()
            if not any(relevant(event) for event in events):
                continue
            await trio.sleep(INOTIFY_SETTLE)
            inotify.read_nowait()  # the rest of the burst is covered by the coming scan
            kick(channel)
