"""HTTP/1.1 for the API client: h11's framing and parsing over Trio streams, on kept-alive connections.

httpx cost about 0.55 ms of CPU per status PATCH or event POST (its request and response models,
httpcore's pool, anyio's stream wrappers around h11), the largest share of the kubelet's CPU during a pod
start. The kubelet needs little of HTTP: one server, small JSON bodies. So :class:`Http1Pool` keeps the
pool itself small: idle connections on a stack, the most recently used one taken and checked with one
``poll`` (never ``select``, which fails for descriptors at or above 1 024, so that in a busy process
every request would open a connection); a watch, streamed for minutes, gets a connection of its own
(:meth:`Http1Pool.stream`). Status lines, fields and chunked framing are h11's: a parser of our own
handed up hostile answers as 200 (two conflicting ``Content-Length``, ``Transfer-Encoding: gzip,
chunked``, a status ``2000``) or waited for bytes that never came (chunk sizes such as ``-2``). h11's
validation and state machine cost about twice that parser's CPU per request, still a small fraction of
httpx's (``bench/api_client_transport.py``).

Bounds: an answer head, chunk header or trailer block at most :data:`MAX_HEAD`; a body read whole at
most the request's ``max_body`` (the caller's cap, see the API client), counted after decompression;
``gzip`` accepted only when the request asked for it (a compressed answer nobody asked for is an
error: a 130 KB gzip bomb would otherwise take hundreds of MB). A header value with CR or LF is refused
before anything is sent (:class:`InvalidRequest`).

Whatever goes wrong on the connection (refused, reset, TLS, an answer that is not HTTP/1.1 or exceeds a
bound) raises :class:`TransportError`, names the endpoint, and closes that connection; the API client
retries it, unless it is an :class:`AnswerTooLarge`. A cancelled request closes its connection (it may
be half-way through an answer).

The node's other HTTP/1.1 clients (httpGet probes and hooks, ``--manifest-url``) use :class:`Get`: one
GET as Go's ``http.Client`` makes it (redirects, their limits and header rules), on the same h11
framing, each request on a connection of its own (``Connection: close``), the body read only as far as
the caller asks.
"""

from __future__ import annotations

import base64
import contextlib
import select
import ssl
import zlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import cast
from urllib.parse import SplitResult, quote, urljoin, urlsplit

import attrs
import h11
import trio

from kubelet_trio.boundary import truncate
from kubelet_trio.client.errors import AnswerTooLarge, InvalidRequest, TransportError, describe

__all__ = [
    "DEFAULT_MAX_BODY",
    "MAX_HEAD",
    "MAX_REDIRECTS",
    "REDIRECT_STATUSES",
    "AnswerTooLarge",
    "Connect",
    "Get",
    "GetFailed",
    "Headers",
    "Http1Pool",
    "Http1Response",
    "Http1Stream",
    "InvalidRequest",
    "OneShotAnswer",
    "TransportError",
    "describe",
]

#: Largest answer head, chunk header line or trailer block (h11's ``max_incomplete_event_size``);
#: kube-apiserver's heads are a few hundred bytes, a few KiB with ``Warning`` fields.
MAX_HEAD = 64 * 1024
#: A pool's bound on a body read whole, when the caller gives none.
DEFAULT_MAX_BODY = 64 * 1024 * 1024
_READ = 65536

Connect = Callable[[str, int], Awaitable[trio.abc.Stream]]
"""Opens a byte stream to ``(host, port)``: :func:`trio.open_tcp_stream`, or a test harness's in-process
server."""


@attrs.frozen
class Headers:
    """An answer's header fields as h11 parsed them (names lower-cased); decoded only when asked."""

    fields: Sequence[tuple[bytes, bytes]]

    def get(self, name: str, default: str | None = None) -> str | None:
        """The last value of ``name`` (case-insensitive)."""
        key = name.lower().encode("ascii")
        found = default
        for field, value in self.fields:
            if field == key:
                found = value.decode("latin-1")
        return found


@attrs.frozen
class Http1Response:
    """A complete answer: what :class:`~kubelet_trio.client.client.ApiClient` reads of httpx's."""

    status_code: int
    headers: Headers
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


