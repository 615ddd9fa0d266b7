"""The fake API server as an ASGI app: REST routes over :class:`FakeStore`, watch streams, fault hooks.

Routes: core ``/api/v1`` (cluster-scoped nodes and namespaces, namespaced pods, events, configmaps,
secrets, serviceaccounts), ``/apis/coordination.k8s.io/v1`` leases and ``/apis/node.k8s.io/v1``
runtimeclasses (each resource only under its own group's path); ``/version``, ``/healthz``;
TokenReview and SubjectAccessReview creation, answered from :attr:`FakeApiApp.tokens` and
:attr:`FakeApiApp.allowed`; TokenRequest (``serviceaccounts/<name>/token``,
:mod:`kubelet_trio.testing.fakeapi.tokens`).
Verbs: GET (list, ``watch=true``), POST, PUT, PATCH (``application/merge-patch+json``; also accepted as
``strategic-merge-patch+json`` for the fields the kubelet writes; on ``pods/<name>/resize``, as kubectl
sends it, a strategic patch merges the container lists by name), DELETE with ``DeleteOptions`` (also of
a collection, by label and field selector). Pods
have the ``status``, ``ephemeralcontainers`` and ``resize`` subresources (GET, PUT, PATCH).

``GET .../pods/<name>/log`` is proxied, as the API server does for ``kubectl logs``, to the pod's node:
``https://<InternalIP>:<daemonEndpoints.kubeletEndpoint.Port>/containerLogs/...`` with the client
certificate in :attr:`FakeApiApp.kubelet_tls` (``--kubelet-client-certificate``); the kubelet's answer
(status and body) is passed back. ``pods/exec``, ``pods/attach`` and ``pods/portforward`` upgrade requests
(SPDY or WebSocket, from ``kubectl exec``/``attach``/``port-forward``/``cp``) go the same way to the
node's ``/exec``, ``/attach`` and ``/portForward`` and are then copied both ways byte for byte.

Watches stream newline-delimited JSON events, send BOOKMARKs every ``bookmark_interval`` seconds when
asked to (``allowWatchBookmarks``), end after ``timeoutSeconds``, and answer an expired resourceVersion
with a single ERROR event carrying a 410 ``Status`` (as the watch cache does). Tests can inject error
answers (:meth:`FakeApiApp.inject`) and read every request (:attr:`FakeApiApp.requests`).
"""

from __future__ import annotations

import json
import logging
import re
import ssl
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import parse_qs, urlencode

import attrs
import httpx
import trio

from kubelet_trio.httpserver.http11 import UPGRADE_EXTENSION
from kubelet_trio.server.proxy import StreamProxy
from kubelet_trio.testing.fakeapi.discovery import discovery
from kubelet_trio.testing.fakeapi.store import RESOURCES, FakeApiError, FakeStore, Obj
from kubelet_trio.testing.fakeapi.tokens import TokenIssuer

logger = logging.getLogger(__name__)

