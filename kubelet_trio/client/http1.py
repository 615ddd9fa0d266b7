"""HTTP/1.1 requests on Trio streams, for the API client's single calls (status writes, events, gets).

A status PATCH or an event POST through httpx passed httpx's request and response models, httpcore's
connection state machine, h11's parser and anyio's stream wrappers: about 2 ms of CPU each, and the
largest share of the kubelet's CPU during a pod start (client-go writes them on one HTTP/2 connection at
a fraction of that). A kubelet's calls need little of HTTP: one server, small JSON bodies, answers with
a ``Content-Length`` or chunked, sometimes gzip. :class:`Http1Pool` writes the request head in one piece
and parses the answer from its buffer, on keep-alive connections kept on a stack (the most recently used
idle one is taken and checked with one ``select``: httpcore's pool asked every pooled connection on
every request). A watch, streamed for minutes, gets a connection of its own (:meth:`Http1Pool.stream`).

Whatever goes wrong on the connection (refused, reset, TLS, an answer that is not HTTP) raises
:class:`TransportError` and closes that connection; the API client retries as it does for httpx's
transport errors. A cancelled request closes its connection (it may be half-way through an answer).
"""

from __future__ import annotations

import contextlib
import errno
import select
import ssl
import zlib
from collections.abc import AsyncIterator, Iterable

import attrs
import trio

__all__ = ["Http1Pool", "Http1Response", "Http1Stream", "TransportError", "describe"]

#: Largest answer head accepted; kube-apiserver's are a few hundred bytes.
MAX_HEAD = 64 * 1024
_READ = 65536


class TransportError(Exception):
    """The request did not get an HTTP answer: connection, TLS or protocol failure."""


@attrs.frozen
class Headers:
    """An answer's header fields (names lower-cased; the last value of a repeated field wins)."""

    fields: dict[str, str]

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.fields.get(name.lower(), default)


@attrs.frozen
class Http1Response:
    """A complete answer: what :class:`~kubelet_trio.client.client.ApiClient` reads of httpx's."""

    status_code: int
    headers: Headers
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


#: What a failing connection raises, turned into :class:`TransportError`.
_CONNECTION_ERRORS = (OSError, trio.BrokenResourceError, trio.ClosedResourceError, ssl.SSLError)