#: What a failing connection or a hostile answer raises, turned into :class:`TransportError`.
_FAILURES = (
    OSError,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
    ssl.SSLError,
    h11.RemoteProtocolError,
    zlib.error,
)


class _Connection:
    """One keep-alive connection: its stream and its h11 state."""

    __slots__ = ("h11", "idle_since", "poller", "stream")

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
        self.idle_since = 0.0
        self.poller: select.poll | None = None
        sock = self.socket()
        if sock is not None:
            self.poller = select.poll()
            self.poller.register(sock.fileno(), select.POLLIN)

    def transport(self) -> trio.abc.Stream:
        """The stream under TLS (the stream itself without TLS)."""
        stream = self.stream
        return stream.transport_stream if isinstance(stream, trio.SSLStream) else stream

    def socket(self) -> trio.socket.SocketType | None:
        stream = self.transport()
        return stream.socket if isinstance(stream, trio.SocketStream) else None

    def peer_closed(self) -> bool:
        """Whether the server closed (or wrote to) this idle connection: one ``poll``, no waiting. An
        idle connection has nothing to read; the end of the stream, an error, or bytes nobody asked for
        (a TLS alert) end it. ``poll`` takes any descriptor number (``select`` fails from 1 024 on)."""
        return self.poller is not None and bool(self.poller.poll(0))

    def reusable(self) -> bool:
        """After a complete exchange: whether both sides keep the connection (``Connection: close``
        among the server's tokens, HTTP/1.0, or bytes past the answer end it), ready for the next."""
        protocol = self.h11
        if protocol.our_state is not h11.DONE or protocol.their_state is not h11.DONE:
            return False
        protocol.start_next_cycle()
        return protocol.trailing_data == (b"", False)

    async def next_event(self) -> h11.Event:
        """h11's next event of the answer, reading as needed (the end of the stream is h11's to judge:
        the end of a body read to close, or an error)."""
        protocol = self.h11
        while True:
            event = protocol.next_event()
            if event is h11.NEED_DATA:
                protocol.receive_data(cast("bytes", await self.stream.receive_some(_READ)))
                continue
            if isinstance(event, h11.ConnectionClosed):
                raise TransportError("the server closed the connection")
            if event is h11.PAUSED:
                raise TransportError("the server sent more than one answer")
            return event  # type: ignore[return-value]

    async def read_head(self) -> h11.Response:
        """The answer's head; informational (1xx) answers are skipped."""
        while True:
            event = await self.next_event()
            if isinstance(event, h11.Response):
                return event
            if not isinstance(event, h11.InformationalResponse):
                raise TransportError(f"expected an answer head, got {type(event).__name__}")

    async def read_body(self, response: h11.Response, max_body: int, gzip: bool) -> bytes:
        """The whole body, at most ``max_body`` bytes on the wire and after decompression."""
        length = _content_length(response.headers)
        if length is not None and length > max_body:
            raise AnswerTooLarge(f"answer of {length} bytes, more than the {max_body} allowed")
        body = bytearray()
        decoder = zlib.decompressobj(16 + zlib.MAX_WBITS) if gzip else None
        received = 0
        while True:
            event = await self.next_event()
            if isinstance(event, h11.Data):
                received += len(event.data)
                if decoder is None:
                    body += event.data
                else:  # at most one byte past the bound: a gzip bomb stops there
                    body += decoder.decompress(event.data, max_body + 1 - len(body))
                if len(body) > max_body:
                    raise AnswerTooLarge(f"answer longer than the {max_body} bytes allowed")
            elif isinstance(event, h11.EndOfMessage):
                break
            else:
                raise TransportError(f"unexpected {type(event).__name__} in an answer body")
        if decoder is not None and received and (not decoder.eof or decoder.unused_data):
            raise TransportError("gzip answer truncated or followed by other bytes")
        return bytes(body)


def _invalid_part(method: str, target: str, fields: list[tuple[str, str]]) -> str:
    """What h11 refused in a request: the first field whose name or value it refuses, by name."""
    for name, value in fields:
        probe = [(name, value)] if name.lower() == "host" else [("Host", "h"), (name, value)]
        try:
            h11.Request(method="GET", target="/", headers=probe)
        except (h11.LocalProtocolError, UnicodeError):
            return f"header field {truncate(name, 64)!r} (CR, LF, NUL or non-ASCII in its name or value)"
    return "method or request target"


