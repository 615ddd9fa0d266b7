"""The Kubernetes API client on Trio: rate-limited, retrying, with typed errors and watch streams.

``open_api_client`` owns the connections for the lifetime of a block::

    async with open_api_client(load_kubeconfig(path)) as api:
        pod = await api.get("/api/v1/namespaces/default/pods/web")
        async with api.open_watch("/api/v1/pods", {"resourceVersion": rv}) as events:
            async for event in events: ...

Every request takes a token from a :class:`TokenBucket` (kubeAPIQPS 50, kubeAPIBurst 100), runs under the
client's ``request_timeout`` (a Trio deadline, so it follows MockClock in tests), and is retried with
exponential backoff and jitter on connection errors, timeouts, 5xx and 429 (a ``Retry-After`` header sets
the delay). Other error statuses raise at once as :class:`~kubelet_trio.client.errors.StatusError`
subclasses (``NotFound``, ``Conflict``, ``Gone``, ``Invalid``, ...) carrying the API ``Status`` message.
With ``metrics`` set, every attempt's status code and every request's latency are reported as client-go
does (``rest_client_requests_total``, ``rest_client_request_duration_seconds``).

Requests and watches go over HTTP/1.1 through :class:`~kubelet_trio.client.http1.Http1Pool` (h11 on
Trio streams), with answers bounded: a single object's at :data:`MAX_ANSWER`, a list page's at
:data:`MAX_LIST_ANSWER` (the only answers asked for in gzip), a watch event at
:data:`~kubelet_trio.client.watch.MAX_EVENT`. A test harness's in-process API server is reached the same
way: ``connect`` only replaces the TCP dial with a stream to it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import platform
import random
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import SplitResult, urlencode, urlsplit

import attrs
import trio

from kubelet_trio.api import gojson
from kubelet_trio.client.errors import (
    AnswerTooLarge,
    ApiClientError,
    ApiUnavailable,
    InvalidRequest,
    TransportError,
    describe,
    error_from_response,
)
from kubelet_trio.client.kubeconfig import KubeConfig, make_ssl_context
from kubelet_trio.client.metrics import ERROR_CODE, RequestMetrics
from kubelet_trio.client.ratelimit import DEFAULT_BURST, DEFAULT_QPS, TokenBucket
from kubelet_trio.client.watch import WATCH_BUFFER, WatchEvent, pump_watch_events
from kubelet_trio.logs import kv

if TYPE_CHECKING:  # the transport (h11) is imported when a client is opened: a node without an API
    # server never loads it
    from kubelet_trio.boundary import BoundaryErrors
    from kubelet_trio.client.http1 import Connect, Http1Pool, Http1Stream

__all__ = [
    "JSON",
    "MAX_ANSWER",
    "MAX_LIST_ANSWER",
    "MERGE_PATCH",
    "REQUEST_TIMEOUT",
    "Answer",
    "ApiClient",
    "RetryPolicy",
    "open_api_client",
]

logger = logging.getLogger(__name__)

JSON = "application/json"
#: Asked for on list pages only: kube-apiserver compresses only answers over 128 KiB
#: (``defaultGzipThresholdBytes``), which single objects do not reach, and an answer is then bounded
#: after decompression (a 130 KB gzip bomb expands to ~128 MiB).
ACCEPT_ENCODING = "gzip"
#: Largest answer to a single-object request (get, create, patch, delete, an error status). etcd keeps
#: objects of at most 1.5 MiB (its ``--max-request-bytes``) and kube-apiserver refuses request bodies
#: over 3 MiB, so an object's JSON is a few MiB; client-go reads answers whole with no bound
#: (``rest.Request.transformResponse``: ``io.ReadAll``) but a watch event only up to 16 MiB. 64 MiB is
#: ample for any object and still stops a hostile or broken answer from growing the kubelet without end.
MAX_ANSWER = 64 * 1024 * 1024
#: Largest answer to one page of a list, after decompression: a page holds at most 500 items (the
#: reflector's page size, as client-go's), each at most etcd's 1.5 MiB: 750 MiB, rounded up.
MAX_LIST_ANSWER = 1024 * 1024 * 1024
MERGE_PATCH = "application/merge-patch+json"
#: Deadline of one attempt (client-go's default is none; the kubelet's heartbeat client uses the lease
#: duration). Watches are bounded by their own ``timeoutSeconds`` instead.
REQUEST_TIMEOUT = 60.0
#: How long an idle connection is kept for the next request. httpx's default (5 s) is shorter than the
#: kubelet's 10 s heartbeat and status period, so each of those paid a new TLS handshake; client-go keeps
#: idle connections 90 s, as long as kube-apiserver does: stay below that, so the server never closes one
#: the client is about to reuse.
IDLE_CONNECTION_TIMEOUT = 60.0
#: Idle keep-alive connections kept for the next requests (a start's burst of status writes uses ~30).
MAX_IDLE_CONNECTIONS = 48
#: How long a tokenFile's content is trusted before it is read again (client-go: 1 min).
TOKEN_FILE_REFRESH = 60.0


class _AnswerHeaders(Protocol):
    def get(self, name: str, default: None = None) -> str | None: ...


class Answer(Protocol):
    """A complete answer (:class:`~kubelet_trio.client.http1.Http1Response`)."""

    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> _AnswerHeaders: ...
    @property
    def content(self) -> bytes: ...
    @property
    def text(self) -> str: ...


Decode = Callable[[Answer, str, str], Any]


def _user_agent() -> str:
    from kubelet_trio.version import __version__

    machine = platform.machine().lower().replace("x86_64", "amd64").replace("aarch64", "arm64")
    return f"kubelet-trio/{__version__} ({platform.system().lower()}/{machine})"


@attrs.frozen
class RetryPolicy:
    """Attempts and delays for retryable failures: ``initial * factor**n`` capped at ``max_delay``, each
    stretched by up to ``jitter`` (``delay * (1 + jitter * U[0, 1))``)."""

    max_attempts: int = 5
    initial: float = 0.2
    factor: float = 2.0
    max_delay: float = 10.0
    jitter: float = 0.5
    max_retry_after: float = 60.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        base = min(self.initial * self.factor**attempt, self.max_delay)
        return base * (1 + self.jitter * rng.random())


def _retry_after(response: Answer, cap: float) -> float | None:
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return min(max(float(value), 0.0), cap)
    except ValueError:
        return None


@attrs.define(eq=False)
class _Token:
    """A bearer token, static or read from a file (re-read every minute, like client-go)."""

    static: str | None = None
    file: str | None = None
    _cached: str | None = None
    _read_at: float = float("-inf")

    def value(self) -> str | None:
        if self.file is None:
            return self.static
        now = trio.current_time()
        if self._cached is None or now - self._read_at >= TOKEN_FILE_REFRESH:
            # A few bytes from a local file, read inline: not worth a thread hop.
            try:
                with open(self.file) as f:
                    self._cached = f.read().strip()
            except OSError as err:
                logger.warning("cannot read token file", extra=kv(path=self.file, error=err))
                if self._cached is None:
                    self._cached = self.static
            self._read_at = now
        return self._cached


@attrs.define(eq=False)
class ApiClient:
    """Use :func:`open_api_client`. Paths are absolute API paths (``/api/v1/...``)."""

    #: Where requests and watches go.
    wire: Http1Pool
    #: The server URL's ``host[:port]`` (the metrics' ``host`` label) and path, which ends with ``/``
    #: (a server URL with a path prefix keeps it).
    netloc: str = ""
    base_path: str = "/"
    limiter: TokenBucket = attrs.Factory(TokenBucket)
    retry: RetryPolicy = attrs.Factory(RetryPolicy)
    request_timeout: float | None = REQUEST_TIMEOUT
    rng: random.Random = attrs.Factory(random.Random)
    user_agent: str = attrs.Factory(_user_agent)
    _token: _Token = attrs.Factory(_Token)
    metrics: RequestMetrics | None = None  # set by the node that owns the client
    #: Where reflectors over this client count the watch input they contain (set by the owning node).
    boundary_errors: BoundaryErrors | None = None

    @property
    def host(self) -> str:
        """The API server's ``host:port`` (the metrics' ``host`` label)."""
        return self.netloc

    def _result(self, code: str, method: str) -> None:
        if self.metrics is not None:
            self.metrics.request_result(code, method, self.host)

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": JSON, "User-Agent": self.user_agent}
        if content_type:
            headers["Content-Type"] = content_type
        token = self._token.value()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def _deadline(self) -> contextlib.AbstractContextManager[Any]:
        if self.request_timeout is None:
            return contextlib.nullcontext()
        return trio.fail_after(self.request_timeout)

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        decode: Decode | None = None,
        listing: bool | None = None,
    ) -> Any:
        """One API call with rate limit and retries; the decoded JSON answer (None when empty), or what
        ``decode(response, method, path)`` makes of a successful answer. ``listing``: a page of a list
        (asked for in gzip, bounded by :data:`MAX_LIST_ANSWER` rather than :data:`MAX_ANSWER`); by
        default a GET with a ``limit`` in its query, as only lists page (the reflectors' lists do)."""
        if listing is None:
            listing = method == "GET" and params is not None and "limit" in params
        started = trio.current_time()
        try:
            return await self._request(method, path, params, body, content_type, decode or _decode, listing)
        finally:
            if self.metrics is not None:
                self.metrics.request_latency(method, self.host, trio.current_time() - started)

    async def _request(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        body: Any,
        content_type: str,
        decode: Decode,
        listing: bool,
    ) -> Any:
        content = json.dumps(body).encode() if body is not None else None
        headers = self._headers(content_type if content is not None else None)
        last_error: Exception | None = None
        for attempt in range(self.retry.max_attempts):
            if attempt:
                assert last_error is not None
                logger.debug(
                    "retrying API request",
                    extra=kv(method=method, path=path, attempt=attempt + 1, error=last_error),
                )
            await self.limiter.acquire()
            retry_after: float | None = None
            try:
                with self._deadline():
                    response = await self._send(method, path, params, content, headers, listing)
            except InvalidRequest as err:
                raise ApiClientError(str(err)) from None  # the same request would fail again
            except AnswerTooLarge as err:
                self._result(ERROR_CODE, method)
                raise ApiUnavailable(f"{method} {path}: {describe(err)}") from None  # as would this
            except TransportError as err:
                self._result(ERROR_CODE, method)
                last_error = ApiUnavailable(f"{method} {path}: {describe(err)}")
            except trio.TooSlowError:
                self._result(ERROR_CODE, method)
                last_error = ApiUnavailable(f"{method} {path}: no answer within {self.request_timeout:g}s")
            else:
                code = response.status_code
                self._result(str(code), method)
                if code < 300:
                    return decode(response, method, path)
                error = error_from_response(code, response.content)
                if code != 429 and code < 500:
                    raise error
                last_error = error
                retry_after = _retry_after(response, self.retry.max_retry_after)
            if attempt + 1 < self.retry.max_attempts:
                await trio.sleep(
                    retry_after if retry_after is not None else self.retry.delay(attempt, self.rng)
                )
        assert last_error is not None
        raise last_error

    async def _send(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        content: bytes | None,
        headers: dict[str, str],
        listing: bool,
    ) -> Answer:
        """One attempt, its answer read in full."""
        return await self.wire.request(
            method,
            self.target(path, params),
            headers.items(),
            content,
            compressed=listing,
            max_body=MAX_LIST_ANSWER if listing else MAX_ANSWER,
        )

    # -- verbs --------------------------------------------------------------------------------------

    async def get(
        self, path: str, params: Mapping[str, str] | None = None, *, listing: bool | None = None
    ) -> Any:
        """An object, or with ``listing`` a page of a list (see :meth:`request`)."""
        return await self.request("GET", path, params=params, listing=listing)

    async def get_text(self, path: str, params: Mapping[str, str] | None = None) -> str:
        """A plain-text answer, such as ``/healthz``'s ``ok`` or a container's log."""
        text: str = await self.request(
            "GET", path, params=params, decode=lambda response, _method, _path: response.text, listing=False
        )
        return text

    async def create(self, path: str, obj: Mapping[str, Any]) -> Any:
        return await self.request("POST", path, body=obj)

    async def replace(self, path: str, obj: Mapping[str, Any]) -> Any:
        return await self.request("PUT", path, body=obj)

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> Any:
        return await self.request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    async def delete(
        self, path: str, *, grace_period_seconds: int | None = None, uid: str | None = None
    ) -> Any:
        """DELETE with ``DeleteOptions`` (grace period, UID precondition)."""
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        return await self.request("DELETE", path, body=options)

    # -- watch --------------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def open_watch(
        self, path: str, params: Mapping[str, str] | None = None
    ) -> AsyncIterator[trio.MemoryReceiveChannel[WatchEvent]]:
        """A watch stream as a channel of :class:`WatchEvent` (``watch=true`` is added).

        An error status at the start raises (``Gone`` for an expired resourceVersion); a stream that
        breaks later ends with a synthetic ERROR event; a clean end (server ``timeoutSeconds``) just
        closes the channel. The caller bounds the whole watch with its own deadline.
        """
        query = {**dict(params or {}), "watch": "true"}
        await self.limiter.acquire()
        broken = (TransportError,)
        started = trio.current_time()
        async with contextlib.AsyncExitStack() as stack:
            try:
                with self._deadline():
                    response = await stack.enter_async_context(self.open_stream(path, query))
            except InvalidRequest as err:
                raise ApiClientError(f"watch {path}: {err}") from None
            except broken as err:
                self._result(ERROR_CODE, "GET")
                raise ApiUnavailable(f"watch {path}: {describe(err)}") from None
            except trio.TooSlowError:
                self._result(ERROR_CODE, "GET")
                raise ApiUnavailable(f"watch {path}: no answer within {self.request_timeout:g}s") from None
            self._result(str(response.status_code), "GET")
            if self.metrics is not None:
                self.metrics.request_latency("GET", self.host, trio.current_time() - started)
            if response.status_code != 200:
                unread: tuple[type[BaseException], ...] = (*broken, trio.TooSlowError)
                try:
                    with self._deadline():
                        body = await response.read()
                except unread:
                    body = b""
                raise error_from_response(response.status_code, body)
            send, receive = trio.open_memory_channel[WatchEvent](WATCH_BUFFER)
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(pump_watch_events, response.pieces(), send, broken)
                    try:
                        yield receive
                    finally:
                        nursery.cancel_scope.cancel()
            except BaseExceptionGroup as group:
                _raise_single(group)

    async def use_tls_context(self, context: ssl.SSLContext) -> None:
        """Connect with ``context`` from now on (a renewed client certificate), closing every connection
        made with the previous one."""
        await self.wire.use_tls_context(context)

    def open_stream(
        self, path: str, params: Mapping[str, str] | None = None
    ) -> contextlib.AbstractAsyncContextManager[Http1Stream]:
        """``GET path`` with its answer read as it comes, on a connection of its own (a watch, a followed
        log); no rate limit, retry or status check: the caller reads ``status_code`` first."""
        return self.wire.stream("GET", self.target(path, params), self._headers(None).items())

    def target(self, path: str, params: Mapping[str, str] | None = None) -> str:
        """The request target of ``path`` under the server URL's own path, with its query."""
        target = self.base_path + path.lstrip("/")
        return target + "?" + urlencode(params) if params else target