class _Connection:
    """One keep-alive connection and the bytes read past the last answer."""

    __slots__ = ("buffer", "idle_since", "stream")

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.buffer = bytearray()
        self.idle_since = 0.0

    def transport(self) -> trio.abc.Stream:
        """The stream under TLS (the stream itself without TLS)."""
        stream = self.stream
        return stream.transport_stream if isinstance(stream, trio.SSLStream) else stream

    def socket(self) -> trio.socket.SocketType | None:
        stream = self.transport()
        return stream.socket if isinstance(stream, trio.SocketStream) else None

    def peer_closed(self) -> bool:
        """Whether the server closed (or wrote to) this idle connection: one poll, no waiting. An idle
        connection has nothing to read; the end of the stream or bytes nobody asked for end it."""
        sock = self.socket()
        if sock is None:
            return False
        try:
            readable, _, _ = select.select([sock.fileno()], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    async def receive(self) -> bytes:
        data = await self.stream.receive_some(_READ)
        if not data:
            raise TransportError("the server closed the connection")
        return bytes(data)

    async def read_head(self) -> tuple[int, dict[str, str], bool]:
        """Status, fields, and whether the server keeps the connection; skips 1xx answers."""
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            while end < 0:
                if len(self.buffer) > MAX_HEAD:
                    raise TransportError(f"answer head longer than {MAX_HEAD} bytes")
                self.buffer += await self.receive()
                end = self.buffer.find(b"\r\n\r\n")
            head = bytes(self.buffer[:end])
            del self.buffer[: end + 4]
            lines = head.decode("latin-1").split("\r\n")
            version, _, rest = lines[0].partition(" ")
            code_text = rest[:3]
            if not version.startswith("HTTP/1.") or not code_text.isdigit():
                raise TransportError(f"not an HTTP/1.x answer: {lines[0][:80]!r}")
            code = int(code_text)
            fields: dict[str, str] = {}
            for line in lines[1:]:
                name, sep, value = line.partition(":")
                if not sep:
                    raise TransportError(f"malformed answer header line: {line[:80]!r}")
                fields[name.strip().lower()] = value.strip()
            if 100 <= code < 200 and code != 101:
                continue
            keep = fields.get("connection", "").lower() != "close" and version == "HTTP/1.1"
            return code, fields, keep

    async def read_exactly(self, count: int) -> bytes:
        while len(self.buffer) < count:
            self.buffer += await self.receive()
        data = bytes(self.buffer[:count])
        del self.buffer[:count]
        return data

    async def read_line(self) -> bytes:
        end = self.buffer.find(b"\r\n")
        while end < 0:
            if len(self.buffer) > MAX_HEAD:
                raise TransportError("chunk size line too long")
            self.buffer += await self.receive()
            end = self.buffer.find(b"\r\n")
        line = bytes(self.buffer[:end])
        del self.buffer[: end + 2]
        return line

    async def read_chunk(self) -> bytes:
        """The next chunk of a chunked body; empty at its end (trailer fields skipped)."""
        size_text = (await self.read_line()).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise TransportError(f"malformed chunk size {size_text[:20]!r}") from None
        if size == 0:
            while await self.read_line():  # trailer fields, then the empty line
                pass
            return b""
        data = await self.read_exactly(size)
        if await self.read_exactly(2) != b"\r\n":
            raise TransportError("chunk not followed by CRLF")
        return data

    async def read_chunked(self) -> bytes:
        body = bytearray()
        while chunk := await self.read_chunk():
            body += chunk
        return bytes(body)

    async def read_to_close(self) -> bytes:
        body = bytearray(self.buffer)
        self.buffer.clear()
        while data := await self.stream.receive_some(_READ):
            body += data
        return bytes(body)


class Http1Stream:
    """An answer whose body is read as it arrives (see :meth:`Http1Pool.stream`)."""

    def __init__(self, status_code: int, headers: Headers, connection: _Connection) -> None:
        self.status_code = status_code
        self.headers = headers
        self._connection = connection
        self._chunked = "chunked" in (headers.get("transfer-encoding") or "").lower()
        length = headers.get("content-length")
        self._left: int | None = int(length) if length is not None and length.isdigit() else None

    async def pieces(self) -> AsyncIterator[bytes]:
        """The body's pieces as they arrive, until its end; a broken connection raises
        :class:`TransportError`."""
        connection = self._connection
        try:
            while True:
                if self._chunked:
                    piece = await connection.read_chunk()
                elif self._left is not None:
                    if not self._left:
                        return
                    if not connection.buffer:
                        connection.buffer += await connection.receive()
                    piece = bytes(connection.buffer[: self._left])
                    del connection.buffer[: len(piece)]
                    self._left -= len(piece)
                elif connection.buffer:
                    piece = bytes(connection.buffer)
                    connection.buffer.clear()
                else:
                    piece = bytes(await connection.stream.receive_some(_READ))
                if not piece:
                    return
                yield piece
        except _CONNECTION_ERRORS as err:
            raise TransportError(describe(err)) from err

    async def lines(self) -> AsyncIterator[bytes]:
        """The body split at newlines (a watch's events), the last line even without one."""
        rest = b""
        async for piece in self.pieces():
            *complete, rest = (rest + piece).split(b"\n")
            for line in complete:
                yield line
        if rest:
            yield rest

    async def read(self) -> bytes:
        """The whole body (an error status's)."""
        return b"".join([piece async for piece in self.pieces()])


def _decompress(body: bytes, encoding: str) -> bytes:
    if not body or encoding in ("", "identity"):
        return body
    try:
        if encoding == "gzip":
            return zlib.decompress(body, 16 + zlib.MAX_WBITS)
        if encoding == "deflate":
            try:
                return zlib.decompress(body)
            except zlib.error:
                return zlib.decompress(body, -zlib.MAX_WBITS)  # raw deflate, as some servers send
    except zlib.error as err:
        raise TransportError(f"answer body does not decompress ({encoding}): {err}") from None
    raise TransportError(f"unsupported content-encoding {encoding!r}")


@attrs.define(eq=False)
class Http1Pool:
    """Requests to one server (``scheme://host:port``) over keep-alive connections.

    ``max_connections`` bounds the connections in use at once (None: the callers bound them); a request
    beyond it waits for a free one. At most ``max_idle`` idle connections are kept, each for at most
    ``keepalive_expiry`` seconds.
    """

    host: str
    port: int
    ssl_context: ssl.SSLContext | None
    server_hostname: str | None = None
    max_idle: int = 48
    keepalive_expiry: float = 60.0
    max_connections: int | None = None
    idle: list[_Connection] = attrs.Factory(list)
    opened: int = 0  # connections opened so far (tests and diagnostics)
    #: Every open connection, idle or in use (closed at once when the TLS identity changes).
    open: set[_Connection] = attrs.Factory(set)
    _slots: trio.Semaphore | None = None
    _host_header: bytes = b""

    def __attrs_post_init__(self) -> None:
        default_port = 443 if self.ssl_context is not None else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        self._host_header = (host if self.port == default_port else f"{host}:{self.port}").encode("ascii")
        if self.max_connections is not None:
            self._slots = trio.Semaphore(self.max_connections)

    async def request(
        self, method: str, target: str, headers: Iterable[tuple[str, str]], body: bytes | None
    ) -> Http1Response:
        """``method target`` with ``headers`` (no Host, Content-Length or Connection: those are added)."""
        message = self._message(method, target, headers, body)
        if self._slots is None:
            return await self._exchange(method, message)
        async with self._slots:
            return await self._exchange(method, message)

    def _message(
        self, method: str, target: str, headers: Iterable[tuple[str, str]], body: bytes | None
    ) -> bytes:
        head = [f"{method} {target} HTTP/1.1\r\n".encode("latin-1"), b"Host: ", self._host_header, b"\r\n"]
        for name, value in headers:
            head.append(f"{name}: {value}\r\n".encode("latin-1"))
        if body is not None or method in ("POST", "PUT", "PATCH"):
            head.append(b"Content-Length: %d\r\n" % len(body or b""))
        head.append(b"\r\n")
        return b"".join(head) + (body or b"")

    async def _exchange(self, method: str, message: bytes) -> Http1Response:
        connection = await self._take()
        try:
            await connection.stream.send_all(message)
            code, fields, keep = await connection.read_head()
            encoding = fields.get("content-encoding", "").lower()
            if method == "HEAD" or code in (204, 304):
                body = b""
            elif "chunked" in fields.get("transfer-encoding", "").lower():
                body = await connection.read_chunked()
            elif (length := fields.get("content-length")) is not None:
                if not length.isdigit():
                    raise TransportError(f"malformed Content-Length {length[:20]!r}")
                body = await connection.read_exactly(int(length))
            else:
                body = await connection.read_to_close()
                keep = False
            body = _decompress(body, encoding)
        except _CONNECTION_ERRORS as err:
            await self._discard(connection)
            raise TransportError(describe(err)) from err
        except BaseException:
            await self._discard(connection)
            raise
        if keep and not connection.buffer and len(self.idle) < self.max_idle:
            connection.idle_since = trio.current_time()
            self.idle.append(connection)
        else:
            await self._discard(connection)
        return Http1Response(code, Headers(fields), body)

    @contextlib.asynccontextmanager
    async def stream(
        self, method: str, target: str, headers: Iterable[tuple[str, str]]
    ) -> AsyncIterator[Http1Stream]:
        """A request whose answer is read as it comes (a watch), on a connection of its own that is
        closed afterwards: it is held for minutes, so it neither waits for nor counts against
        ``max_connections``. No ``Accept-Encoding``: the body is never compressed."""
        message = self._message(method, target, headers, None)
        connection = await self._open()
        try:
            try:
                await connection.stream.send_all(message)
                code, fields, _keep = await connection.read_head()
            except _CONNECTION_ERRORS as err:
                raise TransportError(describe(err)) from err
            yield Http1Stream(code, Headers(fields), connection)
        finally:
            await self._discard(connection)

    async def _take(self) -> _Connection:
        now = trio.current_time()
        while self.idle:
            connection = self.idle.pop()
            if now - connection.idle_since < self.keepalive_expiry and not connection.peer_closed():
                return connection
            await self._discard(connection)
        return await self._open()

    async def _open(self) -> _Connection:
        try:
            stream: trio.abc.Stream = await trio.open_tcp_stream(self.host, self.port)
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
            raise TransportError(f"connect {self.host}:{self.port}: {describe(err)}") from err
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


def describe(err: BaseException) -> str:
    """``Type: message`` of a transport error. When its own text is empty (TLS failures under Trio, an
    ``OSError`` with only a number), the first text along its causes, or the OS error's name."""
    seen: BaseException | None = err
    while seen is not None:
        text = str(seen)
        if not text and isinstance(seen, OSError) and seen.errno:
            text = errno.errorcode.get(seen.errno, str(seen.errno))
        if text:
            return f"{type(err).__name__}: {text}"
        seen = seen.__cause__ or seen.__context__
    return type(err).__name__