def _content_length(fields: Sequence[tuple[bytes, bytes]]) -> int | None:
    """The answer's ``Content-Length`` (h11 has checked it is one number)."""
    for name, value in fields:
        if name == b"content-length":
            return int(value)
    return None


def _gzipped(fields: Sequence[tuple[bytes, bytes]], compressed: bool) -> bool:
    """Whether the body is gzip; any other coding, or gzip not asked for (``compressed``), is an
    error (RFC 9110 12.5.3: a server sends only a coding the request accepts)."""
    codings = [value.strip().lower() for name, value in fields if name == b"content-encoding"]
    coding = b", ".join(coding for coding in codings if coding != b"identity")
    if not coding:
        return False
    if compressed and coding == b"gzip":
        return True
    text = coding.decode("latin-1")
    raise TransportError(f"answer in content-encoding {truncate(text, 64)!r}, which was not asked for")


class Http1Stream:
    """An answer whose body is read as it arrives (see :meth:`Http1Pool.stream`)."""

    def __init__(self, response: h11.Response, connection: _Connection, pool: Http1Pool) -> None:
        self.status_code = response.status_code
        self.headers = Headers(response.headers)
        self._connection = connection
        self._pool = pool

    async def pieces(self) -> AsyncGenerator[bytes, None]:
        """The body's pieces as they arrive, until its end; a broken connection or a malformed
        answer raises :class:`TransportError`."""
        connection = self._connection
        try:
            while True:
                event = await connection.next_event()
                if isinstance(event, h11.Data):
                    yield event.data
                elif isinstance(event, h11.EndOfMessage):
                    return
                else:
                    raise TransportError(f"unexpected {type(event).__name__} in an answer body")
        except (*_FAILURES, TransportError) as err:
            raise self._pool.failure(err) from err

    async def read(self) -> bytes:
        """The whole body (an error status's), at most the pool's ``max_body``."""
        limit = self._pool.max_body
        body = bytearray()
        async for piece in self.pieces():
            body += piece
            if len(body) > limit:
                raise self._pool.failure(AnswerTooLarge(f"answer longer than the {limit} bytes allowed"))
        return bytes(body)


