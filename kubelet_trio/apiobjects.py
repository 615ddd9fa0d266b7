"""ConfigMaps and Secrets from the API server: the :class:`~kubelet_trio.objects.ObjectStore`
of an API-mode node (Go: ``pkg/kubelet/{configmap,secret}`` on ``pkg/kubelet/util/manager``), with Go's
``configMapAndSecretChangeDetectionStrategy``: ``Watch`` (the default, :class:`WatchingObjectStore`),
``Cache`` and ``Get`` (:class:`ApiObjectStore`, with the TTL or none).

:class:`WatchingObjectStore` keeps a single-object reflector (list + watch, ``metadata.name=<name>``) for
every object a live pod references, started when a pod sync first asks for it; the sync waits until it
has listed once. Its data is then current: a change reaches the pod's volumes at the pod's next sync
(within the sync period). A reference no pod sync asked for in ``idle_after`` (a few sync periods; every
live pod is synced once per period) is dropped and its watch stopped. At most ``max_watches`` run at
once (each holds a connection); references beyond that are fetched like the ``Get`` strategy.

:class:`ApiObjectStore` is Go's TTL-based manager (``cache_based_manager.go``, strategy ``Cache``;
``Get`` is the same with a TTL of 0): the kubelet calls :meth:`ApiObjectStore.ensure_pod`
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
:class:`~kubelet_trio.objects.ObjectUnavailable` with the API error (or "not fetched yet"
when the prefetch ran out of time), which fails the pod's sync even for optional references, as Go does;
it is retried on the next sync. Entries no pod has asked for in ``EVICT_AFTER_TTLS`` TTLs are dropped.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import attrs
import trio

from kubelet_trio import defaults
from kubelet_trio.api import Pod
from kubelet_trio.client import ApiClient, ApiClientError, NotFound, StatusError
from kubelet_trio.client.reflector import ObjectReflector
from kubelet_trio.logs import kref, kv
from kubelet_trio.objects import ConfigMap, ObjectUnavailable, Secret

__all__ = [
    "CONFIG_MAPS",
    "DEFAULT_TTL",
    "SECRETS",
    "ApiObjectStore",
    "ObjectRef",
    "WatchingObjectStore",
    "referenced_objects",
]

logger = logging.getLogger(__name__)

CONFIG_MAPS = "configmaps"
SECRETS = "secrets"
DEFAULT_TTL = defaults.SYNC_FREQUENCY  # Go: the TTL defaults to the node's sync frequency
EVICT_AFTER_TTLS = 10

_O = TypeVar("_O", ConfigMap, Secret)


@attrs.frozen
class ObjectRef:
    resource: str  # CONFIG_MAPS or SECRETS
    namespace: str
    name: str

    @property
    def collection(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/{self.resource}"

    @property
    def path(self) -> str:
        return f"{self.collection}/{self.name}"

    @property
    def kind(self) -> str:
        return "configmap" if self.resource == CONFIG_MAPS else "secret"

    @property
    def name_problem(self) -> str | None:
        """Why the name cannot be one segment of a URL path (client-go's ``IsValidPathSegmentName``):
        such a name would address another resource, so it is never requested."""
        if self.name in (".", ".."):
            return f"may not be '{self.name}'"
        for bad in ("/", "%"):
            if bad in self.name:
                return f"may not contain '{bad}'"
        return None

    def decode(self, obj: Mapping[str, Any]) -> ConfigMap | Secret:
        return config_map_from_json(obj) if self.resource == CONFIG_MAPS else secret_from_json(obj)


def _typed(value: ConfigMap | Secret | None, kind: type[_O]) -> _O | None:
    return value if isinstance(value, kind) else None


def _walk_refs(pod: Pod) -> Iterator[tuple[str, str | None]]:
    spec = pod.spec
    if spec is None:
        return
    for ref in spec.image_pull_secrets or ():  # first, as Go's VisitPodSecretNames
        yield SECRETS, ref.name
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
    """The ConfigMaps and Secrets a pod's image pull secrets, env (``valueFrom``, ``envFrom``) and volumes
    (configMap, secret, projected) reference, each once, in spec order."""
    refs: dict[ObjectRef, None] = {}
    for resource, name in _walk_refs(pod):
        if name:
            ref = ObjectRef(resource, pod.namespace, name)
            if ref.name_problem is None:
                refs[ref] = None
    return list(refs)


def _b64(value: Any, what: str) -> bytes:
    try:
        return base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError):
        logger.warning("undecodable base64 value", extra=kv(object=what))
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
    return Secret(namespace=namespace, name=name, data=data, type=str(obj.get("type") or ""))


@attrs.define
class _Entry:
    value: ConfigMap | Secret | None  # None: the API server said 404
    fetched_at: float
    used_at: float


@attrs.define(eq=False)
class ApiObjectStore:
    """An :class:`~kubelet_trio.objects.ObjectStore` backed by the API server (see the
    module docstring). ``ensure_pod`` fills it; ``get_config_map``/``get_secret`` read it."""

    client: ApiClient
    ttl: float = DEFAULT_TTL
    #: Go's ``node.alpha.kubernetes.io/ttl``: the TTL the cluster's TTL controller set on the Node, if any.
    ttl_source: Callable[[], float | None] | None = None
    keep_stale: bool = True  # serve the last known object when a refresh fails (not for "Get")
    _entries: dict[ObjectRef, _Entry] = attrs.Factory(dict)
    # the last failure (message, when) of objects never fetched
    _errors: dict[ObjectRef, tuple[str, float]] = attrs.Factory(dict)

    def lookup(self, ref: ObjectRef) -> ConfigMap | Secret | None:
        entry = self._entries.get(ref)
        if entry is not None:
            return entry.value
        if (problem := ref.name_problem) is not None:
            reason = f"invalid resource name {ref.name!r}: {problem}"
        else:
            reason = self._errors.get(ref, ("not fetched from the API server yet", 0.0))[0]
        raise ObjectUnavailable(f"couldn't get {ref.kind} {ref.namespace}/{ref.name}: {reason}")

    def get_config_map(self, namespace: str, name: str) -> ConfigMap | None:
        return _typed(self.lookup(ObjectRef(CONFIG_MAPS, namespace, name)), ConfigMap)

    def get_secret(self, namespace: str, name: str) -> Secret | None:
        return _typed(self.lookup(ObjectRef(SECRETS, namespace, name)), Secret)

    def cached(self, ref: ObjectRef) -> bool:
        return ref in self._entries

    async def ensure_pod(self, pod: Pod) -> None:
        """Fetch the pod's referenced objects that are not cached or older than the TTL."""
        await self.ensure(referenced_objects(pod))

    def current_ttl(self) -> float:
        override = self.ttl_source() if self.ttl_source is not None else None
        return self.ttl if override is None else override

    async def ensure(self, refs: list[ObjectRef]) -> None:
        now = trio.current_time()
        ttl = self.current_ttl()
        for ref in refs:
            entry = self._entries.get(ref)
            if entry is not None:
                entry.used_at = now
                if now - entry.fetched_at < ttl:
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
                "object not found", extra=kv(resource=ref.resource, namespace=ref.namespace, name=ref.name)
            )
        except ApiClientError as err:
            logger.warning(
                "fetching object failed",
                extra=kv(resource=ref.resource, namespace=ref.namespace, name=ref.name, error=err),
            )
            self._errors[ref] = (str(err), trio.current_time())
            if not self.keep_stale:
                self._entries.pop(ref, None)
            return  # keep what we had (or nothing): retried on the next sync
        else:
            value = ref.decode(obj)
        now = trio.current_time()
        if entry is not None and entry.value != value:
            logger.info(
                "object changed", extra=kv(resource=ref.resource, namespace=ref.namespace, name=ref.name)
            )
        self._entries[ref] = _Entry(value, now, now)
        self._errors.pop(ref, None)

    def _evict(self, now: float) -> None:
        horizon = max(self.ttl, DEFAULT_TTL) * EVICT_AFTER_TTLS
        for ref in [r for r, e in self._entries.items() if now - e.used_at > horizon]:
            del self._entries[ref]
        for ref in [r for r, (_, when) in self._errors.items() if now - when > horizon]:
            del self._errors[ref]


