"""The cluster's Services, as the Go kubelet's service informer keeps them (``NewMainKubelet``'s
``serviceLister``): a list of ``/api/v1/services`` without headless ones (``spec.clusterIP!=None``, as Go
asks since it only builds environment variables from them), then a watch from its resourceVersion, with
the reflector's rules (:func:`kubelet_trio.client.reflector.list_and_watch`: backoff, relist on 410, what
the server sends contained at the ``apiwatch`` boundary). A Service of an unexpected shape is skipped and
logged; the others stay.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable
from typing import Any

import attrs
import trio

from kubelet_trio.boundary import truncate
from kubelet_trio.client import ApiClient
from kubelet_trio.client.reflector import list_all, list_and_watch, raise_watch_error
from kubelet_trio.client.watch import WatchEvent
from kubelet_trio.envvars import ServiceInfo
from kubelet_trio.logs import kv

__all__ = ["SERVICES_PATH", "ServiceInformer"]

logger = logging.getLogger(__name__)

SERVICES_PATH = "/api/v1/services"
NOT_HEADLESS = "spec.clusterIP!=None"

_Key = tuple[str, str]


@attrs.define(eq=False)
class ServiceInformer:
    """A component (``nursery.start(informer.run)``, started at once); :meth:`services` and
    :meth:`has_synced` are the :class:`~kubelet_trio.envvars.ServiceLister` the pods' environments read."""

    client: ApiClient
    rng: random.Random = attrs.Factory(random.Random)
    _items: dict[_Key, ServiceInfo] = attrs.Factory(dict)
    _synced: trio.Event = attrs.Factory(trio.Event)
    _resource_version: str = ""

    def services(self) -> Iterable[ServiceInfo]:
        return self._items.values()

    def has_synced(self) -> bool:
        return self._synced.is_set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await list_and_watch(
            self.client,
            SERVICES_PATH,
            SERVICES_PATH,
            relist=self._list,
            watch_params=lambda: {"fieldSelector": NOT_HEADLESS, "resourceVersion": self._resource_version},
            consume=self._consume,
            rng=self.rng,
        )

    async def _list(self) -> None:
        items, self._resource_version = await list_all(
            self.client, SERVICES_PATH, {"fieldSelector": NOT_HEADLESS}
        )
        fresh: dict[_Key, ServiceInfo] = {}
        for item in items:
            service = _decode(item)
            if service is not None:
                fresh[service.namespace, service.name] = service
        self._items = fresh
        self._synced.set()

    async def _consume(self, events: trio.MemoryReceiveChannel[WatchEvent]) -> None:
        async for event in events:
            if event.type == "ERROR":
                raise_watch_error(event)
            if event.resource_version:
                self._resource_version = event.resource_version
            meta = event.object.get("metadata") or {}
            key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            if event.type == "DELETED":
                self._items.pop(key, None)
            elif event.type in ("ADDED", "MODIFIED"):
                service = _decode(event.object)
                if service is None:
                    self._items.pop(key, None)
                else:
                    self._items[key] = service


def _decode(obj: dict[str, Any]) -> ServiceInfo | None:
    try:
        return ServiceInfo.from_json(obj)
    except (AttributeError, KeyError, TypeError, ValueError) as err:
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        name = f"{meta.get('namespace')}/{meta.get('name')}" if isinstance(meta, dict) else "?"
        logger.warning("service skipped: unexpected shape", extra=kv(service=truncate(name), error=err))
        return None