@attrs.define(eq=False)
class Http1Pool:
    """Requests to one server (``host``, ``port``, TLS with ``ssl_context``) over keep-alive connections.

    ``max_connections`` bounds the connections in use at once (None: the callers bound them); a request
    beyond it waits for a free one. At most ``max_idle`` idle connections are kept, each for at most
    ``keepalive_expiry`` seconds. ``max_body`` bounds a body read whole, unless a request gives its own.
    """

    host: str
    port: int
    ssl_context: ssl.SSLContext | None
    server_hostname: str | None = None
    max_idle: int = 48
    keepalive_expiry: float = 60.0
    max_connections: int | None = None
    max_body: int = DEFAULT_MAX_BODY
    #: Opens the byte stream under a connection (None: TCP to ``host``:``port``); a test harness serves
    #: its in-process API server through it.
    connect: Connect | None = None
    idle: list[_Connection] = attrs.Factory(list)
    opened: int = 0  # connections opened so far (tests and diagnostics)
    #: Every open connection, idle or in use (closed at once when the TLS identity changes).
    open: set[_Connection] = attrs.Factory(set)
    _slots: trio.Semaphore | None = None
    _host_header: str = ""

    def __attrs_post_init__(self) -> None:
        default_port = 443 if self.ssl_context is not None else 80
        endpoint = self.endpoint
        self._host_header = endpoint if self.port != default_port else endpoint.rsplit(":", 1)[0]
        if self.max_connections is not None:
            self._slots = trio.Semaphore(self.max_connections)

    @property
    def endpoint(self) -> str:
        """``host:port`` (an IPv6 address in brackets), as errors name the server."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def failure(self, err: BaseException) -> TransportError:
        """``err`` as a :class:`TransportError` naming the endpoint (an :class:`AnswerTooLarge` kept as
        one); the peer's text echoed in a library's message is truncated."""
        if isinstance(err, TransportError):
            kind = AnswerTooLarge if isinstance(err, AnswerTooLarge) else TransportError
            return kind(f"{self.endpoint}: {err}")
        if isinstance(err, h11.RemoteProtocolError):
            return TransportError(f"{self.endpoint}: malformed answer: {truncate(str(err))}")
        return TransportError(f"{self.endpoint}: {truncate(describe(err))}")

    async def request(
        self,
        method: str,
        target: str,
        headers: Iterable[tuple[str, str]],
        body: bytes | None,
        *,
        compressed: bool = False,
        max_body: int | None = None,
    ) -> Http1Response:
        """``method target`` with ``headers`` (no Host, Content-Length, Connection or Accept-Encoding:
        those are added), the answer read whole. ``compressed`` asks for gzip (and accepts it);
        ``max_body`` replaces the pool's bound."""
        request = self._request(method, target, headers, body, compressed)
        limit = self.max_body if max_body is None else max_body
        if self._slots is None:
            return await self._exchange(request, body, limit, compressed)
        async with self._slots:
            return await self._exchange(request, body, limit, compressed)

    def _request(
        self,
        method: str,
        target: str,
        headers: Iterable[tuple[str, str]],
        body: bytes | None,
        compressed: bool,
    ) -> h11.Request:
        """The request head, validated by h11 before any connection is taken."""
        fields = [("Host", self._host_header), *headers]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            fields.append(("Content-Length", str(len(body or b""))))
        if compressed:
            fields.append(("Accept-Encoding", "gzip"))
        try:
            return h11.Request(method=method, target=target, headers=fields)
        except (h11.LocalProtocolError, UnicodeError):
            what = _invalid_part(method, target, fields)
        # h11's message quotes the value, which may be a bearer token: name the field only
        raise InvalidRequest(f"{method} {truncate(target)} to {self.endpoint}: invalid {what}")

    @staticmethod
    def _message(connection: _Connection, request: h11.Request, body: bytes | None) -> bytes:
        protocol = connection.h11
        message = protocol.send(request) or b""
        if body:
            message += protocol.send(h11.Data(data=body)) or b""
        return message + (protocol.send(h11.EndOfMessage()) or b"")

    async def _exchange(
        self, request: h11.Request, body: bytes | None, max_body: int, compressed: bool
    ) -> Http1Response:
        connection = await self._take()
        try:
            await connection.stream.send_all(self._message(connection, request, body))
            response = await connection.read_head()
            gzip = _gzipped(response.headers, compressed)
            content = await connection.read_body(response, max_body, gzip)
        except (*_FAILURES, TransportError) as err:
            await self._discard(connection)
            raise self.failure(err) from err
        except BaseException:
            await self._discard(connection)
            raise
        if connection.reusable() and len(self.idle) < self.max_idle:
            connection.idle_since = now = trio.current_time()
            self.idle.append(connection)
            # the most recent is taken first, so those a burst left at the bottom are closed here once
            # expired (else each would hold its socket and TLS buffers until the server closed it)
            while self.idle and self._expired(self.idle[0], now):
                await self._discard(self.idle.pop(0))
        else:
            await self._discard(connection)
        return Http1Response(response.status_code, Headers(response.headers), content)

    @contextlib.asynccontextmanager
    async def stream(
        self, method: str, target: str, headers: Iterable[tuple[str, str]]
    ) -> AsyncIterator[Http1Stream]:
        """A request whose answer is read as it comes (a watch), on a connection of its own that is
        closed afterwards: it is held for minutes, so it neither waits for nor counts against
        ``max_connections``. No ``Accept-Encoding``: a compressed answer is an error."""
        request = self._request(method, target, headers, None, compressed=False)
        connection = await self._open()
        try:
            try:
                await connection.stream.send_all(self._message(connection, request, None))
                response = await connection.read_head()
                _gzipped(response.headers, compressed=False)
            except (*_FAILURES, TransportError) as err:
                raise self.failure(err) from err
            yield Http1Stream(response, connection, self)
        finally:
            await self._discard(connection)

    def _expired(self, connection: _Connection, now: float) -> bool:
        return now - connection.idle_since >= self.keepalive_expiry

    async def _take(self) -> _Connection:
        now = trio.current_time()
        while self.idle:
            connection = self.idle.pop()
            if not self._expired(connection, now) and not connection.peer_closed():
                return connection
            await self._discard(connection)
        return await self._open()

    async def _open(self) -> _Connection:
        try:
            connect = self.connect or trio.open_tcp_stream
            stream: trio.abc.Stream = await connect(self.host, self.port)
            if self.ssl_context is not None:
                tls = trio.SSLStream(
                    stream,
                    self.ssl_context,
                    server_hostname=self.server_hostname or self.host,
                    https_compatible=True,
                )
                try:
                    await tls.do_handshake()
                except BaseException:
                    await trio.aclose_forcefully(stream)
                    raise
                stream = tls
        except (OSError, trio.BrokenResourceError, ssl.SSLError) as err:
            raise TransportError(f"connect {self.endpoint}: {describe(err)}") from err
        self.opened += 1
        connection = _Connection(stream)
        self.open.add(connection)
        return connection

    async def use_tls_context(self, context: ssl.SSLContext) -> None:
        """New connections use ``context`` (a renewed client certificate); every connection opened with
        the previous one is closed now, those in use too, as Go's rotating dialer does: a request in
        flight fails (and is retried), a watch ends (and is resumed), on a connection of the new
        identity."""
        self.ssl_context = context
        self.idle.clear()
        for connection in list(self.open):
            self.open.discard(connection)
            await connection.transport().aclose()  # the socket: a task reading it gets an error

    async def _discard(self, connection: _Connection) -> None:
        self.open.discard(connection)
        await trio.aclose_forcefully(connection.stream)

    async def aclose(self) -> None:
        idle, self.idle = self.idle, []
        for connection in idle:
            await self._discard(connection)


