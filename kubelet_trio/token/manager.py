"""Service account tokens for pods, from the TokenRequest API (Go: ``pkg/kubelet/token``).

A projected ``serviceAccountToken`` volume source asks for a token bound to the pod (audience,
``expirationSeconds``). The manager caches each answer and asks again only when the cached token needs a
refresh: past 80 % of its lifetime (less a jitter of 0-9 whole seconds, so the pods of a node do not all
ask at once), older than 24 h, or issued "in the future" (the wall clock jumped back). A failed refresh
keeps the cached token while it is still valid. Expired tokens are dropped every minute; a pod's tokens
are dropped when its volumes are torn down.

Token lifetimes are wall-clock (the API server answers with an RFC3339 expiration); the manager reads
wall time through the node's :class:`~kubelet_trio.clock.WallClock`, so refresh schedules run exactly
under ``trio.testing.MockClock``.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs
import trio

from kubelet_trio.client.errors import ApiClientError
from kubelet_trio.clock import WallClock
from kubelet_trio.logs import kref, kv

if TYPE_CHECKING:  # a standalone node has no client: the client stack stays unloaded
    from kubelet_trio.client import ApiClient

__all__ = [
    "GC_PERIOD",
    "MAX_JITTER_SECONDS",
    "MAX_TTL_SECONDS",
    "STANDALONE_ERROR",
    "IssuedToken",
    "TokenError",
    "TokenManager",
    "TokenRequest",
]

logger = logging.getLogger(__name__)

MAX_TTL_SECONDS = 24 * 3600
GC_PERIOD = 60.0
MAX_JITTER_SECONDS = 10
STANDALONE_ERROR = "cannot use TokenManager when kubelet is in standalone mode"
NS = 10**9


class TokenError(Exception):
    """No usable token: the request failed and nothing valid is cached."""


@attrs.frozen
class TokenRequest:
    """What a projection asks for (``authentication.k8s.io/v1`` TokenRequestSpec, bound to a pod)."""

    namespace: str
    service_account: str
    audiences: tuple[str, ...]
    expiration_seconds: int | None
    pod_name: str
    pod_uid: str

    def body(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "audiences": list(self.audiences) or None,
            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": self.pod_name, "uid": self.pod_uid},
        }
        if self.expiration_seconds is not None:
            spec["expirationSeconds"] = self.expiration_seconds
        return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}

    @property
    def path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/serviceaccounts/{self.service_account}/token"

    def log_fields(self) -> dict[str, object]:
        """Safe to log (no token)."""
        return {
            "serviceaccount": kref(self.namespace, self.service_account),
            "audiences": list(self.audiences),
            "expirationSeconds": self.expiration_seconds,
            "pod": self.pod_name,
            "uid": self.pod_uid,
        }

    def describe(self) -> str:
        """Safe to log (no token)."""
        return (
            f"serviceaccount={self.namespace}/{self.service_account} audiences={list(self.audiences)} "
            f"expirationSeconds={self.expiration_seconds} pod={self.pod_name} uid={self.pod_uid}"
        )


@attrs.frozen
class IssuedToken:
    """An answer: the token, its expiration (wall ns) and the lifetime the server granted (which may be
    shorter than asked: ``--service-account-max-token-expiration``)."""

    token: str = attrs.field(repr=False)
    expiration_ns: int
    expiration_seconds: int | None

    @classmethod
    def from_response(cls, answer: Any, request: TokenRequest) -> IssuedToken:
        if not isinstance(answer, dict):
            raise TokenError(f"TokenRequest for {request.describe()}: the answer is not an object")
        status = answer.get("status") or {}
        token = status.get("token")
        stamp = status.get("expirationTimestamp")
        if not token or not stamp:
            raise TokenError(f"TokenRequest for {request.describe()}: no token or expirationTimestamp")
        try:
            expires = dt.datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
        except ValueError as err:
            raise TokenError(
                f"TokenRequest for {request.describe()}: bad expirationTimestamp: {err}"
            ) from None
        seconds = (answer.get("spec") or {}).get("expirationSeconds", request.expiration_seconds)
        try:
            lifetime = int(seconds) if seconds is not None else None
        except (TypeError, ValueError):
            raise TokenError(f"TokenRequest for {request.describe()}: bad expirationSeconds") from None
        return cls(str(token), round(expires.timestamp() * NS), lifetime)


Fetch = Callable[[TokenRequest], Awaitable[IssuedToken]]


@attrs.define(eq=False)
class _Cached:
    request: TokenRequest
    issued: IssuedToken


@attrs.define(eq=False, kw_only=True)
class TokenManager:
    """``GetServiceAccountToken`` with Go's cache and refresh rules (see the module docstring).
    ``client`` None is a standalone kubelet: every request fails with :data:`STANDALONE_ERROR`."""

    client: ApiClient | None
    clock: WallClock
    rng: random.Random = attrs.Factory(random.Random)
    gc_period: float = GC_PERIOD
    fetch: Fetch | None = None  # how a token is obtained; default: POST to the TokenRequest API
    _cache: dict[TokenRequest, _Cached] = attrs.Factory(dict)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Drop expired tokens every ``gc_period`` seconds."""
        task_status.started()
        while True:
            await trio.sleep(self.gc_period)
            self.cleanup()

    async def get_service_account_token(self, request: TokenRequest) -> str:
        cached = self._cache.get(request)
        if cached is not None and not self.requires_refresh(cached.issued):
            return cached.issued.token
        try:
            issued = await self._fetch(request)
        except (ApiClientError, TokenError) as err:
            if cached is None:
                raise TokenError(f"failed to fetch token: {err}") from None
            if self.expired(cached.issued):
                raise TokenError(f"token {request.describe()} expired and refresh failed: {err}") from None
            logger.error("couldn't update token", extra=kv(**request.log_fields(), err=err))
            return cached.issued.token
        if cached is not None:
            logger.info("token refreshed", extra=kv(**request.log_fields()))
        self._cache[request] = _Cached(request, issued)
        return issued.token

    async def _fetch(self, request: TokenRequest) -> IssuedToken:
        if self.fetch is not None:
            return await self.fetch(request)
        if self.client is None:
            raise TokenError(STANDALONE_ERROR)
        answer = await self.client.create(request.path, request.body())
        return IssuedToken.from_response(answer, request)

    def delete_service_account_token(self, pod_uid: str) -> None:
        """Forget the pod's tokens (its volumes are gone)."""
        for request in [r for r in self._cache if r.pod_uid == pod_uid]:
            del self._cache[request]

    def cleanup(self) -> None:
        for request in [r for r, c in self._cache.items() if self.expired(c.issued)]:
            del self._cache[request]

    def expired(self, issued: IssuedToken) -> bool:
        return self.clock.wall_ns() > issued.expiration_ns

    def requires_refresh(self, issued: IssuedToken) -> bool:
        """Go's ``requiresRefresh``: older than 24 h, within 20 % of its lifetime (plus jitter) of
        expiring, or issued later than now."""
        if issued.expiration_seconds is None:
            logger.error("token answer without expirationSeconds: never refreshed")
            return False
        now = self.clock.wall_ns()
        expires = issued.expiration_ns
        issued_at = expires - issued.expiration_seconds * NS
        jitter = int(self.rng.random() * MAX_JITTER_SECONDS) * NS  # whole seconds, as in Go
        if now > issued_at + MAX_TTL_SECONDS * NS - jitter:
            return True
        if now > expires - (issued.expiration_seconds * 20 // 100) * NS - jitter:
            return True
        return now < issued_at
