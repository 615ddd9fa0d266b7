"""How many exec probes the runtime runs at once; Go has no such bound (it sends every due probe).

Each exec probe is a process started in the container (``runc exec``). On a busy node the runtime's shims
spend more CPU on them than on anything else, and a hundred at once slow each other and the sandboxes
and containers being started beside them alike (containerd counts an exec's setup against its timeout,
so they time out too). The kubelet keeps the queue instead: at most ``limit`` exec probes are in the
runtime at once. Waiting probes go in order of arrival, those that decide whether a container becomes
ready or started counted :data:`URGENT_HEAD_START` earlier (a pod waits on them; a ready container loses
nothing by waiting a little, and no probe waits for ever). A slot is given back when the exec ends or
after :data:`HOLD_LIMIT`, whichever is first, so slow probes (a long ``timeoutSeconds``) do not keep the
others from running. A probe's timeout runs from when its exec is sent.
"""

from __future__ import annotations

import heapq
import itertools
import math
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import trio

__all__ = ["EXEC_PROBES_PER_CPU", "HOLD_LIMIT", "URGENT_HEAD_START", "ExecSlots", "default_exec_slots"]

EXEC_PROBES_PER_CPU = 2
HOLD_LIMIT = 1.0  # seconds: the default probe timeout
URGENT_HEAD_START = 10.0  # seconds: the default probe period


def default_exec_slots() -> int:
    """2 per CPU this process may run on (its affinity, not every CPU of the host)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return EXEC_PROBES_PER_CPU * max(cpus, 1)


@attrs.define(eq=False)
class _Hold:
    until: float


@attrs.define(eq=False)
class _Waiter:
    rank: tuple[float, int]
    event: trio.Event = attrs.Factory(trio.Event)
    gone: bool = False

    def __lt__(self, other: _Waiter) -> bool:
        return self.rank < other.rank


@attrs.define(eq=False)
class ExecSlots:
    """``async with slots.slot(urgent):`` around one exec."""

    limit: int = attrs.field(factory=default_exec_slots, validator=attrs.validators.ge(1))
    _holds: set[_Hold] = attrs.field(init=False, factory=set)
    _queue: list[_Waiter] = attrs.field(init=False, factory=list)
    _arrivals: itertools.count[int] = attrs.field(init=False, factory=itertools.count)

    def in_use(self) -> int:
        now = trio.current_time()
        self._holds = {hold for hold in self._holds if hold.until > now}
        return len(self._holds)

    def waiting(self) -> int:
        return sum(not waiter.gone for waiter in self._queue)

    @asynccontextmanager
    async def slot(self, urgent: bool) -> AsyncIterator[None]:
        hold = await self._acquire(urgent)
        try:
            yield
        finally:
            self._holds.discard(hold)
            self._wake_head()

    def _take(self) -> _Hold:
        hold = _Hold(trio.current_time() + HOLD_LIMIT)
        self._holds.add(hold)
        return hold

    def _head(self) -> _Waiter | None:
        while self._queue and self._queue[0].gone:
            heapq.heappop(self._queue)
        return self._queue[0] if self._queue else None

    def _wake_head(self) -> None:
        head = self._head()
        if head is not None:
            head.event.set()

    def _next_expiry(self) -> float:
        return min((hold.until for hold in self._holds), default=math.inf)

    async def _acquire(self, urgent: bool) -> _Hold:
        now = trio.current_time()
        if self._head() is None and self.in_use() < self.limit:
            return self._take()
        waiter = _Waiter((now - (URGENT_HEAD_START if urgent else 0.0), next(self._arrivals)))
        heapq.heappush(self._queue, waiter)
        try:
            while True:
                head = self._head() is waiter
                if head and self.in_use() < self.limit:
                    heapq.heappop(self._queue)
                    hold = self._take()
                    self._wake_head()  # another slot may be free
                    return hold
                with trio.move_on_at(self._next_expiry() if head else math.inf):
                    await waiter.event.wait()
                waiter.event = trio.Event()
        except BaseException:
            waiter.gone = True
            self._wake_head()
            raise
