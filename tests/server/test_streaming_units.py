"""The streaming pieces on their own, under MockClock where time matters: SPDY framing and header
compression, the proxy's idle timeout, the concurrent-stream cap, one-time tokens that expire."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest
import trio
import trio.testing

from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.streaming.dictionary import SPDY3_DICTIONARY
from kubelet_trio.cri.streaming.server import TOKEN_TTL, StreamingServer
from kubelet_trio.cri.streaming.spdy import SpdyConnection, decode_headers, encode_headers
from kubelet_trio.httpserver.asgi import App, Request, Route
from kubelet_trio.httpserver.http11 import UPGRADE_EXTENSION
from kubelet_trio.options import component_configs, load_options
from kubelet_trio.server.exec import exec_routes
from kubelet_trio.server.proxy import StreamProxy, upgrade_request_head


def test_the_spdy3_dictionary_is_the_drafts() -> None:
    assert len(SPDY3_DICTIONARY) == 1423
    assert SPDY3_DICTIONARY.startswith(b"\x00\x00\x00\x07options\x00\x00\x00\x04head")
    assert SPDY3_DICTIONARY.endswith(b"charset=iso-8859-1,utf-,*,enq=0.")


def test_header_blocks_round_trip_with_multiple_values() -> None:
    headers = {"streamtype": ["data"], "port": ["8080"], "x-multi": ["a", "b"]}
    block = encode_headers(headers)
    assert block[:4] == b"\x00\x00\x00\x03"
    assert decode_headers(block) == headers


class SpdyClient:
    """The client half, written from the draft (so the server is checked against the format)."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.deflate = zlib.compressobj(
            9, zlib.DEFLATED, 15, 8, zlib.Z_DEFAULT_STRATEGY, zdict=SPDY3_DICTIONARY
        )
        self.inflate = zlib.decompressobj(zdict=SPDY3_DICTIONARY)
        self.buffer = b""

    async def syn_stream(self, stream_id: int, headers: dict[str, list[str]]) -> None:
        block = self.deflate.compress(encode_headers(headers)) + self.deflate.flush(zlib.Z_SYNC_FLUSH)
        body = struct.pack(">IIH", stream_id, 0, 0) + block
        await self.stream.send_all(struct.pack(">HHI", 0x8003, 1, len(body)) + body)

    async def data(self, stream_id: int, data: bytes, *, fin: bool = False) -> None:
        await self.stream.send_all(struct.pack(">II", stream_id, (int(fin) << 24) | len(data)) + data)

    async def ping(self, ping_id: int) -> None:
        await self.stream.send_all(struct.pack(">HHII", 0x8003, 6, 4, ping_id))

    async def frame(self) -> tuple[bool, int, int, bytes]:
        """(control, type or stream id, flags, payload)."""
        while len(self.buffer) < 8 or len(self.buffer) < 8 + (
            struct.unpack_from(">I", self.buffer, 4)[0] & 0xFFFFFF
        ):
            chunk = await self.stream.receive_some()
            assert chunk, "connection closed"
            self.buffer += chunk
        first, flags_length = struct.unpack_from(">II", self.buffer)
        length = flags_length & 0xFFFFFF
        payload, self.buffer = self.buffer[8 : 8 + length], self.buffer[8 + length :]
        control = bool(first & 0x80000000)
        return control, (first & 0xFFFF) if control else first, flags_length >> 24, payload


async def test_a_spdy_session_replies_echoes_pings_and_carries_data_both_ways() -> None:
    client_side, server_side = trio.testing.memory_stream_pair()
    connection = SpdyConnection(server_side)
    client = SpdyClient(client_side)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(connection.run)
        await client.syn_stream(1, {"streamtype": ["stdin"]})
        await client.syn_stream(3, {"streamtype": ["stdout"]})  # the shared zlib stream continues
        stdin = await connection.accept()
        stdout = await connection.accept()
        assert (stdin.id, stdin.header("streamtype"), stdout.header("streamtype")) == (1, "stdin", "stdout")
        await connection.reply(stdin)
        control, kind, _, payload = await client.frame()
        assert (control, kind, struct.unpack_from(">I", payload)[0]) == (True, 2, 1)
        assert decode_headers(client.inflate.decompress(payload[4:])) == {}

        await client.ping(7)
        assert await client.frame() == (True, 6, 0, struct.pack(">I", 7))

        await client.data(1, b"hello ")
        await client.data(1, b"world", fin=True)
        received = b""
        while chunk := await stdin.receive_some():
            received += chunk
        assert received == b"hello world"

        await stdout.send_all(b"x" * 70_000)  # split into frames of at most 32 KiB
        await stdout.send_eof()
        sizes, flags = [], 0
        while not flags:
            _, stream_id, flags, payload = await client.frame()
            assert stream_id == 3
            sizes.append(len(payload))
        assert (sizes, flags) == ([32768, 32768, 4464, 0], 1)
        await client_side.aclose()
        await connection.closed.wait()
        with pytest.raises(trio.EndOfChannel):
            await connection.accept()


