"""A reflector for one named object: list with ``fieldSelector=metadata.name=<name>``, then watch from the
list's resourceVersion (client-go ``tools/cache/reflector.go`` behind a single-object informer, as the
Go kubelet uses for its Node and, with the Watch strategy, for each ConfigMap and Secret a pod uses).

The same rules as the pod reflector (:mod:`kubelet_trio.config.apiserver`): bookmarks, a randomised
``timeoutSeconds`` of 5-10 min and a re-watch from the last resourceVersion when a stream ends; 410 Gone
relists; other failures back off (0.8 s doubling to 30 s, jittered). :attr:`ObjectReflector.value` is
the object as last seen (None: it does not exist); :attr:`ObjectReflector.synced` is set after the first
complete list, and the last value is kept (stale beats nothing) while the API server is unreachable.

What the server sends is outside input: a list or watch that fails any other way (a line that is not an
event, an answer of an unexpected shape, a corner of the consumer only that object reaches) is contained
at the ``apiwatch`` boundary by :func:`list_and_watch` (logged once, counted), and the loop relists after
a backoff of its own (0.8 s doubling to 30 s, reset once a watch ran until the server ended its history).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

import attrs
import trio

from kubelet_trio.boundary import BoundaryErrors, contain
from kubelet_trio.client.backoff import DoublingBackoff
from kubelet_trio.client.client import ApiClient
from kubelet_trio.client.errors import ApiClientError, Gone, StatusError
from kubelet_trio.client.watch import UndecodableEvent, WatchEvent
from kubelet_trio.logs import kv

__all__ = [
    "BACKOFF_INITIAL",
    "BACKOFF_MAX",
    "LIST_PAGE_SIZE",
    "MIN_WATCH_TIMEOUT",
    "WATCH_CLIENT_MARGIN",
    "ObjectReflector",
    "WatchFailed",
    "list_all",
    "list_and_watch",
    "raise_watch_error",
]

logger = logging.getLogger(__name__)

#: client-go's minWatchTimeout: each watch asks for a timeout in [5, 10) minutes.
#: Items per page of a list (client-go's reflector pages by 500).
LIST_PAGE_SIZE = 500
MIN_WATCH_TIMEOUT = 300.0
#: A watch whose server never ends it is abandoned this long after its timeoutSeconds.
WATCH_CLIENT_MARGIN = 30.0
BACKOFF_INITIAL = 0.8
BACKOFF_MAX = 30.0
SHORT_WATCH = 1.0


class WatchFailed(Exception):
    """A watch stream ended with an ERROR event other than 410."""


async def list_all(
    client: ApiClient, path: str, params: dict[str, str], page_size: int = LIST_PAGE_SIZE
) -> tuple[list[dict[str, Any]], str]:
    """Every item of a paged list (``limit`` + ``continue``) and the list's resourceVersion."""
    items: list[dict[str, Any]] = []
    params = {**params, "limit": str(page_size)}
    while True:
        page = await client.get(path, params)
        items.extend(page.get("items") or ())
        meta = page.get("metadata") or {}
        if not meta.get("continue"):
            return items, str(meta.get("resourceVersion") or "")
        params = {**params, "continue": meta["continue"]}


def raise_watch_error(event: WatchEvent) -> None:
    """An ERROR event: :class:`Gone` for 410 (relist), :class:`UndecodableEvent` for a line that was not
    an event (contained by :func:`list_and_watch`, which relists), :class:`WatchFailed` otherwise
    (re-watch)."""
    if event.undecodable:
        raise UndecodableEvent(str(event.object.get("message", "")))
    error = event.error()
    if isinstance(error, Gone):
        raise error
    raise WatchFailed(str(error)) from (error if isinstance(error, StatusError) else None)


async def list_and_watch(
    client: ApiClient,
    path: str,
    what: str,
    *,
    relist: Callable[[], Awaitable[None]],
    watch_params: Callable[[], dict[str, str]],
    consume: Callable[[trio.MemoryReceiveChannel[WatchEvent]], Awaitable[None]],
    rng: random.Random,
    min_watch_timeout: float = MIN_WATCH_TIMEOUT,
    on_error: Callable[[Exception], None] | None = None,
    boundary_errors: BoundaryErrors | None = None,
) -> NoReturn:
    """The reflector loop: ``relist()`` (retried with backoff), then watch ``path`` with
    ``watch_params()`` (the selector and the resourceVersion to go on from), feeding each stream to
    ``consume``, until the server says Gone; then relist. ``on_error`` hears of every failure; those of
    no expected kind are contained (see the module docstring) and counted in ``boundary_errors`` (by default
    the client's)."""
    if boundary_errors is None:
        boundary_errors = client.boundary_errors
    backoff = DoublingBackoff(BACKOFF_INITIAL, BACKOFF_MAX, rng)
    broken = DoublingBackoff(BACKOFF_INITIAL, BACKOFF_MAX, rng)
    while True:
        with contain("apiwatch", boundary_errors, on_error=on_error, what=what) as cycle:
            try:
                await relist()
            except ApiClientError as err:
                if on_error is not None:
                    on_error(err)
                delay = backoff.next()
                logger.warning(
                    "listing failed, retrying", extra=kv(what=what, delay=round(delay, 1), error=err)
                )
                await trio.sleep(delay)
                continue
            backoff.reset()
            await _watch_until_gone(
                client, path, what, watch_params, consume, rng, min_watch_timeout, on_error
            )
            broken.reset()
            logger.info("watch expired (410 Gone), relisting", extra=kv(what=what))
        if cycle.error is not None:
            await trio.sleep(broken.next())