Scope = Mapping[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_NAMESPACED = re.compile(
    r"^/(?P<prefix>api/v1|apis/[^/]+/[^/]+)/namespaces/(?P<ns>[^/]+)/(?P<resource>[a-z]+)"
    r"(?:/(?P<name>[^/]+)(?:/(?P<sub>[a-z]+))?)?$"
)
_CLUSTER = re.compile(
    r"^/(?P<prefix>api/v1|apis/[^/]+/[^/]+)/(?P<resource>[a-z]+)(?:/(?P<name>[^/]+)(?:/(?P<sub>status|approval))?)?$"
)


def _group_prefix(api_version: str) -> str:
    """Where a group/version is served: ``api/v1`` for core, ``apis/<group>/<version>`` else."""
    return "api/v1" if api_version == "v1" else f"apis/{api_version}"


STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
_POD_LOG = re.compile(r"^/api/v1/namespaces/[^/]+/pods/[^/]+/log$")
_POD_STREAM = re.compile(r"^/api/v1/namespaces/[^/]+/pods/[^/]+/(?P<sub>exec|attach|portforward)$")
#: PodExecOptions/PodAttachOptions fields → the kubelet's query parameters (Go: ``streamParams``).
_STREAM_PARAMS = {"stdin": "input", "stdout": "output", "stderr": "error", "tty": "tty"}


@attrs.frozen
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    content_type: str


@attrs.define
class Injection:
    method: str
    path: re.Pattern[str]
    code: int
    reason: str
    message: str
    times: int
    headers: dict[str, str]


@attrs.define(eq=False)
class FakeApiApp:
    store: FakeStore = attrs.Factory(FakeStore)
    bookmark_interval: float = 5.0
    default_watch_timeout: float = 1800.0
    token: str | None = None  # when set, requests must carry "Authorization: Bearer <token>"
    requests: list[RecordedRequest] = attrs.Factory(list)
    record_requests: bool = True  # False: keep no request log (a long-running server)
    #: TokenReview: token -> user info (``{"username": ..., "groups": [...]}``); other tokens fail.
    tokens: dict[str, dict[str, Any]] = attrs.Factory(dict)
    #: SubjectAccessReview allow-list: (user, verb, "resource/subresource"); everything else is denied.
    allowed: set[tuple[str, str, str]] = attrs.Factory(set)
    issuer: TokenIssuer = attrs.field(init=False)
    #: TLS for proxying to kubelets (client certificate, trust); None: no client certificate, no checks.
    kubelet_tls: ssl.SSLContext | None = None
    _injections: list[Injection] = attrs.Factory(list)

    def __attrs_post_init__(self) -> None:
        self.issuer = TokenIssuer(self.store)

    def inject(
        self,
        method: str,
        path: str,
        code: int,
        *,
        times: int = 1,
        reason: str = "",
        message: str = "injected failure",
        headers: dict[str, str] | None = None,
    ) -> None:
        """Answer the next ``times`` requests matching ``method`` and the ``path`` regex with ``code``."""
        self._injections.append(
            Injection(
                method, re.compile(path), code, reason or f"Injected{code}", message, times, headers or {}
            )
        )

    def _injected(self, method: str, path: str) -> Injection | None:
        for injection in self._injections:
            if injection.method == method and injection.path.search(path) and injection.times > 0:
                injection.times -= 1
                return injection
        return None

    def requests_for(self, method: str, pattern: str) -> list[RecordedRequest]:
        regex = re.compile(pattern)
        return [r for r in self.requests if r.method == method and regex.search(r.path)]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
        method = scope["method"]
        path = scope["path"]
        query = {k: v[-1] for k, v in parse_qs(scope.get("query_string", b"").decode()).items()}
        try:
            decoded = json.loads(body) if body else None
        except ValueError:
            await _respond(send, 400, FakeApiError(400, "BadRequest", "body is not JSON").status())
            return
        if self.record_requests:
            self.requests.append(
                RecordedRequest(method, path, query, decoded, headers.get("content-type", ""))
            )
        if self.token is not None and headers.get("authorization") != f"Bearer {self.token}":
            await _respond(send, 401, FakeApiError(401, "Unauthorized", "Unauthorized").status())
            return
        injection = self._injected(method, path)
        if injection is not None:
            error = FakeApiError(injection.code, injection.reason, injection.message)
            await _respond(send, injection.code, error.status(), injection.headers)
            return
        if path in ("/healthz", "/readyz", "/livez"):  # plain text, as kube-apiserver answers
            await _respond_raw(send, 200, b"ok", "text/plain; charset=utf-8")
            return
        try:
            if method == "GET" and query.get("watch") in ("true", "1"):
                await self._watch(path, query, receive, send)
                return
            if method == "GET" and _POD_LOG.match(path):
                await self._pod_log(path, query, send)
                return
            if method in ("GET", "POST") and _POD_STREAM.match(path):
                await self._pod_stream(scope, path, send)
                return
            code, answer = self._handle(method, path, query, decoded, headers.get("content-type", ""))
        except FakeApiError as err:
            await _respond(send, err.code, err.status())
            return
        await _respond(send, code, answer)

    def _route(self, path: str) -> tuple[str, str | None, str | None, str | None]:
        """(resource, namespace, name, subresource); a resource asked for under another API group's
        path is not found, as on a real server."""
        match = _NAMESPACED.match(path) or _CLUSTER.match(path)
        rtype = RESOURCES.get(match["resource"]) if match else None
        if match is None or (rtype is not None and match["prefix"] != _group_prefix(rtype.api_version)):
            raise FakeApiError(404, "NotFound", f"the server could not find the requested resource {path}")
        return match["resource"], match.groupdict().get("ns"), match["name"], match["sub"]

    def _handle(
        self, method: str, path: str, query: dict[str, str], body: Any, content_type: str = ""
    ) -> tuple[int, Obj]:
        if path == "/version":
            return 200, {"major": "1", "minor": "36", "gitVersion": "v1.36.0-fake"}
        if method == "GET" and (document := discovery(path)) is not None:
            return 200, document
        if method == "POST" and path == "/apis/authentication.k8s.io/v1/tokenreviews":
            return 201, self._token_review(body)
        if method == "POST" and path == "/apis/authorization.k8s.io/v1/subjectaccessreviews":
            return 201, self._access_review(body)
        resource, namespace, name, sub = self._route(path)
        store = self.store
        if method == "POST" and resource == "serviceaccounts" and name and sub == "token":
            assert namespace is not None
            answer, user = self.issuer.issue(namespace, name, body)
            self.tokens[answer["status"]["token"]] = user
            return 201, answer
        if name is None:
            if method == "GET":
                limit = int(query["limit"]) if query.get("limit") else None
                return 200, store.list(
                    resource,
                    namespace,
                    field_selector=query.get("fieldSelector"),
                    label_selector=query.get("labelSelector"),
                    limit=limit,
                    continue_token=query.get("continue"),
                )
            if method == "POST":
                if not isinstance(body, dict):
                    raise FakeApiError(400, "BadRequest", "expected an object")
                return 201, store.create(resource, namespace, body)
            if method == "DELETE":
                return 200, store.delete_collection(
                    resource,
                    namespace,
                    field_selector=query.get("fieldSelector"),
                    label_selector=query.get("labelSelector"),
                    grace_period_seconds=_grace_period(body, query),
                )
            raise FakeApiError(405, "MethodNotAllowed", f"{method} is not allowed on a collection")
        if method == "GET":
            if sub:
                store.get(resource, namespace, name)
            return 200, store.get(resource, namespace, name)
        if method == "PUT":
            if not isinstance(body, dict):
                raise FakeApiError(400, "BadRequest", "expected an object")
            return 200, store.replace(resource, namespace, name, body, sub)
        if method == "PATCH":
            if not isinstance(body, dict):
                raise FakeApiError(400, "BadRequest", "expected a merge patch object")
            # strategic merge patches merge container lists by name on the resize subresource only
            # (kubectl patch --subresource resize sends one); elsewhere they are taken as merge patches
            strategic = sub == "resize" and content_type.startswith(STRATEGIC_MERGE_PATCH)
            return 200, store.patch(resource, namespace, name, body, sub, strategic=strategic)
        if method == "DELETE":
            options = body if isinstance(body, dict) else {}
            uid = (options.get("preconditions") or {}).get("uid")
            grace = _grace_period(body, query)
            return 200, store.delete(resource, namespace, name, grace_period_seconds=grace, uid=uid)
        raise FakeApiError(405, "MethodNotAllowed", f"{method} is not allowed")

    async def _pod_log(self, path: str, query: dict[str, str], send: Send) -> None:
        _, namespace, name, _ = self._route(path)
        assert namespace is not None and name is not None
        pod = self.store.get("pods", namespace, name)
        names = [c["name"] for c in pod["spec"]["containers"]]
        container = query.get("container") or (names[0] if len(names) == 1 else "")
        if not container:
            raise FakeApiError(
                400,
                "BadRequest",
                f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]",
            )
        all_names = names + [
            c["name"] for key in ("initContainers", "ephemeralContainers") for c in pod["spec"].get(key) or ()
        ]
        if container not in all_names:
            raise FakeApiError(400, "BadRequest", f"container {container} is not valid for pod {name}")
        node_name = pod["spec"].get("nodeName")
        if not node_name:
            raise FakeApiError(400, "BadRequest", f"pod {name} does not have a host assigned")
        status = self.store.get("nodes", None, node_name).get("status") or {}
        ips = [a["address"] for a in status.get("addresses") or () if a["type"] == "InternalIP"]
        port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")
        if not ips or not port:
            raise FakeApiError(500, "InternalError", f"node {node_name} has no InternalIP or kubelet port")
        url = f"https://{ips[0]}:{port}/containerLogs/{namespace}/{name}/{container}"
        params = {k: v for k, v in query.items() if k != "container"}
        async with httpx.AsyncClient(verify=self.kubelet_tls or False, timeout=30) as client:
            try:
                answer = await client.get(url, params=params)
            except httpx.TransportError as err:
                raise FakeApiError(500, "InternalError", f"error dialing backend: {err}") from None
        headers = [(b"content-type", answer.headers.get("content-type", "text/plain").encode())]
        await send({"type": "http.response.start", "status": answer.status_code, "headers": headers})
        await send({"type": "http.response.body", "body": answer.content, "more_body": False})

    def _kubelet_base(self, pod: Obj) -> str:
        """``https://<InternalIP>:<kubelet port>`` of the pod's node."""
        name = pod["metadata"]["name"]
        node_name = pod["spec"].get("nodeName")
        if not node_name:
            raise FakeApiError(400, "BadRequest", f"pod {name} does not have a host assigned")
        status = self.store.get("nodes", None, node_name).get("status") or {}
        ips = [a["address"] for a in status.get("addresses") or () if a["type"] == "InternalIP"]
        port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")
        if not ips or not port:
            raise FakeApiError(500, "InternalError", f"node {node_name} has no InternalIP or kubelet port")
        return f"https://{ips[0]}:{port}"

    async def _pod_stream(self, scope: Scope, path: str, send: Send) -> None:
        """``pods/exec``, ``pods/attach``, ``pods/portforward``: the client's upgrade request goes to the
        node's ``/exec``, ``/attach`` or ``/portForward`` (with the kubelet client certificate) and the
        upgraded connection is copied both ways, as the API server's UpgradeAwareHandler does."""
        match = _POD_STREAM.match(path)
        assert match is not None
        _, namespace, name, _ = self._route(path.rsplit("/", 1)[0])
        assert namespace is not None and name is not None
        query = parse_qs(scope.get("query_string", b"").decode(), keep_blank_values=True)
        pod = self.store.get("pods", namespace, name)
        base = self._kubelet_base(pod)
        params: list[tuple[str, str]] = []
        if match["sub"] == "portforward":
            target = f"/portForward/{namespace}/{name}"
            params += [("ports", p) for p in query.get("ports", ())]
        else:
            spec = pod["spec"]
            names = [c["name"] for c in spec["containers"]]
            container = (query.get("container") or [""])[-1] or (names[0] if len(names) == 1 else "")
            if not container:
                raise FakeApiError(
                    400,
                    "BadRequest",
                    f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]",
                )
            every = [
                *names,
                *(
                    c["name"]
                    for key in ("initContainers", "ephemeralContainers")
                    for c in spec.get(key) or ()
                ),
            ]
            if container not in every:
                raise FakeApiError(400, "BadRequest", f"container {container} is not valid for pod {name}")
            target = f"/{match['sub']}/{namespace}/{name}/{container}"
            params += [
                (ours, "1")
                for theirs, ours in _STREAM_PARAMS.items()
                if (query.get(theirs) or [""])[-1] == "true"
            ]
            params += [("command", c) for c in query.get("command", ())]
        take = (scope.get("extensions") or {}).get(UPGRADE_EXTENSION, {}).get("take")
        if take is None:
            raise FakeApiError(400, "BadRequest", "Upgrade request required")
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope.get("headers", ())]
        url = f"{base}{target}?{urlencode(params)}"
        if self.kubelet_tls is not None:
            context = self.kubelet_tls
        else:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        await StreamProxy(idle_timeout=0).proxy(
            await take(), url, scope["method"], headers, ssl_context=context
        )

    def _token_review(self, body: Any) -> Obj:
        token = ((body or {}).get("spec") or {}).get("token", "")
        user = self.tokens.get(token)
        status: Obj = {"authenticated": True, "user": user} if user else {"authenticated": False}
        return {**body, "status": status}

    def _access_review(self, body: Any) -> Obj:
        spec = (body or {}).get("spec") or {}
        attributes = spec.get("resourceAttributes") or {}
        resource = f"{attributes.get('resource', '')}/{attributes.get('subresource', '')}"
        allowed = (spec.get("user", ""), attributes.get("verb", ""), resource) in self.allowed
        return {**body, "status": {"allowed": allowed}}

    async def _watch(self, path: str, query: dict[str, str], receive: Receive, send: Send) -> None:
        resource, namespace, name, _ = self._route(path)
        field_selector = query.get("fieldSelector")
        if name is not None:
            field_selector = ",".join(filter(None, [field_selector, f"metadata.name={name}"]))
        timeout = float(query.get("timeoutSeconds") or self.default_watch_timeout)
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        start = {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
        try:
            watcher = self.store.watch(
                resource,
                namespace,
                query.get("resourceVersion"),
                field_selector=field_selector,
                label_selector=query.get("labelSelector"),
            )
        except FakeApiError as err:
            if err.code != 410:
                raise
            await send(start)
            await send(
                {"type": "http.response.body", "body": _line("ERROR", err.status()), "more_body": True}
            )
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        kind = self.store._type(resource).kind
        api_version = self.store._type(resource).api_version
        await send(start)
        # an empty chunk sends the head now, as kube-apiserver flushes it when a watch starts
        await send({"type": "http.response.body", "body": b"", "more_body": True})
        try:
            async with trio.open_nursery() as nursery:

                async def until_disconnect() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    nursery.cancel_scope.cancel()

                nursery.start_soon(until_disconnect)
                with trio.move_on_after(timeout):
                    while True:
                        with trio.move_on_after(self.bookmark_interval) as idle:
                            try:
                                event_type, obj = await watcher.receive.receive()
                            except trio.EndOfChannel:
                                break
                        if idle.cancelled_caught:
                            # Only when nothing is queued: a bookmark promises every event up to its RV.
                            if bookmarks and watcher.receive.statistics().current_buffer_used == 0:
                                bookmark = {
                                    "kind": kind,
                                    "apiVersion": api_version,
                                    "metadata": {"resourceVersion": str(self.store.rv)},
                                }
                                await send(
                                    {
                                        "type": "http.response.body",
                                        "body": _line("BOOKMARK", bookmark),
                                        "more_body": True,
                                    }
                                )
                            continue
                        await send(
                            {"type": "http.response.body", "body": _line(event_type, obj), "more_body": True}
                        )
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                nursery.cancel_scope.cancel()
        finally:
            self.store.stop_watch(watcher)


def _grace_period(body: Any, query: dict[str, str]) -> int | None:
    """``DeleteOptions.gracePeriodSeconds`` from the body, else from the query (kubectl sends either)."""
    grace = body.get("gracePeriodSeconds") if isinstance(body, dict) else None
    if grace is None and query.get("gracePeriodSeconds"):
        grace = int(query["gracePeriodSeconds"])
    return grace


def _line(event_type: str, obj: Obj) -> bytes:
    return json.dumps({"type": event_type, "object": obj}).encode() + b"\n"


async def _respond(send: Send, code: int, body: Obj, headers: dict[str, str] | None = None) -> None:
    await _respond_raw(send, code, json.dumps(body).encode(), "application/json", headers)


async def _respond_raw(
    send: Send, code: int, raw: bytes, content_type: str, headers: dict[str, str] | None = None
) -> None:
    header_list = [(b"content-type", content_type.encode()), (b"content-length", str(len(raw)).encode())]
    header_list += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": code, "headers": header_list})
    await send({"type": "http.response.body", "body": raw, "more_body": False})