def _raise_single(group: BaseExceptionGroup[BaseException]) -> None:
    """The watch nursery only wraps the caller's own exception: give it back unwrapped."""
    leaves = list(_leaves(group))
    if len(leaves) == 1:
        raise leaves[0] from None
    raise group


def _decode(response: Answer, method: str, path: str) -> Any:
    """A successful answer's JSON (None when empty); an undecodable one is an :class:`ApiClientError`."""
    if not response.content:
        return None
    try:
        return gojson.loads(response.content)
    except (ValueError, RecursionError) as err:
        raise ApiClientError(f"{method} {path}: the answer is not JSON: {err}") from None


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out


@contextlib.asynccontextmanager
async def open_api_client(
    config: KubeConfig | None = None,
    *,
    server: str | None = None,
    connect: Connect | None = None,
    qps: float = DEFAULT_QPS,
    burst: int = DEFAULT_BURST,
    retry: RetryPolicy | None = None,
    request_timeout: float | None = REQUEST_TIMEOUT,
    rng: random.Random | None = None,
    max_request_connections: int | None = None,
    tls_context: ssl.SSLContext | None = None,
) -> AsyncIterator[ApiClient]:
    """An :class:`ApiClient` for ``config`` (a loaded kubeconfig) or a bare ``server`` URL.

    TLS verification is on unless the kubeconfig sets ``insecure-skip-tls-verify``. Single requests use
    at most ``max_request_connections`` connections at once (None: as many as the callers make).
    ``tls_context`` replaces the kubeconfig's TLS settings (a client certificate of the kubelet's own,
    renewed later with :meth:`ApiClient.use_tls_context`). ``connect`` replaces the TCP dial (a test
    harness's in-process server); everything above it is what a node uses.
    """
    base_url = server or (config.server if config else None)
    if not base_url:
        raise ValueError("open_api_client needs a kubeconfig or a server URL")
    verify: ssl.SSLContext | bool = True
    if tls_context is not None:
        verify = tls_context
    elif config is not None and config.uses_tls:
        verify = make_ssl_context(config)
    token = _Token(static=config.token, file=config.token_file) if config else _Token()
    tls_server_name = config.tls_server_name if config else None
    url = urlsplit(base_url)
    wire = _wire(url, verify, tls_server_name, max_request_connections, connect)
    try:
        yield ApiClient(
            wire,
            netloc=url.netloc,
            base_path=url.path.rstrip("/") + "/",
            limiter=TokenBucket(qps, burst),
            retry=retry or RetryPolicy(),
            request_timeout=request_timeout,
            rng=rng or random.Random(),
            token=token,
        )
    finally:
        with trio.CancelScope(shield=True):
            await wire.aclose()


def _wire(
    url: SplitResult,
    verify: ssl.SSLContext | bool,
    server_name: str | None,
    max_connections: int | None,
    connect: Connect | None,
) -> Http1Pool:
    from kubelet_trio.client.http1 import Http1Pool

    if url.scheme not in ("http", "https") or not url.hostname:
        raise ValueError(f"API server URL {url.geturl()!r}: expected http(s)://host[:port]")
    context: ssl.SSLContext | None = None
    if url.scheme == "https":
        context = verify if isinstance(verify, ssl.SSLContext) else ssl.create_default_context()
        if verify is False:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
    return Http1Pool(
        url.hostname,
        url.port or (443 if context is not None else 80),
        context,
        server_hostname=server_name,
        max_idle=MAX_IDLE_CONNECTIONS,
        keepalive_expiry=IDLE_CONNECTION_TIMEOUT,
        max_connections=max_connections,
        max_body=MAX_ANSWER,
        connect=connect,
    )