# -- one GET on connections of its own: httpGet probes and hooks, the manifest URL ------------------------


#: The statuses Go's ``http.Client`` follows when they carry a ``Location``.
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
#: Go's ``http.Client`` makes at most this many requests for one GET ("stopped after 10 redirects").
MAX_REDIRECTS = 10
#: Fields Go's client drops on a redirect to another domain (a subdomain keeps them), and for good.
_SENSITIVE = frozenset(
    {"authorization", "www-authenticate", "cookie", "cookie2", "proxy-authorization", "proxy-authenticate"}
)
#: Fields the client writes itself: a caller's are not sent (Go's ``Request.Write`` skips them too).
_OWN_FIELDS = frozenset({"host", "connection", "content-length", "transfer-encoding", "trailer"})
#: What stays unescaped in a request target: RFC 3986's reserved and unreserved characters, and ``%``.
_TARGET_SAFE = "!#$%&'()*+,/:;=?@[]~"


class GetFailed(TransportError):
    """A :class:`Get` got no answer to hand up. ``str()`` is Go's ``url.Error``: ``Get "<url>": <reason>``
    (a password in the URL masked). When no connection could be opened, ``dial`` is the error and
    ``host``, ``port`` where it was going (a prober words it as Go's ``net`` package does)."""

    def __init__(
        self, url: str, reason: str, *, host: str = "", port: int = 0, dial: BaseException | None = None
    ) -> None:
        self.url = _masked(url)
        self.reason = reason
        self.host, self.port, self.dial = host, port, dial
        super().__init__(f'Get "{self.url}": {reason}')


