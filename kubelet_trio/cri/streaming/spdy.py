"""The server side of SPDY/3.1, as much as Kubernetes streaming needs (Go: ``moby/spdystream`` under
``k8s.io/apimachinery/pkg/util/httpstream/spdy``).

After the HTTP upgrade the client opens streams with SYN_STREAM (its headers name the stream's role,
e.g. ``streamtype: stdout``), the server accepts each with SYN_REPLY, and both sides send DATA frames,
a FIN flag closing one direction. Header blocks are zlib-compressed with the SPDY/3 dictionary, one zlib
stream per direction for the whole connection. PING is echoed; SETTINGS, HEADERS and WINDOW_UPDATE are
read and ignored (spdystream does no flow control either); RST_STREAM and GOAWAY end streams.

:class:`SpdyConnection` reads frames in its :meth:`~SpdyConnection.run` task and hands new streams out
through :meth:`~SpdyConnection.accept`; each :class:`SpdyStream` is a Trio half-closeable stream.
"""

from __future__ import annotations

import contextlib
import logging
import math
import struct
import zlib
from collections.abc import Mapping, Sequence

import trio

from kubelet_trio.cri.streaming.dictionary import SPDY3_DICTIONARY
from kubelet_trio.logs import kv

__all__ = ["SpdyConnection", "SpdyError", "SpdyStream", "decode_headers", "encode_headers"]

logger = logging.getLogger(__name__)

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN = 0x01
RST_CANCEL = 5
MAX_FRAME = 1 << 24  # the 24-bit length field's limit
DATA_CHUNK = 32 * 1024
#: Frames buffered per stream before the reader waits for the stream's consumer.
STREAM_BUFFER = 64
#: The largest header block a SYN_STREAM may inflate to (a few headers name a stream's role).
MAX_HEADER_BLOCK = 1 << 20


class SpdyError(Exception):
    """The peer broke the SPDY framing."""


def encode_headers(headers: Mapping[str, Sequence[str]]) -> bytes:
    """An uncompressed SPDY/3 header block: count, then length-prefixed names and NUL-joined values."""
    out = bytearray(struct.pack(">I", len(headers)))
    for name, values in headers.items():
        key = name.lower().encode("latin-1")
        value = b"\0".join(v.encode("latin-1") for v in values)
        out += struct.pack(">I", len(key)) + key + struct.pack(">I", len(value)) + value
    return bytes(out)


def decode_headers(block: bytes) -> dict[str, list[str]]:
    try:
        (count,) = struct.unpack_from(">I", block, 0)
        offset = 4
        headers: dict[str, list[str]] = {}
        for _ in range(count):
            (size,) = struct.unpack_from(">I", block, offset)
            name = block[offset + 4 : offset + 4 + size].decode("latin-1").lower()
            offset += 4 + size
            (size,) = struct.unpack_from(">I", block, offset)
            value = block[offset + 4 : offset + 4 + size].decode("latin-1")
            offset += 4 + size
            headers.setdefault(name, []).extend(value.split("\0"))
    except struct.error as err:
        raise SpdyError(f"malformed header block: {err}") from None
    return headers


class SpdyStream(trio.abc.HalfCloseableStream):
    """One SPDY stream: what the peer sends arrives through :meth:`receive_some` (b"" after its FIN,
    a reset or the end of the connection); :meth:`send_eof` sends our FIN."""

    def __init__(self, connection: SpdyConnection, stream_id: int, headers: dict[str, list[str]]) -> None:
        self.connection = connection
        self.id = stream_id
        self.headers = headers
        self._incoming, self._chunks = trio.open_memory_channel[bytes](STREAM_BUFFER)
        self._buffer = b""
        self.remote_closed = False
        self.local_closed = False

    def header(self, name: str) -> str:
        return (self.headers.get(name.lower()) or [""])[0]

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if not self._buffer:
            try:
                self._buffer = await self._chunks.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                return b""
        size = len(self._buffer) if max_bytes is None else max_bytes
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self.local_closed:
            raise trio.ClosedResourceError("stream already closed")
        view = bytes(data)
        for start in range(0, len(view), DATA_CHUNK):
            await self.connection.send_data(self.id, view[start : start + DATA_CHUNK])

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def send_eof(self) -> None:
        if not self.local_closed:
            self.local_closed = True
            await self.connection.send_data(self.id, b"", fin=True)

    async def aclose(self) -> None:
        self._end_remote()
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self.send_eof()

    def _end_remote(self) -> None:
        self.remote_closed = True
        self._incoming.close()