@attrs.define(eq=False)
class _Watch:
    reflector: ObjectReflector
    scope: trio.CancelScope
    used_at: float
    value: ConfigMap | Secret | None = None


@attrs.define(eq=False)
class WatchingObjectStore:
    """The ``Watch`` strategy (see the module docstring). A component: ``nursery.start(store.run)``
    before pods sync; ``ensure_pod`` starts and awaits the pod's watches, ``get_*`` read them."""

    client: ApiClient
    idle_after: float = 5 * DEFAULT_TTL
    max_watches: int = 64
    _watches: dict[ObjectRef, _Watch] = attrs.Factory(dict)
    _overflow: ApiObjectStore = attrs.field(init=False)
    _nursery: trio.Nursery | None = None

    def __attrs_post_init__(self) -> None:
        self._overflow = ApiObjectStore(self.client, ttl=0)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            while True:
                await trio.sleep(self.idle_after / 2)
                self._drop_idle()

    async def ensure_pod(self, pod: Pod) -> None:
        await self.ensure(referenced_objects(pod))

    async def ensure(self, refs: list[ObjectRef]) -> None:
        """Watch each object (starting watches as needed) and wait until each has been listed."""
        now = trio.current_time()
        waiting: list[_Watch] = []
        overflow: list[ObjectRef] = []
        for ref in refs:
            watch = self._watches.get(ref)
            if watch is None:
                if len(self._watches) >= self.max_watches or self._nursery is None:
                    overflow.append(ref)
                    continue
                watch = self._start(ref, now)
            watch.used_at = now
            waiting.append(watch)
        for watch in waiting:
            await watch.reflector.synced.wait()
        if overflow:
            await self._overflow.ensure(overflow)

    def _start(self, ref: ObjectRef, now: float) -> _Watch:
        assert self._nursery is not None
        scope = trio.CancelScope()
        reflector = ObjectReflector(self.client, ref.collection, ref.name)
        watch = _Watch(reflector, scope, now)

        def changed(obj: dict[str, Any] | None) -> None:
            try:
                watch.value = ref.decode(obj) if obj is not None else None
            except (AttributeError, TypeError, ValueError) as err:  # a malformed object: keep the last
                logger.error(
                    "undecodable object",
                    extra=kv(kind=ref.kind, object=kref(ref.namespace, ref.name), error=err),
                )
                return
            logger.info(
                "object changed" if obj else "object absent",
                extra=kv(resource=ref.resource, namespace=ref.namespace, name=ref.name),
            )

        def failed(err: Exception) -> None:
            # The Node authorizer lets a node read only what its pods reference: once the last such pod is
            # gone (Go's manager unregisters it then), the watch is refused; stop it rather than retry.
            # Before the first list a refusal may just be the authorizer's graph catching up: keep trying.
            if isinstance(err, StatusError) and err.code == 403 and reflector.synced.is_set():
                self._stop(ref, "no longer authorized")

        reflector.on_change = changed
        reflector.on_failure = failed

        async def follow() -> None:
            with scope:
                await reflector.run()

        self._watches[ref] = watch
        self._nursery.start_soon(follow)
        logger.info(
            "watching object", extra=kv(resource=ref.resource, namespace=ref.namespace, name=ref.name)
        )
        return watch

    def _drop_idle(self) -> None:
        now = trio.current_time()
        for ref in [r for r, w in self._watches.items() if now - w.used_at > self.idle_after]:
            self._stop(ref, "unused")

    def _stop(self, ref: ObjectRef, why: str) -> None:
        watch = self._watches.pop(ref, None)
        if watch is None:
            return
        watch.scope.cancel()
        logger.info(
            "stopped watching object",
            extra=kv(resource=ref.resource, namespace=ref.namespace, name=ref.name, reason=why),
        )

    def lookup(self, ref: ObjectRef) -> ConfigMap | Secret | None:
        watch = self._watches.get(ref)
        if watch is None:
            return self._overflow.lookup(ref)
        if not watch.reflector.synced.is_set():
            reason = watch.reflector.last_error or "not listed from the API server yet"
            raise ObjectUnavailable(f"couldn't get {ref.kind} {ref.namespace}/{ref.name}: {reason}")
        return watch.value

    def get_config_map(self, namespace: str, name: str) -> ConfigMap | None:
        return _typed(self.lookup(ObjectRef(CONFIG_MAPS, namespace, name)), ConfigMap)

    def get_secret(self, namespace: str, name: str) -> Secret | None:
        return _typed(self.lookup(ObjectRef(SECRETS, namespace, name)), Secret)