def _masked(url: str) -> str:
    """``url`` with the password of its user information masked, as Go's ``stripPassword``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.password is None:
        return url
    user, _, host = parts.netloc.rpartition("@")
    name = user.partition(":")[0]
    return parts._replace(netloc=f"{name}:***@{host}").geturl()


def _first(fields: Sequence[tuple[bytes, bytes]], name: bytes) -> str:
    """The first value of ``name`` (Go's ``Header.Get``), or ""."""
    return next((value.decode("latin-1") for field, value in fields if field == name), "")


def _reason(err: BaseException) -> str:
    """What went wrong on an exchange, for a :class:`GetFailed` or a body's :class:`TransportError`."""
    if isinstance(err, TransportError):
        return str(err)
    if isinstance(err, h11.RemoteProtocolError):
        return f"malformed HTTP response: {truncate(str(err))}"
    return truncate(describe(err))


def _domain_or_subdomain(sub: str, parent: str) -> bool:
    return sub == parent or sub.endswith("." + parent)


class OneShotAnswer:
    """The answer a :class:`Get` hands up: its head, and its body as the caller reads it."""

    def __init__(self, response: h11.Response, connection: _Connection, url: str, gzip: bool) -> None:
        self.status_code = response.status_code
        self.headers = Headers(response.headers)
        #: The URL that answered (after the redirects that were followed).
        self.url = url
        self._connection = connection
        self._gzip = gzip

    async def read(self, limit: int) -> bytes:
        """The body, or its first ``limit`` bytes (decompressed when gzip was asked for and came): no
        more is read. A broken connection or a malformed body raises :class:`TransportError`."""
        decoder = zlib.decompressobj(16 + zlib.MAX_WBITS) if self._gzip else None
        body = bytearray()
        received = 0
        try:
            while len(body) < limit:
                event = await self._connection.next_event()
                if isinstance(event, h11.Data):
                    received += len(event.data)
                    if decoder is None:
                        body += event.data
                    else:  # never past the bound: a gzip bomb stops there
                        body += decoder.decompress(event.data, limit - len(body))
                elif isinstance(event, h11.EndOfMessage):
                    if decoder is not None and received and not decoder.eof:
                        raise TransportError("gzip answer truncated")
                    break
                else:
                    raise TransportError(f"unexpected {type(event).__name__} in an answer body")
        except (*_FAILURES, TransportError) as err:
            raise TransportError(f"reading the body of {_masked(self.url)}: {_reason(err)}") from err
        return bytes(body[:limit])


@attrs.define(eq=False)
class Get:
    """A GET as Go's ``http.Client`` makes it, every request on a connection of its own that is closed
    afterwards (``Connection: close``): a probe every few seconds gains nothing from a pool, and Go's
    prober disables keep-alive too.

    Redirects (:data:`REDIRECT_STATUSES` with a ``Location``) are followed, at most
    :data:`MAX_REDIRECTS` requests in all; with ``other_hosts=False`` (Go's ``RedirectChecker(false)``,
    for probes and hooks) only to the same host name, a redirect elsewhere being the answer. As Go: the
    caller's fields go along (a ``Host`` among them only through a relative ``Location``; credentials and
    cookies dropped for good at the first redirect to another domain), ``Referer`` names the previous
    URL (not from https to http), a password in the URL becomes basic authorization.
    ``compressed`` asks for gzip and decodes it (Go's default transport); without it nothing is asked and
    a body is handed up as it came. ``ssl_context`` serves ``https`` URLs (verified or not: the caller's
    choice; None: the system's trust store, loaded per request). The caller bounds it in time.
    """

    url: str
    headers: Sequence[tuple[str, str]] = ()
    other_hosts: bool = True
    ssl_context: ssl.SSLContext | None = None
    compressed: bool = False
    connect: Connect | None = None
    #: The URL of the request in flight, then of the answer: Go names it when the time runs out.
    current: str = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.current = self.url

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[OneShotAnswer]:
        """The final answer with its head read; its connection is closed when the block exits. Raises
        :class:`GetFailed`."""
        initial = _split(self.url)
        fields = [
            (name, value)
            for name, value in self.headers
            if name.lower() not in _OWN_FIELDS and (value or name.lower() != "user-agent")
        ]  # an empty User-Agent is not sent, as Go
        own_referer = any(name.lower() == "referer" for name, _ in fields)
        host = next((value for name, value in self.headers if name.lower() == "host"), "")
        url, referer, strip = self.url, "", False
        for sent in range(1, MAX_REDIRECTS + 1):
            self.current = url
            extra = [(n, v) for n, v in fields if not (strip and n.lower() in _SENSITIVE)]
            if referer:
                extra.append(("Referer", referer))
            connection, response, gzip = await self._send(url, host, extra)
            try:
                location = ""
                if response.status_code in REDIRECT_STATUSES:
                    location = _first(response.headers, b"location")
                if not location:
                    yield OneShotAnswer(response, connection, url, gzip)
                    return
                try:
                    following = urlsplit(urljoin(url, location))
                    following.port  # noqa: B018 - raises ValueError for a port that is not one
                except ValueError as err:
                    raise GetFailed(url, f"failed to parse Location header {location!r}: {err}") from None
                if not self.other_hosts and following.hostname != initial.hostname:
                    yield OneShotAnswer(response, connection, url, gzip)
                    return
                if sent == MAX_REDIRECTS:
                    raise GetFailed(location, f"stopped after {MAX_REDIRECTS} redirects")
            finally:
                await trio.aclose_forcefully(connection.stream)
            previous = _split(url)
            if host and (host == _authority(previous) or urlsplit(location).scheme):
                host = ""  # a custom Host goes along a relative Location only
            if (
                not strip
                and _authority(following) != _authority(initial)
                and not _domain_or_subdomain(following.hostname or "", initial.hostname or "")
            ):
                strip = True
            if not own_referer:
                downgrade = previous.scheme == "https" and following.scheme == "http"
                referer = "" if downgrade else previous._replace(netloc=_authority(previous)).geturl()
            url = following.geturl()

    async def _send(
        self, url: str, host: str, fields: list[tuple[str, str]]
    ) -> tuple[_Connection, h11.Response, bool]:
        """One request to ``url``: its connection and answer head (1xx skipped), and whether the body
        is gzip to decode."""
        parts = _split(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise GetFailed(url, f'unsupported protocol scheme "{parts.scheme}"')
        if not parts.hostname:
            raise GetFailed(url, "http: no Host in request URL")
        try:
            port = parts.port or (443 if scheme == "https" else 80)
        except ValueError as err:
            raise GetFailed(url, f"invalid port: {err}") from None
        head = [("Host", host or _authority(parts)), *fields, ("Connection", "close")]
        names = {name.lower() for name, _ in fields}
        if parts.username is not None and "authorization" not in names:
            token = f"{parts.username}:{parts.password or ''}".encode()
            head.append(("Authorization", "Basic " + base64.b64encode(token).decode("ascii")))
        asked = self.compressed and "accept-encoding" not in names
        if asked:
            head.append(("Accept-Encoding", "gzip"))
        target = quote(parts.path or "/", safe=_TARGET_SAFE) + (f"?{parts.query}" if parts.query else "")
        try:
            request = h11.Request(method="GET", target=target, headers=head)
        except (h11.LocalProtocolError, UnicodeError):
            raise GetFailed(url, f"invalid {_invalid_part('GET', target, head)}") from None
        stream = await self._dial(url, scheme, parts.hostname, port)
        connection = _Connection(stream)
        try:
            await stream.send_all(Http1Pool._message(connection, request, None))
            response = await connection.read_head()
        except (*_FAILURES, TransportError) as err:
            await trio.aclose_forcefully(stream)
            if connection.h11.trailing_data == (b"", True):  # closed before a byte of an answer
                raise GetFailed(url, "EOF") from err  # Go's wording
            raise GetFailed(url, _reason(err)) from err
        except BaseException:
            await trio.aclose_forcefully(stream)
            raise
        gzip = asked and _first(response.headers, b"content-encoding").lower() == "gzip"
        return connection, response, gzip

    async def _dial(self, url: str, scheme: str, hostname: str, port: int) -> trio.abc.Stream:
        connect = self.connect or trio.open_tcp_stream
        try:
            stream = await connect(hostname, port)
        except OSError as err:
            endpoint = f"[{hostname}]:{port}" if ":" in hostname else f"{hostname}:{port}"
            reason = f"dial tcp {endpoint}: {truncate(describe(err))}"
            raise GetFailed(url, reason, host=hostname, port=port, dial=err) from err
        if scheme != "https":
            return stream
        context = self.ssl_context or ssl.create_default_context()
        tls = trio.SSLStream(stream, context, server_hostname=hostname, https_compatible=True)
        try:
            await tls.do_handshake()
        except (OSError, trio.BrokenResourceError, ssl.SSLError) as err:
            await trio.aclose_forcefully(stream)
            raise GetFailed(url, truncate(describe(err))) from err
        except BaseException:
            await trio.aclose_forcefully(stream)
            raise
        return tls


def _split(url: str) -> SplitResult:
    try:
        return urlsplit(url)
    except ValueError as err:  # an IPv6 address without its closing bracket
        raise GetFailed(url, f"invalid URL: {err}") from None


def _authority(parts: SplitResult) -> str:
    """``host[:port]`` of a URL, without user information (Go's ``URL.Host``)."""
    return parts.netloc.rpartition("@")[2]
