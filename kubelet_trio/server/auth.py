"""Authentication and authorization of the Kubelet API (Go: ``pkg/kubelet/server/auth.go``,
``cmd/kubelet/app/auth.go``).

Authentication, first match wins: a client certificate the TLS handshake verified against
``--client-ca-file`` (user = its CN, groups = its O values); a bearer token, checked with a
``TokenReview`` (``authentication.k8s.io/v1``) through the API client when webhook authentication is
on; anonymous (``system:anonymous``) only when ``authentication.anonymous.enabled``. Otherwise 401.

Authorization: ``AlwaysAllow``, or ``Webhook``: a ``SubjectAccessReview`` (``authorization.k8s.io/v1``)
for the node resource ``nodes/<subresource>`` named for the node, the subresource from the path as in Go
(``/stats`` → ``stats``, ``/metrics`` → ``metrics``, ``/logs`` → ``log``, everything else → ``proxy``)
and the verb from the method. Denied is 403; a review that fails is 500.

The webhooks need the API client of API mode. Without one a node refuses to serve the Kubelet API with
Go's error (``cmd/kubelet/app/auth.go`` ``BuildAuthn``, then ``BuildAuthz``: :func:`webhook_client_error`)
rather than answer every request 500.

Review answers are cached as in Go (``authentication.webhook.cacheTTL`` 2 min for tokens, valid or not;
``authorization.webhook.cacheAuthorizedTTL`` 5 min, ``cacheUnauthorizedTTL`` 30 s); failed reviews are
not. Tokens are cached under their SHA-256, never in clear. Time is Trio's clock.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs
import trio

from kubelet_trio import defaults
from kubelet_trio.httpserver.asgi import TEXT, Receive, Scope, Send
from kubelet_trio.logs import kv

if TYPE_CHECKING:
    from kubelet_trio.client import ApiClient

__all__ = [
    "ALWAYS_ALLOW",
    "NO_CLIENT_FOR_AUTHENTICATION",
    "NO_CLIENT_FOR_AUTHORIZATION",
    "WEBHOOK",
    "AuthConfig",
    "AuthenticatedApp",
    "KubeletAuth",
    "User",
    "request_attributes",
    "user_from_certificate",
    "webhook_client_error",
]

logger = logging.getLogger(__name__)

ALWAYS_ALLOW = "AlwaysAllow"
WEBHOOK = "Webhook"
ANONYMOUS = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"
AUTHENTICATED = "system:authenticated"
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

_VERBS = {
    "GET": "get",
    "HEAD": "get",
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
_SUBRESOURCES = (("/stats", "stats"), ("/metrics", "metrics"), ("/logs", "log"))
#: Go's errors when a webhook is on and there is no API client (``cmd/kubelet/app/auth.go``).
NO_CLIENT_FOR_AUTHENTICATION = "no client provided, cannot use webhook authentication"
NO_CLIENT_FOR_AUTHORIZATION = "no client provided, cannot use webhook authorization"


def webhook_client_error(webhook: bool, authorization_mode: str) -> str | None:
    """Go's error for a node without an API client whose Kubelet API uses a webhook: authentication's
    is checked first, as Go builds the authenticator first; None when neither webhook is on."""
    if webhook:
        return NO_CLIENT_FOR_AUTHENTICATION
    if authorization_mode == WEBHOOK:
        return NO_CLIENT_FOR_AUTHORIZATION
    return None


@attrs.frozen
class User:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""


@attrs.frozen
class AuthConfig:
    """The KubeletConfiguration ``authentication``/``authorization`` settings."""

    node_name: str
    anonymous: bool = False  # authentication.anonymous.enabled
    webhook: bool = False  # authentication.webhook.enabled
    authorization_mode: str = ALWAYS_ALLOW  # authorization.mode: AlwaysAllow or Webhook
    # authentication.webhook.cacheTTL, authorization.webhook.cacheAuthorizedTTL / cacheUnauthorizedTTL
    token_cache_ttl: float = defaults.AUTHENTICATION_WEBHOOK_CACHE_TTL
    authorized_ttl: float = defaults.AUTHORIZATION_WEBHOOK_CACHE_AUTHORIZED_TTL
    unauthorized_ttl: float = defaults.AUTHORIZATION_WEBHOOK_CACHE_UNAUTHORIZED_TTL


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
CACHE_ENTRIES = 4096


@attrs.define
class TtlCache(Generic[K, V]):
    """Answers kept for a TTL each (0: not kept); at most ``max_entries``, the oldest dropped first."""

    max_entries: int = CACHE_ENTRIES
    _items: dict[K, tuple[float, V]] = attrs.Factory(dict)

    def get(self, key: K) -> tuple[bool, V | None]:
        """(found, value)."""
        item = self._items.get(key)
        if item is None:
            return False, None
        if trio.current_time() >= item[0]:
            del self._items[key]
            return False, None
        return True, item[1]

    def put(self, key: K, value: V, ttl: float) -> None:
        if ttl <= 0:
            return
        now = trio.current_time()
        if len(self._items) >= self.max_entries:
            for stale in [k for k, (expires, _) in self._items.items() if expires <= now]:
                del self._items[stale]
        while len(self._items) >= self.max_entries:
            del self._items[next(iter(self._items))]
        self._items.pop(key, None)
        self._items[key] = (now + ttl, value)

    def __len__(self) -> int:
        return len(self._items)


class AuthError(Exception):
    """A review request failed (the API server is unreachable or answered an error)."""


def user_from_certificate(der: bytes) -> User:
    """The user a verified client certificate names (CN, O). cryptography is loaded at the first one: its
    extension keeps several MB resident, which a node nobody connects to with a certificate never needs."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    cert = x509.load_der_x509_certificate(der)
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    return User(str(names[0].value) if names else "", tuple(str(o.value) for o in orgs))