class SpdyConnection:
    """A server-side SPDY/3.1 session over an upgraded connection."""

    def __init__(self, transport: trio.abc.Stream) -> None:
        self.transport = transport
        self.streams: dict[int, SpdyStream] = {}
        self._send_lock = trio.Lock()
        self._compressor = zlib.compressobj(
            9, zlib.DEFLATED, 15, 8, zlib.Z_DEFAULT_STRATEGY, SPDY3_DICTIONARY
        )
        self._decompressor = zlib.decompressobj(zdict=SPDY3_DICTIONARY)
        self._new, self._accepted = trio.open_memory_channel[SpdyStream](math.inf)
        self._buffer = bytearray()
        self.closed = trio.Event()

    async def accept(self) -> SpdyStream:
        """The next stream the client opened (raises ``trio.EndOfChannel`` once the connection ended)."""
        return await self._accepted.receive()

    async def run(self) -> None:
        """Read frames until the client goes away or breaks the protocol; then every stream ends."""
        try:
            while True:
                header = await self._read(8)
                if header is None:
                    return
                first, flags_length = struct.unpack(">II", header)
                flags, length = flags_length >> 24, flags_length & 0xFFFFFF
                payload = await self._read(length)
                if payload is None:
                    return
                if first & 0x80000000:
                    await self._control((first >> 16) & 0x7FFF, first & 0xFFFF, flags, payload)
                else:
                    await self._data(first & 0x7FFFFFFF, flags, payload)
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, OSError):
            return  # gone, or idle past the limit
        except SpdyError as err:
            logger.info("SPDY protocol error, closing", extra=kv(error=err))
        finally:
            self.closed.set()
            self._new.close()
            for stream in self.streams.values():
                stream._end_remote()

    async def _read(self, size: int) -> bytes | None:
        while len(self._buffer) < size:
            chunk = await self.transport.receive_some(65536)
            if not chunk:
                return None
            self._buffer += chunk
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    async def _control(self, version: int, kind: int, flags: int, payload: bytes) -> None:
        if version != VERSION:
            raise SpdyError(f"unsupported SPDY version {version}")
        if kind == SYN_STREAM:
            if len(payload) < 10:
                raise SpdyError("short SYN_STREAM")
            stream_id = struct.unpack_from(">I", payload)[0] & 0x7FFFFFFF
            headers = decode_headers(self._inflate(payload[10:]))
            stream = SpdyStream(self, stream_id, headers)
            self.streams[stream_id] = stream
            if flags & FLAG_FIN:
                stream._end_remote()
            self._new.send_nowait(stream)
        elif kind == RST_STREAM:
            if len(payload) < 8:
                raise SpdyError("short RST_STREAM")
            stream_id = struct.unpack_from(">I", payload)[0] & 0x7FFFFFFF
            found = self.streams.get(stream_id)
            if found is not None:
                found._end_remote()
                found.local_closed = True
        elif kind == PING:
            if len(payload) < 4:
                raise SpdyError("short PING")
            await self._send(struct.pack(">HHI", 0x8000 | VERSION, PING, 4) + payload[:4])
        elif kind == GOAWAY:
            raise trio.ClosedResourceError("client sent GOAWAY")
        elif kind == HEADERS and len(payload) >= 4:
            self._inflate(payload[4:])  # keep the shared zlib stream in step
        # SETTINGS, WINDOW_UPDATE, SYN_REPLY (never sent to a server): nothing to do.

    async def _data(self, stream_id: int, flags: int, payload: bytes) -> None:
        stream = self.streams.get(stream_id)
        if stream is None or stream.remote_closed:
            return
        if payload:
            with contextlib.suppress(trio.ClosedResourceError):
                await stream._incoming.send(payload)
        if flags & FLAG_FIN:
            stream._end_remote()

    def _inflate(self, block: bytes) -> bytes:
        try:
            inflated = self._decompressor.decompress(block, MAX_HEADER_BLOCK)
        except zlib.error as err:
            raise SpdyError(f"header block does not inflate: {err}") from None
        if self._decompressor.unconsumed_tail:
            raise SpdyError(f"header block inflates to more than {MAX_HEADER_BLOCK} bytes")
        return inflated

    def _deflate(self, headers: Mapping[str, Sequence[str]]) -> bytes:
        return self._compressor.compress(encode_headers(headers)) + self._compressor.flush(zlib.Z_SYNC_FLUSH)

    async def _send(self, frame: bytes) -> None:
        async with self._send_lock:
            await self.transport.send_all(frame)

    async def reply(self, stream: SpdyStream, headers: Mapping[str, Sequence[str]] | None = None) -> None:
        """Accept ``stream`` (SYN_REPLY)."""
        async with self._send_lock:  # the compressor's state must follow the order of frames on the wire
            block = self._deflate(headers or {})
            body = struct.pack(">I", stream.id) + block
            frame = struct.pack(">HHI", 0x8000 | VERSION, SYN_REPLY, len(body)) + body
            await self.transport.send_all(frame)

    async def send_data(self, stream_id: int, data: bytes, *, fin: bool = False) -> None:
        flags = FLAG_FIN if fin else 0
        await self._send(struct.pack(">II", stream_id & 0x7FFFFFFF, (flags << 24) | len(data)) + data)

    async def reset(self, stream: SpdyStream, status: int = RST_CANCEL) -> None:
        stream.local_closed = True
        stream._end_remote()
        await self._send(struct.pack(">HHIII", 0x8000 | VERSION, RST_STREAM, 8, stream.id, status))

    async def goaway(self) -> None:
        """Tell the client no more streams are coming (status OK); the caller then closes the transport."""
        last = max(self.streams, default=0)
        await self._send(struct.pack(">HHIII", 0x8000 | VERSION, GOAWAY, 8, last, 0))
