"""ConfigMaps and Secrets from the API server: the :class:`~kubelet_trio.kuberuntime.envvars.ObjectStore`
of an API-mode node (Go: ``pkg/kubelet/{configmap,secret}`` on ``pkg/kubelet/util/manager``).

This is Go's TTL-based manager (``cache_based_manager.go``, ``--config-map-and-secret-change-detection-
strategy=Cache``), not its default Watch-based one: the kubelet calls :meth:`ApiObjectStore.ensure_pod`
at the start of every pod sync (before volume setup and container starts); each object the pod references
is fetched with a GET when it is not cached or its entry is older than ``ttl`` (default 60 s, the sync
frequency). The store's lookups are then synchronous reads of the cache. Because every pod is resynced
at least once per sync period and the volume manager re-projects configMap/secret/projected volumes on
every sync (atomic writer), a changed object reaches its volumes within about two sync periods (the
entry's TTL plus the next resync); environment variables are fixed when a container starts, as in Go.

A 404 is cached as "missing", so ``get_*`` returns None and the pod fails with
``CreateContainerConfigError`` (env) or ``FailedMount`` (volumes) naming the object, unless the reference
is ``optional``; the next sync after the TTL asks again. Any other API error keeps the previous entry
(stale data beats none); an object never fetched is unknown and ``get_*`` raises
:class:`~kubelet_trio.kuberuntime.envvars.ObjectUnavailable` with the API error (or "not fetched yet"
when the prefetch ran out of time), which fails the pod's sync even for optional references, as Go does;
it is retried on the next sync. Entries no pod has asked for in ``EVICT_AFTER_TTLS`` TTLs are dropped.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import trio

from kubelet_trio.api import Pod
from kubelet_trio.client import ApiClient, ApiClientError, NotFound
from kubelet_trio.kuberuntime.envvars import ConfigMap, ObjectUnavailable, Secret

__all__ = [
    "CONFIG_MAPS",
    "DEFAULT_TTL",
    "SECRETS",
    "ApiObjectStore",
    "ObjectRef",
    "referenced_objects",
]

logger = logging.getLogger(__name__)

CONFIG_MAPS = "configmaps"
SECRETS = "secrets"
DEFAULT_TTL = 60.0  # Go: the TTL defaults to the node's sync frequency
EVICT_AFTER_TTLS = 10


@attrs.frozen
class ObjectRef:
    resource: str  # CONFIG_MAPS or SECRETS
    namespace: str
    name: str

    @property
    def path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/{self.resource}/{self.name}"


def _walk_refs(pod: Pod) -> Iterator[tuple[str, str | None]]:
    spec = pod.spec
    if spec is None:
        return
    for container in spec.all_containers():
        for source in container.env_from or ():
            if source.config_map_ref is not None:
                yield CONFIG_MAPS, source.config_map_ref.name
            if source.secret_ref is not None:
                yield SECRETS, source.secret_ref.name
        for var in container.env or ():
            value_from = var.value_from
            if value_from is None:
                continue
            if value_from.config_map_key_ref is not None:
                yield CONFIG_MAPS, value_from.config_map_key_ref.name
            if value_from.secret_key_ref is not None:
                yield SECRETS, value_from.secret_key_ref.name
    for volume in spec.volumes or ():
        if volume.config_map is not None:
            yield CONFIG_MAPS, volume.config_map.name
        if volume.secret is not None:
            yield SECRETS, volume.secret.secret_name
        if volume.projected is not None:
            for projection in volume.projected.sources or ():
                if projection.config_map is not None:
                    yield CONFIG_MAPS, projection.config_map.name
                if projection.secret is not None:
                    yield SECRETS, projection.secret.name


def referenced_objects(pod: Pod) -> list[ObjectRef]:
    """The ConfigMaps and Secrets a pod's env (``valueFrom``, ``envFrom``) and volumes (configMap,
    secret, projected) reference, each once, in spec order."""
    refs: dict[ObjectRef, None] = {}
    for resource, name in _walk_refs(pod):
        if name:
            refs[ObjectRef(resource, pod.namespace, name)] = None
    return list(refs)


def _b64(value: Any, what: str) -> bytes:
    try:
        return base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError):
        logger.warning("undecodable base64 value in %s", what)
        return b""


def config_map_from_json(obj: Mapping[str, Any]) -> ConfigMap:
    meta = obj.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    what = f"configmap {namespace}/{name}"
    return ConfigMap(
        namespace=namespace,
        name=name,
        data={str(k): str(v) for k, v in (obj.get("data") or {}).items()},
        binary_data={str(k): _b64(v, what) for k, v in (obj.get("binaryData") or {}).items()},
    )


def secret_from_json(obj: Mapping[str, Any]) -> Secret:
    meta = obj.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    what = f"secret {namespace}/{name}"
    data = {str(k): _b64(v, what) for k, v in (obj.get("data") or {}).items()}
    # stringData is write-only in a real API server; a fake one may hand it back unmerged.
    for key, value in (obj.get("stringData") or {}).items():
        data[str(key)] = str(value).encode()
    return Secret(namespace=namespace, name=name, data=data)


@attrs.define
class _Entry:
    value: ConfigMap | Secret | None  # None: the API server said 404
    fetched_at: float
    used_at: float


@attrs.define(eq=False)
class ApiObjectStore:
    """An :class:`~kubelet_trio.kuberuntime.envvars.ObjectStore` backed by the API server (see the
    module docstring). ``ensure_pod`` fills it; ``get_config_map``/``get_secret`` read it."""

    client: ApiClient
    ttl: float = DEFAULT_TTL
    _entries: dict[ObjectRef, _Entry] = attrs.Factory(dict)
    # the last failure (message, when) of objects never fetched
    _errors: dict[ObjectRef, tuple[str, float]] = attrs.Factory(dict)

    def _lookup(self, ref: ObjectRef) -> ConfigMap | Secret | None:
        entry = self._entries.get(ref)
        if entry is not None:
            return entry.value
        kind = "configmap" if ref.resource == CONFIG_MAPS else "secret"
        reason = self._errors.get(ref, ("not fetched from the API server yet", 0.0))[0]
        raise ObjectUnavailable(f"couldn't get {kind} {ref.namespace}/{ref.name}: {reason}")

    def get_config_map(self, namespace: str, name: str) -> ConfigMap | None:
        value = self._lookup(ObjectRef(CONFIG_MAPS, namespace, name))
        return value if isinstance(value, ConfigMap) else None

    def get_secret(self, namespace: str, name: str) -> Secret | None:
        value = self._lookup(ObjectRef(SECRETS, namespace, name))
        return value if isinstance(value, Secret) else None

    def cached(self, ref: ObjectRef) -> bool:
        return ref in self._entries

    async def ensure_pod(self, pod: Pod) -> None:
        """Fetch the pod's referenced objects that are not cached or older than the TTL."""
        await self.ensure(referenced_objects(pod))

    async def ensure(self, refs: list[ObjectRef]) -> None:
        now = trio.current_time()
        for ref in refs:
            entry = self._entries.get(ref)
            if entry is not None:
                entry.used_at = now
                if now - entry.fetched_at < self.ttl:
                    continue
            await self._fetch(ref, entry)
        self._evict(trio.current_time())

    async def _fetch(self, ref: ObjectRef, entry: _Entry | None) -> None:
        value: ConfigMap | Secret | None
        try:
            obj = await self.client.get(ref.path)
        except NotFound:
            value = None
            logger.info(
                "object not found resource=%s namespace=%s name=%s", ref.resource, ref.namespace, ref.name
            )
        except ApiClientError as err:
            logger.warning(
                "fetching object failed resource=%s namespace=%s name=%s error=%s",
                ref.resource,
                ref.namespace,
                ref.name,
                err,
            )
            self._errors[ref] = (str(err), trio.current_time())
            return  # keep what we had (or nothing): retried on the next sync
        else:
            value = config_map_from_json(obj) if ref.resource == CONFIG_MAPS else secret_from_json(obj)
        now = trio.current_time()
        if entry is not None and entry.value != value:
            logger.info(
                "object changed resource=%s namespace=%s name=%s", ref.resource, ref.namespace, ref.name
            )
        self._entries[ref] = _Entry(value, now, now)
        self._errors.pop(ref, None)

    def _evict(self, now: float) -> None:
        horizon = self.ttl * EVICT_AFTER_TTLS
        for ref in [r for r, e in self._entries.items() if now - e.used_at > horizon]:
            del self._entries[ref]
        for ref in [r for r, (_, when) in self._errors.items() if now - when > horizon]:
            del self._errors[ref]