def request_attributes(node_name: str, method: str, path: str) -> dict[str, str]:
    """The SubjectAccessReview ``resourceAttributes`` for a request (Go: ``GetRequestAttributes``)."""
    subresource = "proxy"
    for prefix, name in _SUBRESOURCES:
        if path == prefix or path.startswith(prefix + "/"):
            subresource = name
            break
    return {
        "verb": _VERBS.get(method, method.lower()),
        "group": "",
        "version": "v1",
        "resource": "nodes",
        "subresource": subresource,
        "name": node_name,
        "namespace": "",
    }


@attrs.define(eq=False)
class KubeletAuth:
    config: AuthConfig
    #: The API client for the webhooks, read at request time (None outside API mode: webhooks fail).
    client: Callable[[], ApiClient | None] = lambda: None
    tokens: TtlCache[str, User | None] = attrs.Factory(TtlCache)
    decisions: TtlCache[tuple[Any, ...], bool] = attrs.Factory(TtlCache)

    async def authenticate(self, cert_der: bytes | None, headers: Mapping[str, str]) -> User | None:
        if cert_der:
            user = user_from_certificate(cert_der)
            if user.name:
                return attrs.evolve(user, groups=(*user.groups, AUTHENTICATED))
        authorization = headers.get("authorization", "")
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() == "bearer" and token and self.config.webhook:
            reviewed = await self._cached_token_review(token)
            if reviewed is not None:
                return reviewed
        if self.config.anonymous:
            return User(ANONYMOUS, (UNAUTHENTICATED,))
        return None

    async def _cached_token_review(self, token: str) -> User | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        found, user = self.tokens.get(key)
        if found:
            return user
        try:
            user = await self._token_review(token)
        except AuthError as err:
            logger.warning("token review failed", extra=kv(error=err))
            return None  # not cached: the next request asks again
        self.tokens.put(key, user, self.config.token_cache_ttl)
        return user

    async def _token_review(self, token: str) -> User | None:
        client = self.client()
        if client is None:
            raise AuthError("no API client for the authentication webhook")
        review = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        try:
            answer = await client.create(TOKEN_REVIEWS, review)
        except Exception as err:
            raise AuthError(str(err)) from err
        status = answer.get("status") or {}
        if not status.get("authenticated"):
            return None
        user = status.get("user") or {}
        return User(user.get("username", ""), tuple(user.get("groups") or ()), user.get("uid", ""))

    async def authorize(self, user: User, method: str, path: str) -> bool:
        """Whether ``user`` may make the request; raises :class:`AuthError` when the review fails."""
        if self.config.authorization_mode == ALWAYS_ALLOW:
            return True
        attributes = request_attributes(self.config.node_name, method, path)
        key = (user, tuple(sorted(attributes.items())))
        found, allowed = self.decisions.get(key)
        if found:
            return bool(allowed)
        allowed = await self._access_review(user, attributes)
        ttl = self.config.authorized_ttl if allowed else self.config.unauthorized_ttl
        self.decisions.put(key, allowed, ttl)
        return allowed

    async def _access_review(self, user: User, attributes: dict[str, str]) -> bool:
        client = self.client()
        if client is None:
            raise AuthError("no API client for the authorization webhook")
        review: dict[str, Any] = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user.name,
                "groups": list(user.groups),
                "uid": user.uid,
                "resourceAttributes": attributes,
            },
        }
        try:
            answer = await client.create(SUBJECT_ACCESS_REVIEWS, review)
        except Exception as err:
            raise AuthError(str(err)) from err
        return bool((answer.get("status") or {}).get("allowed"))


@attrs.define(eq=False)
class AuthenticatedApp:
    """Wraps an ASGI app with :class:`KubeletAuth`. ``peer_certs`` maps a connection's client address
    (the scope's ``client``) to the DER certificate its TLS handshake verified (filled by the server)."""

    app: Any
    auth: KubeletAuth
    peer_certs: Mapping[tuple[str, int], bytes] = attrs.Factory(dict)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        der = self.peer_certs.get(tuple(client)) if client else None
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        method, path = scope["method"], scope["path"]
        user = await self.auth.authenticate(der, headers)
        if user is None:
            await _reply(send, 401, "Unauthorized")
            return
        try:
            allowed = await self.auth.authorize(user, method, path)
        except AuthError as err:
            logger.error("authorization error", extra=kv(user=user.name, path=path, error=err))
            await _reply(send, 500, "Authorization error")
            return
        if not allowed:
            attributes = request_attributes(self.auth.config.node_name, method, path)
            await _reply(
                send,
                403,
                f"Forbidden (user={user.name}, verb={attributes['verb']}, resource=nodes,"
                f" subresource(s)=[{attributes['subresource']}])",
            )
            return
        await self.app(scope, receive, send)


async def _reply(send: Send, status: int, message: str) -> None:
    await send(
        {"type": "http.response.start", "status": status, "headers": [(b"content-type", TEXT.encode())]}
    )
    await send({"type": "http.response.body", "body": (message + "\n").encode()})