async def test_an_idle_stream_is_closed_after_the_idle_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client, client_far = trio.testing.memory_stream_pair()
    backend, backend_far = trio.testing.memory_stream_pair()
    proxy = StreamProxy(idle_timeout=60.0)
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(proxy._copy_both_ways, client_far, backend)
        await trio.sleep(50)
        await client.send_all(b"ping")  # traffic pushes the deadline to 110
        assert await backend_far.receive_some() == b"ping"
    assert trio.current_time() - start == pytest.approx(110.0)


def _upgrade_scope(path: str, query: bytes) -> dict[str, object]:
    return {
        "type": "http",
        "method": "POST",
        "path": path,
        "query_string": query,
        "headers": [(b"connection", b"Upgrade"), (b"upgrade", b"SPDY/3.1")],
        "extensions": {UPGRADE_EXTENSION: {}},
    }


async def test_streams_beyond_the_cap_are_refused_with_429() -> None:
    class NoKubelet:
        @staticmethod
        def pod_by_name(namespace: str, name: str) -> object:
            return type("P", (), {"namespace": namespace, "name": name, "uid": "u"})()

    app = App(exec_routes(NoKubelet(), StreamProxy(max_streams=1, active=1)))  # type: ignore[arg-type]
    sent: list[dict[str, object]] = []

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b""}

    await app(_upgrade_scope("/exec/default/p/app", b"command=true&output=1"), receive, send)
    assert sent[0]["status"] == 429
    assert sent[1]["body"] == b"too many streaming connections (at most 1)\n"


async def test_streaming_tokens_are_single_use_and_expire(autojump_clock: trio.testing.MockClock) -> None:
    server = StreamingServer(backend=None, base_url="http://127.0.0.1:1")  # type: ignore[arg-type]
    request = pb.ExecRequest(container_id="c", cmd=["true"], stdout=True)
    first = server.get_exec(request)
    second = server.get_exec(request)
    assert first.startswith("http://127.0.0.1:1/exec/") and first != second
    routes = [Route("/exec/{token}", server._handle, ("POST",))]

    async def status(url: str) -> int:
        token = url.rsplit("/", 1)[1]
        response = await App(routes)._dispatch(Request("POST", f"/exec/{token}", {}, can_upgrade=True))
        return response.status

    assert await status(first) == 400  # found (and used up), but no SPDY upgrade headers
    assert await status(first) == 404
    await trio.sleep(TOKEN_TTL)
    assert await status(second) == 404


def test_the_upgrade_request_goes_to_the_streaming_url_without_credentials() -> None:
    head = upgrade_request_head(
        "POST",
        "http://127.0.0.1:4321/exec/tok?x=1",
        [("host", "node:10250"), ("authorization", "Bearer s3cret"), ("upgrade", "SPDY/3.1")],
    )
    assert head == b"POST /exec/tok?x=1 HTTP/1.1\r\nHost: 127.0.0.1:4321\r\nupgrade: SPDY/3.1\r\n\r\n"


def test_the_idle_timeout_is_a_flag_and_a_config_key(tmp_path: Path) -> None:
    assert load_options([])[0].streaming_connection_idle_timeout == 4 * 3600
    assert (
        load_options(["--streaming-connection-idle-timeout=30m"])[0].streaming_connection_idle_timeout == 1800
    )
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "streamingConnectionIdleTimeout: 5m\n"
    )
    options = load_options([f"--config={config}"])[0]
    assert options.streaming_connection_idle_timeout == 300
    assert component_configs(options).kubelet.streaming_connection_idle_timeout == 300
