"""The RuntimeClass manager: an informer over every ``node.k8s.io/v1`` RuntimeClass, read when a pod
sandbox is created (Go: ``pkg/kubelet/runtimeclass/runtimeclass_manager.go``).

Go keeps a shared informer (list, then watch) and answers ``LookupRuntimeHandler`` from its cache; so does
this, on the reflector loop every other informer here uses (:func:`~kubelet_trio.client.reflector.
list_and_watch`: paged list, watch from its resourceVersion with bookmarks, 410 Gone relists, failures
back off). A cache beats a TTL'd GET per sandbox: RuntimeClasses are few, rarely change, and are needed on
the hot path of every pod start.

Lookups: no class → ``""`` (the runtime's default handler); a known class → its ``handler``; an unknown
class → :class:`RuntimeClassNotFound` with the API's NotFound text (``runtimeclass.node.k8s.io "x" not
found``, what Go's lister says), which the runtime manager turns into a ``FailedCreatePodSandBox`` event;
the pod stays in ContainerCreating and is retried. Before the first list has succeeded the cache knows
nothing, and saying "not found" would be a guess: :class:`RuntimeClassesUnavailable` says so instead,
with the last API error. Once listed, the cache keeps serving its last state while the API server is
unreachable (stale beats nothing, as an informer does).

The handler is looked up only when a sandbox is created, and recorded nowhere of ours: the runtime
reports it on every sandbox (``runtime_handler`` in ListPodSandbox/PodSandboxStatus), and since
``runtimeClassName`` and a RuntimeClass's ``handler`` are both immutable, a running sandbox never has to
be recreated for it (Go's ``podSandboxChanged`` does not look at it either). A standalone kubelet has no
manager; its admission refuses such pods (:func:`kubelet_trio.lifecycle.predicate.admit_standalone`).
"""

from __future__ import annotations

import logging
import random
from typing import Any

import attrs
import trio
import trio_util

from kubelet_trio.client import ApiClient, WatchEvent
from kubelet_trio.client.reflector import (
    LIST_PAGE_SIZE,
    MIN_WATCH_TIMEOUT,
    list_all,
    list_and_watch,
    raise_watch_error,
)
from kubelet_trio.kuberuntime.manager import RuntimeHandlerError
from kubelet_trio.logs import kv

__all__ = [
    "LIST_PAGE_SIZE",
    "RUNTIME_CLASSES_PATH",
    "RuntimeClassManager",
    "RuntimeClassNotFound",
    "RuntimeClassesUnavailable",
]

logger = logging.getLogger(__name__)

RUNTIME_CLASSES_PATH = "/apis/node.k8s.io/v1/runtimeclasses"


class RuntimeClassNotFound(RuntimeHandlerError):
    """The pod names a RuntimeClass the API server does not have."""

    def __init__(self, name: str) -> None:
        super().__init__(f'runtimeclass.node.k8s.io "{name}" not found')
        self.name = name


class RuntimeClassesUnavailable(RuntimeHandlerError):
    """The RuntimeClasses have not been listed yet, so whether the pod's class exists is unknown."""


def _name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


@attrs.define(eq=False)
class RuntimeClassManager:
    """Start with ``nursery.start(manager.run)`` (reports started at once: an unreachable API server must
    not hold the node back); :attr:`synced` turns True after the first complete list."""

    client: ApiClient
    rng: random.Random = attrs.Factory(random.Random)
    min_watch_timeout: float = MIN_WATCH_TIMEOUT
    synced: trio_util.AsyncBool = attrs.Factory(lambda: trio_util.AsyncBool(False))
    last_error: str | None = None  # the last list/watch failure, until a list succeeds
    resource_version: str = ""
    lists: int = 0
    _handlers: dict[str, str] = attrs.Factory(dict)  # RuntimeClass name -> handler

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await list_and_watch(
            self.client,
            RUNTIME_CLASSES_PATH,
            "runtimeclasses",
            relist=self._list,
            watch_params=lambda: {"resourceVersion": self.resource_version},
            consume=self._consume,
            rng=self.rng,
            min_watch_timeout=self.min_watch_timeout,
            on_error=self._failed,
        )

    def handlers(self) -> dict[str, str]:
        """Every known RuntimeClass and its handler, as last seen."""
        return dict(self._handlers)

    async def wait_synced(self) -> None:
        await self.synced.wait_value(True)

    def lookup_runtime_handler(self, runtime_class_name: str | None) -> str:
        """Go's ``LookupRuntimeHandler``: "" for no class (the runtime's default handler)."""
        if not runtime_class_name:
            return ""
        handler = self._handlers.get(runtime_class_name)
        if handler is not None:
            return handler
        if not self.synced.value:
            cause = f": {self.last_error}" if self.last_error else ""
            raise RuntimeClassesUnavailable(
                f"failed to lookup RuntimeClass {runtime_class_name}: RuntimeClasses have not been listed "
                f"from the API server yet{cause}"
            )
        raise RuntimeClassNotFound(runtime_class_name)

    def _failed(self, err: Exception) -> None:
        self.last_error = str(err)

    async def _list(self) -> None:
        items, resource_version = await list_all(self.client, RUNTIME_CLASSES_PATH, {}, LIST_PAGE_SIZE)
        self._handlers = {_name(item): str(item.get("handler") or "") for item in items if _name(item)}
        self.resource_version = resource_version
        self.lists += 1
        self.last_error = None
        logger.info(
            "listed runtimeclasses",
            extra=kv(count=len(self._handlers), resourceVersion=self.resource_version),
        )
        self.synced.value = True

    async def _consume(self, events: trio.MemoryReceiveChannel[WatchEvent]) -> None:
        async for event in events:
            if event.type == "ERROR":
                raise_watch_error(event)
            if event.resource_version:
                self.resource_version = event.resource_version
            name = _name(event.object)
            if not name or event.type == "BOOKMARK":
                continue
            if event.type in ("ADDED", "MODIFIED"):
                self._handlers[name] = str(event.object.get("handler") or "")
            elif event.type == "DELETED":
                self._handlers.pop(name, None)