async def _watch_until_gone(
    client: ApiClient,
    path: str,
    what: str,
    watch_params: Callable[[], dict[str, str]],
    consume: Callable[[trio.MemoryReceiveChannel[WatchEvent]], Awaitable[None]],
    rng: random.Random,
    min_watch_timeout: float,
    on_error: Callable[[Exception], None] | None,
) -> None:
    """Watch, re-watching from the last resourceVersion, until the server says it is too old. A stream
    the server ends within a second counts as a failure (client-go's "very short watch"), so a server
    or proxy that closes watches at once is not hammered."""
    backoff = DoublingBackoff(BACKOFF_INITIAL, BACKOFF_MAX, rng)
    while True:
        timeout = min_watch_timeout * (1 + rng.random())
        params = {**watch_params(), "allowWatchBookmarks": "true", "timeoutSeconds": str(int(timeout))}
        started = trio.current_time()
        try:
            with trio.move_on_after(int(timeout) + WATCH_CLIENT_MARGIN):
                async with client.open_watch(path, params) as events:
                    await consume(events)
            if trio.current_time() - started < SHORT_WATCH:
                raise WatchFailed("very short watch: the server ended it at once")
            backoff.reset()
        except Gone:
            return
        except (ApiClientError, WatchFailed) as err:
            if on_error is not None:
                on_error(err)
            delay = backoff.next()
            logger.warning("watch failed, re-watching", extra=kv(what=what, delay=round(delay, 1), error=err))
            await trio.sleep(delay)


@attrs.define(eq=False)
class ObjectReflector:
    """Follows ``<collection>/<name>``; start with ``nursery.start(reflector.run)`` (reports started at
    once). ``on_change(obj)`` is called whenever :attr:`value` changes (None: deleted or absent)."""

    client: ApiClient
    collection: str  # e.g. "/api/v1/nodes", "/api/v1/namespaces/default/configmaps"
    name: str
    on_change: Callable[[dict[str, Any] | None], None] | None = None
    rng: random.Random = attrs.Factory(random.Random)
    min_watch_timeout: float = MIN_WATCH_TIMEOUT
    value: dict[str, Any] | None = None
    synced: trio.Event = attrs.Factory(trio.Event)
    last_error: str | None = None  # the last list/watch failure, until a list succeeds
    resource_version: str = ""
    lists: int = 0
    #: Where contained list/watch failures are counted (None: only logged).
    boundary_errors: BoundaryErrors | None = None
    #: Hears of each list/watch failure (after :attr:`last_error` is set).
    on_failure: Callable[[Exception], None] | None = None

    @property
    def what(self) -> str:
        return f"{self.collection}/{self.name}"

    @property
    def _selector(self) -> str:
        return f"metadata.name={self.name}"

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await list_and_watch(
            self.client,
            self.collection,
            self.what,
            relist=self._list,
            watch_params=lambda: {"fieldSelector": self._selector, "resourceVersion": self.resource_version},
            consume=self._consume,
            rng=self.rng,
            min_watch_timeout=self.min_watch_timeout,
            on_error=self._failed,
            boundary_errors=self.boundary_errors,
        )

    def _failed(self, err: Exception) -> None:
        self.last_error = str(err)
        if self.on_failure is not None:
            self.on_failure(err)

    async def _list(self) -> None:
        answer = await self.client.get(self.collection, {"fieldSelector": self._selector})
        items = answer.get("items") or []
        self.resource_version = str((answer.get("metadata") or {}).get("resourceVersion") or "")
        self.lists += 1
        self.last_error = None
        self._set(items[0] if items else None)
        self.synced.set()

    async def _consume(self, events: trio.MemoryReceiveChannel[WatchEvent]) -> None:
        async for event in events:
            if event.type == "ERROR":
                raise_watch_error(event)
            if event.resource_version:
                self.resource_version = event.resource_version
            if event.type in ("ADDED", "MODIFIED"):
                self._set(event.object)
            elif event.type == "DELETED":
                self._set(None)

    def _set(self, value: dict[str, Any] | None) -> None:
        if value == self.value:
            return
        self.value = value
        if self.on_change is not None:
            self.on_change(value)
