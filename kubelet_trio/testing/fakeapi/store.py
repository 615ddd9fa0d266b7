"""The fake API server's storage: Kubernetes write semantics over plain JSON dicts.

One global resourceVersion counter bumped on every write; ``uid`` and ``creationTimestamp`` set on
create; 409 for a create of a taken name, a stale ``resourceVersion`` or a failed UID precondition; no-op
writes do not bump anything; pod deletion is graceful (``deletionTimestamp`` + grace period) unless the
grace period is 0 or the pod is unbound or terminal; the main resource of pods and nodes never changes
their status and the ``status`` subresource changes nothing else; the ``ephemeralcontainers``
subresource of pods changes only ``spec.ephemeralContainers``
(:mod:`kubelet_trio.testing.fakeapi.ephemeral`), the ``resize`` subresource only the containers' CPU and
memory and resize policies (:mod:`kubelet_trio.testing.fakeapi.resize`). Watches
replay a bounded history (an older resourceVersion is 410 Gone) and then follow live changes, with
field-selector transitions turned into ADDED/DELETED as a real watch cache does.

RuntimeClasses (``node.k8s.io/v1``, cluster-scoped) are validated as the API server does (``handler``
required, an RFC 1123 label, immutable), and a pod created with a ``runtimeClassName`` gets the class's
``overhead.podFixed`` as ``spec.overhead`` (the RuntimeClass admission plugin; a class that does not exist
is no error at creation, a conflicting overhead is 403).

Of the ServiceAccount admission plugin, a pod created without ``imagePullSecrets`` (and not a mirror pod)
gets those of its service account (``spec.serviceAccountName``, else ``default``) when that account
exists; the rest of the plugin (defaulting the account name, refusing a missing account, the token
volume) is not done here. A Secret created without a ``type`` is ``Opaque``, as the API server defaults it.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import math
import re
from collections import deque
from collections.abc import Callable
from typing import Any

import attrs
import trio
import trio_util

from kubelet_trio.api import Pod, default_pod
from kubelet_trio.api.timefmt import rfc3339
from kubelet_trio.testing.fakeapi.ephemeral import (
    EphemeralContainersInvalid,
    check_create,
    check_main_resource_update,
    update_ephemeral_containers,
)

Obj = dict[str, Any]
Key = tuple[str, str]

TERMINAL = ("Succeeded", "Failed")


class FakeApiError(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def status(self) -> Obj:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }


@attrs.frozen
class ResourceType:
    name: str
    kind: str
    api_version: str
    namespaced: bool = True
    has_status: bool = False

    @property
    def qualified(self) -> str:
        """``pods``, ``leases.coordination.k8s.io``: how API errors name the resource."""
        group = self.api_version.rpartition("/")[0]
        return f"{self.name}.{group}" if group else self.name


RESOURCES = {
    r.name: r
    for r in (
        ResourceType("pods", "Pod", "v1", has_status=True),
        ResourceType("nodes", "Node", "v1", namespaced=False, has_status=True),
        ResourceType("namespaces", "Namespace", "v1", namespaced=False, has_status=True),
        ResourceType("events", "Event", "v1"),
        ResourceType("configmaps", "ConfigMap", "v1"),
        ResourceType("secrets", "Secret", "v1"),
        ResourceType("serviceaccounts", "ServiceAccount", "v1"),
        ResourceType("services", "Service", "v1", has_status=True),
        ResourceType("leases", "Lease", "coordination.k8s.io/v1"),
        ResourceType("runtimeclasses", "RuntimeClass", "node.k8s.io/v1", namespaced=False),
        ResourceType(
            "certificatesigningrequests",
            "CertificateSigningRequest",
            "certificates.k8s.io/v1",
            namespaced=False,
            has_status=True,
        ),
    )
}

#: The ``kubernetes`` Service every API server has: pods find the API server through its variables.
MASTER_SERVICE: Obj = {
    "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"component": "apiserver"}},
    "spec": {
        "clusterIP": "10.0.0.1",
        "clusterIPs": ["10.0.0.1"],
        "type": "ClusterIP",
        "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
    },
}

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _validate_runtime_class(obj: Obj, current: Obj | None) -> None:
    name = (obj.get("metadata") or {}).get("name", "")
    handler = obj.get("handler")

    def invalid(detail: str) -> FakeApiError:
        return FakeApiError(
            422, "Invalid", f'RuntimeClass.node.k8s.io "{name}" is invalid: handler: {detail}'
        )

    if not handler:
        raise invalid("Required value")
    if len(handler) > 63 or not _DNS1123_LABEL.match(handler):
        raise invalid(
            f'Invalid value: "{handler}": a lowercase RFC 1123 label must consist of lower case '
            "alphanumeric characters or '-', and must start and end with an alphanumeric character"
        )
    if current is not None and handler != current.get("handler"):
        raise invalid(f'Invalid value: "{handler}": field is immutable')


def _lookup(obj: Obj, path: str) -> Any:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def parse_selector(text: str | None) -> Callable[[Obj], bool]:
    """fieldSelector/labelSelector subset: ``a=b``, ``a==b``, ``a!=b``, comma-joined (labels under
    ``metadata.labels``, fields as dotted paths)."""
    return _selector(text, labels=False)


def parse_label_selector(text: str | None) -> Callable[[Obj], bool]:
    return _selector(text, labels=True)


def _selector(text: str | None, *, labels: bool) -> Callable[[Obj], bool]:
    terms: list[tuple[str, str, str | None]] = []
    for raw in (text or "").split(","):
        term = raw.strip()
        if not term:
            continue
        if "!=" in term:
            key, value = term.split("!=", 1)
            terms.append((key.strip(), "!=", value.strip()))
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            terms.append((key.strip(), "=", value.strip()))
        else:
            terms.append((term, "exists", None))

    def get(obj: Obj, key: str) -> Any:
        if labels:
            return (_lookup(obj, "metadata.labels") or {}).get(key)
        value = _lookup(obj, key)
        return "" if value is None else str(value)

    def match(obj: Obj) -> bool:
        for key, op, value in terms:
            actual = get(obj, key)
            if op == "=" and actual != value:
                return False
            if op == "!=" and actual == value:
                return False
            if op == "exists" and actual is None:
                return False
        return True

    return match


@attrs.frozen
class Change:
    rv: int
    resource: str
    namespace: str
    type: str  # ADDED, MODIFIED, DELETED
    obj: Obj
    old: Obj | None


@attrs.define(eq=False)
class Watcher:
    resource: str
    namespace: str | None
    match: Callable[[Obj], bool]
    send: trio.MemorySendChannel[tuple[str, Obj]]
    receive: trio.MemoryReceiveChannel[tuple[str, Obj]]

    def offer(self, change: Change) -> None:
        if change.resource != self.resource:
            return
        if self.namespace is not None and change.namespace != self.namespace:
            return
        new_m = self.match(change.obj)
        old_m = change.old is not None and self.match(change.old)
        if change.type == "DELETED":
            kind = "DELETED" if new_m else None
        elif change.type == "ADDED":
            kind = "ADDED" if new_m else None
        elif new_m and old_m:
            kind = "MODIFIED"
        elif new_m:
            kind = "ADDED"
        elif old_m:
            kind = "DELETED"
        else:
            kind = None
        if kind is not None:
            with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
                self.send.send_nowait((kind, copy.deepcopy(change.obj)))


@attrs.define(eq=False)
class FakeStore:
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
    history_limit: int = 1000
    rv: int = 0
    compacted: int = 0  # watches from a resourceVersion below this are 410 Gone
    _objects: dict[str, dict[Key, Obj]] = attrs.Factory(dict)
    _history: deque[Change] = attrs.Factory(deque)
    _watchers: set[Watcher] = attrs.Factory(set)
    _uids: int = 0
    _continues: dict[str, tuple[list[Obj], int]] = attrs.Factory(dict)
    #: Pod status fields this server does not know and drops on write, as an API server older than the
    #: field does (kube-apiserver 1.24 drops ``hostIPs``, added in 1.28).
    unknown_pod_status_fields: frozenset[str] = frozenset()
    #: The resourceVersion, as a value tests can wait on (``await store.changed.wait_transition()``).
    changed: trio_util.AsyncValue[int] = attrs.Factory(lambda: trio_util.AsyncValue(0))

    def __attrs_post_init__(self) -> None:
        # kube-apiserver's own Service (its bootstrap controller keeps it), there before anything else:
        # stored as of resourceVersion 0, so the first write is still resourceVersion 1
        service = copy.deepcopy(MASTER_SERVICE)
        service["metadata"].update(
            uid="00000000-0000-4000-8000-00000000c1a5",
            resourceVersion="0",
            creationTimestamp=rfc3339(self.now()),
        )
        self._table("services")[("default", "kubernetes")] = service

    # -- helpers ------------------------------------------------------------------------------------

    def _type(self, resource: str) -> ResourceType:
        try:
            return RESOURCES[resource]
        except KeyError:
            raise FakeApiError(  # noqa: B904 - an API answer, not a chained failure
                404, "NotFound", f"the server could not find the requested resource ({resource})"
            )

    def _table(self, resource: str) -> dict[Key, Obj]:
        return self._objects.setdefault(resource, {})

    def _key(self, rtype: ResourceType, namespace: str | None, name: str) -> Key:
        return ((namespace or "") if rtype.namespaced else "", name)

    def _not_found(self, rtype: ResourceType, name: str) -> FakeApiError:
        return FakeApiError(404, "NotFound", f'{rtype.qualified} "{name}" not found')

    def _apply_runtime_class(self, pod: Obj) -> None:
        """The RuntimeClass admission plugin on pod creation: the class's fixed overhead."""
        spec = pod.get("spec") or {}
        name = pod["metadata"]["name"]
        class_name = spec.get("runtimeClassName")
        if not class_name:
            return
        runtime_class = self._table("runtimeclasses").get(("", class_name))
        fixed = ((runtime_class or {}).get("overhead") or {}).get("podFixed")
        if not fixed:
            return
        if spec.get("overhead") not in (None, fixed):
            raise FakeApiError(
                403,
                "Forbidden",
                f'pods "{name}" is forbidden: pod rejected: '
                "Pod's Overhead doesn't match RuntimeClass's defined Overhead",
            )
        spec["overhead"] = copy.deepcopy(fixed)

    def _apply_service_account_pull_secrets(self, pod: Obj, namespace: str) -> None:
        """The ServiceAccount admission plugin's ``imagePullSecrets``: the account's, when the pod has none
        (a mirror pod is never changed)."""
        meta, spec = pod["metadata"], pod.setdefault("spec", {})
        if "kubernetes.io/config.mirror" in (meta.get("annotations") or {}) or spec.get("imagePullSecrets"):
            return
        account = self._table("serviceaccounts").get((namespace, spec.get("serviceAccountName") or "default"))
        refs = [{"name": ref.get("name", "")} for ref in (account or {}).get("imagePullSecrets") or ()]
        if refs:
            spec["imagePullSecrets"] = refs

    def _record(self, change: Change) -> None:
        self._history.append(change)
        while len(self._history) > self.history_limit:
            dropped = self._history.popleft()
            self.compacted = dropped.rv
        for watcher in list(self._watchers):
            watcher.offer(change)

    def _bump(self, obj: Obj) -> Obj:
        self.rv += 1
        self.changed.value = self.rv
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        return obj

    def _decorate(self, rtype: ResourceType, obj: Obj) -> Obj:
        obj.setdefault("kind", rtype.kind)
        obj.setdefault("apiVersion", rtype.api_version)
        return obj

    def new_uid(self) -> str:
        self._uids += 1
        return f"00000000-0000-4000-8000-{self._uids:012d}"

    # -- verbs --------------------------------------------------------------------------------------

    def create(self, resource: str, namespace: str | None, obj: Obj) -> Obj:
        rtype = self._type(resource)
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        name = meta.get("name")
        if not name and meta.get("generateName"):
            name = f"{meta['generateName']}{self._uids + 1:05x}"
            meta["name"] = name
        if not name:
            raise FakeApiError(422, "Invalid", f"{rtype.kind} is invalid: metadata.name: Required value")
        if rtype.namespaced:
            namespace = namespace or meta.get("namespace") or "default"
            if meta.get("namespace") not in (None, namespace):
                raise FakeApiError(
                    400, "BadRequest", "the namespace of the object does not match the request"
                )
            meta["namespace"] = namespace
        key = self._key(rtype, namespace, name)
        table = self._table(resource)
        if key in table:
            raise FakeApiError(409, "AlreadyExists", f'{rtype.name} "{name}" already exists')
        for field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(field, None)
        meta["uid"] = self.new_uid()
        meta["creationTimestamp"] = rfc3339(self.now())
        if resource == "pods":
            try:
                check_create(obj)
            except EphemeralContainersInvalid as err:
                raise FakeApiError(422, "Invalid", str(err)) from None
            self._apply_runtime_class(obj)
            self._apply_service_account_pull_secrets(obj, key[0])
            obj = default_pod(Pod.from_dict(obj)).to_dict()
            obj["status"] = {"phase": "Pending"}
            obj["metadata"]["generation"] = 1  # as kube-apiserver 1.33+: bumped by each spec change
        if resource == "secrets":
            obj["type"] = obj.get("type") or "Opaque"
        if resource == "runtimeclasses":
            _validate_runtime_class(obj, None)
        if resource == "certificatesigningrequests":
            from kubelet_trio.testing.fakeapi.csr import check_csr_create  # csr builds on this module

            check_csr_create(obj)
        self._decorate(rtype, obj)
        self._bump(obj)
        table[key] = obj
        self._record(Change(self.rv, resource, key[0], "ADDED", copy.deepcopy(obj), None))
        return copy.deepcopy(obj)

    def get(self, resource: str, namespace: str | None, name: str) -> Obj:
        rtype = self._type(resource)
        obj = self._table(resource).get(self._key(rtype, namespace, name))
        if obj is None:
            raise self._not_found(rtype, name)
        return copy.deepcopy(obj)

    def list(
        self,
        resource: str,
        namespace: str | None,
        *,
        field_selector: str | None = None,
        label_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> Obj:
        rtype = self._type(resource)
        if continue_token:
            if continue_token not in self._continues:
                raise FakeApiError(410, "Expired", "the provided continue parameter is too old")
            items, rv = self._continues.pop(continue_token)
        else:
            fields, labels = parse_selector(field_selector), parse_label_selector(label_selector)
            items = [
                copy.deepcopy(obj)
                for key, obj in sorted(self._table(resource).items())
                if (namespace is None or key[0] == namespace) and fields(obj) and labels(obj)
            ]
            rv = self.rv
        meta: Obj = {"resourceVersion": str(rv)}
        if limit and len(items) > limit:
            token = f"c{len(self._continues)}-{rv}-{id(items)}"
            self._continues[token] = (items[limit:], rv)
            items = items[:limit]
            meta["continue"] = token
        return {
            "kind": f"{rtype.kind}List",
            "apiVersion": rtype.api_version,
            "metadata": meta,
            "items": items,
        }

    def _check_preconditions(self, rtype: ResourceType, current: Obj, wanted: Obj) -> None:
        meta = wanted.get("metadata") or {}
        cur = current["metadata"]
        uid = meta.get("uid")
        if uid and uid != cur.get("uid"):
            raise FakeApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {rtype.name} "{cur["name"]}": Precondition failed: '
                f"UID in precondition: {uid}, UID in object meta: {cur.get('uid')}",
            )
        rv = meta.get("resourceVersion")
        if rv and rv != cur.get("resourceVersion"):
            raise FakeApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {rtype.name} "{cur["name"]}": the object has been '
                "modified; please apply your changes to the latest version and try again",
            )

    def _write(
        self, resource: str, namespace: str | None, name: str, wanted: Obj, subresource: str | None
    ) -> Obj:
        rtype = self._type(resource)
        key = self._key(rtype, namespace, name)
        table = self._table(resource)
        current = table.get(key)
        if current is None:
            raise self._not_found(rtype, name)
        self._check_preconditions(rtype, current, wanted)
        if subresource == "status":
            if not rtype.has_status:
                raise self._not_found(rtype, f"{name}/status")
            result = copy.deepcopy(current)
            if "status" in wanted:
                result["status"] = copy.deepcopy(wanted["status"])
                if resource == "pods":
                    for dropped in self.unknown_pod_status_fields:
                        result["status"].pop(dropped, None)
            else:
                result.pop("status", None)
            if resource == "pods":
                _keep_observed_generations(result.get("status"), current.get("status"))
        elif subresource == "approval" and resource == "certificatesigningrequests":
            from kubelet_trio.testing.fakeapi.csr import approve_csr  # csr builds on this module

            result = approve_csr(current, wanted)  # only status.conditions change
        elif subresource == "ephemeralcontainers" and resource == "pods":
            try:
                result = update_ephemeral_containers(current, wanted)
            except EphemeralContainersInvalid as err:
                raise FakeApiError(422, "Invalid", str(err)) from None
        elif subresource == "resize" and resource == "pods":
            from kubelet_trio.testing.fakeapi.resize import PodResizeInvalid, admit_resize, resize_pod

            try:
                result = resize_pod(current, wanted)
            except PodResizeInvalid as err:
                raise FakeApiError(422, "Invalid", str(err)) from None
            node_name = (result.get("spec") or {}).get("nodeName")
            if result.get("spec") != current.get("spec") and node_name:  # the generation changes
                node = self._table("nodes").get(self._key(self._type("nodes"), None, node_name))
                refusal = admit_resize(result, node)
                if refusal is not None:
                    raise FakeApiError(403, "Forbidden", f'pods "{name}" is forbidden: {refusal}')
        elif subresource is not None:
            raise self._not_found(rtype, f"{name}/{subresource}")
        else:
            if resource == "pods":
                try:
                    check_main_resource_update(current, wanted)
                except EphemeralContainersInvalid as err:
                    raise FakeApiError(422, "Invalid", str(err)) from None
            result = copy.deepcopy(wanted)
            meta = result.setdefault("metadata", {})
            for field in (
                "uid",
                "creationTimestamp",
                "name",
                "namespace",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
            ):
                if field in current["metadata"]:
                    meta[field] = current["metadata"][field]
            if rtype.has_status:
                if "status" in current:
                    result["status"] = copy.deepcopy(current["status"])
                else:
                    result.pop("status", None)
        if resource == "pods" and subresource != "status":
            _bump_pod_generation(result, current)
        self._decorate(rtype, result)
        if resource == "runtimeclasses":
            _validate_runtime_class(result, current)
        old_phase = (current.get("status") or {}).get("phase")
        new_phase = (result.get("status") or {}).get("phase")
        if resource == "pods" and old_phase in TERMINAL and new_phase != old_phase:
            raise FakeApiError(
                422,
                "Invalid",
                f'Pod "{name}" is invalid: status.phase: Forbidden: may not transition from {old_phase} '
                f"to {new_phase}",
            )
        result["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        if result == current:
            return copy.deepcopy(current)  # a no-op write bumps nothing and notifies nobody
        self._bump(result)
        table[key] = result
        self._record(
            Change(self.rv, resource, key[0], "MODIFIED", copy.deepcopy(result), copy.deepcopy(current))
        )
        return copy.deepcopy(result)

    def replace(
        self, resource: str, namespace: str | None, name: str, obj: Obj, subresource: str | None = None
    ) -> Obj:
        return self._write(resource, namespace, name, obj, subresource)

    def patch(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        patch: Obj,
        subresource: str | None = None,
        *,
        strategic: bool = False,
    ) -> Obj:
        """A merge patch (RFC 7386); with ``strategic`` a strategic merge patch, whose pod container
        lists merge by name (the rest of the object as a merge patch)."""
        from kubelet_trio.client.merge import apply_merge_patch

        current = self.get(resource, namespace, name)
        preconditions = {
            k: v for k, v in (patch.get("metadata") or {}).items() if k in ("uid", "resourceVersion")
        }
        if strategic and resource == "pods":
            patched = _strategic_pod_patch(current, patch)
        else:
            patched = apply_merge_patch(current, patch)
        meta = patched.setdefault("metadata", {})
        meta.pop("resourceVersion", None)
        meta.pop("uid", None)
        meta.update(preconditions)
        if "uid" not in meta:
            meta["uid"] = current["metadata"].get("uid")
        return self._write(resource, namespace, name, patched, subresource)

    def delete(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        *,
        grace_period_seconds: int | None = None,
        uid: str | None = None,
    ) -> Obj:
        rtype = self._type(resource)
        key = self._key(rtype, namespace, name)
        table = self._table(resource)
        current = table.get(key)
        if current is None:
            raise self._not_found(rtype, name)
        if uid and uid != current["metadata"].get("uid"):
            raise FakeApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {rtype.name} "{name}": Precondition failed: UID in '
                f"precondition: {uid}, UID in object meta: {current['metadata'].get('uid')}",
            )
        if resource == "pods":
            grace = grace_period_seconds
            if grace is None:
                grace = (current.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            bound = bool((current.get("spec") or {}).get("nodeName"))
            phase = (current.get("status") or {}).get("phase")
            if bound and phase not in TERMINAL and grace > 0:
                meta = current["metadata"]
                existing = meta.get("deletionGracePeriodSeconds")
                if existing is not None and existing <= grace:
                    return copy.deepcopy(current)
                updated = copy.deepcopy(current)
                updated["metadata"]["deletionTimestamp"] = rfc3339(self.now() + dt.timedelta(seconds=grace))
                updated["metadata"]["deletionGracePeriodSeconds"] = grace
                self._bump(updated)
                table[key] = updated
                self._record(
                    Change(
                        self.rv, resource, key[0], "MODIFIED", copy.deepcopy(updated), copy.deepcopy(current)
                    )
                )
                return copy.deepcopy(updated)
        del table[key]
        removed = self._bump(copy.deepcopy(current))
        self._record(
            Change(self.rv, resource, key[0], "DELETED", copy.deepcopy(removed), copy.deepcopy(current))
        )
        return removed

    def delete_collection(
        self,
        resource: str,
        namespace: str | None,
        *,
        field_selector: str | None = None,
        label_selector: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> Obj:
        """Delete every selected object as :meth:`delete` would (pods on nodes gracefully). The answer is
        the list as it was before, as kube-apiserver's delete-collection answers."""
        selected = self.list(
            resource, namespace, field_selector=field_selector, label_selector=label_selector
        )
        for obj in selected["items"]:
            meta = obj["metadata"]
            with contextlib.suppress(FakeApiError):  # gone meanwhile
                self.delete(
                    resource, meta.get("namespace"), meta["name"], grace_period_seconds=grace_period_seconds
                )
        return selected

    # -- watch --------------------------------------------------------------------------------------

    def watch(
        self,
        resource: str,
        namespace: str | None,
        resource_version: str | None,
        *,
        field_selector: str | None = None,
        label_selector: str | None = None,
    ) -> Watcher:
        """Register a watcher; events since ``resource_version`` are queued on it first."""
        self._type(resource)
        fields, labels = parse_selector(field_selector), parse_label_selector(label_selector)

        def match(obj: Obj) -> bool:
            return fields(obj) and labels(obj)

        send, receive = trio.open_memory_channel[tuple[str, Obj]](math.inf)
        watcher = Watcher(resource, namespace, match, send, receive)
        if resource_version in (None, "", "0"):
            listing = self.list(
                resource, namespace, field_selector=field_selector, label_selector=label_selector
            )
            for item in listing["items"]:
                send.send_nowait(("ADDED", item))
        else:
            try:
                since = int(resource_version)
            except ValueError:
                raise FakeApiError(
                    400, "BadRequest", f"invalid resourceVersion {resource_version!r}"
                ) from None
            if since < self.compacted:
                raise FakeApiError(
                    410, "Expired", f"too old resource version: {since} ({self.compacted + 1})"
                )
            for change in self._history:
                if change.rv > since:
                    watcher.offer(change)
        self._watchers.add(watcher)
        return watcher

    def stop_watch(self, watcher: Watcher) -> None:
        self._watchers.discard(watcher)
        watcher.send.close()

    def stop_all_watches(self) -> None:
        """End every watch stream cleanly (as an API server restart or a timeout would)."""
        for watcher in list(self._watchers):
            self.stop_watch(watcher)

    def compact(self) -> None:
        """Forget the whole history: any watch from an older resourceVersion now gets 410."""
        self._history.clear()
        self.compacted = self.rv

    @property
    def watch_count(self) -> int:
        return len(self._watchers)


def _strategic_pod_patch(current: Obj, patch: Obj) -> Obj:
    """A strategic merge patch of a pod as far as the fake goes: ``spec.containers`` and
    ``spec.initContainers`` merge by ``name`` (each element a merge patch of the container of that name, an
    unknown name appended), everything else as a merge patch. No ``$patch`` directives."""
    from kubelet_trio.client.merge import apply_merge_patch

    patch = copy.deepcopy(patch)
    spec_patch = patch.get("spec")
    lists: dict[str, list[Any]] = {}
    if isinstance(spec_patch, dict):
        for key in ("containers", "initContainers"):
            if isinstance(spec_patch.get(key), list):
                lists[key] = spec_patch.pop(key)
    result: Obj = apply_merge_patch(current, patch)
    for key, items in lists.items():
        merged = result.setdefault("spec", {}).setdefault(key, [])
        for item in items:
            names = [c.get("name") for c in merged]
            if isinstance(item, dict) and item.get("name") in names:
                index = names.index(item["name"])
                merged[index] = apply_merge_patch(merged[index], item)
            else:
                merged.append(item)
    return result


def _bump_pod_generation(pod: Obj, current: Obj) -> None:
    """kube-apiserver's ``updatePodGeneration``: each write that changes the spec bumps
    ``metadata.generation``; nothing else does."""
    generation = current["metadata"].get("generation") or 1
    if pod.get("spec") != current.get("spec"):
        generation += 1
    pod.setdefault("metadata", {})["generation"] = generation


def _keep_observed_generations(status: Obj | None, current: Obj | None) -> None:
    """kube-apiserver's ``preserveOldObservedGeneration``: a status write that leaves ``observedGeneration``
    out (of the status or of a condition) keeps the old value."""
    if status is None or not current:
        return
    if not status.get("observedGeneration") and current.get("observedGeneration"):
        status["observedGeneration"] = current["observedGeneration"]
    old: dict[str, list[int]] = {}
    for condition in current.get("conditions") or ():
        old.setdefault(condition.get("type"), []).append(condition.get("observedGeneration") or 0)
    for condition in status.get("conditions") or ():
        kept = old.get(condition.get("type")) or [0]
        value = kept.pop(0) if kept else 0
        if not condition.get("observedGeneration") and value:
            condition["observedGeneration"] = value
