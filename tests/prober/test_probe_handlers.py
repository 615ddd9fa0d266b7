"""The probe handlers against real sockets on 127.0.0.1 (Trio's real clock, short timeouts)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator

import pytest
import trio
from grpclib import GRPCError, Status
from grpclib.const import Cardinality, Handler
from grpclib.server import Server

from kubelet_trio.aiobridge import open_asyncio_thread
from kubelet_trio.api import Container, HTTPGetAction
from kubelet_trio.prober.probe import ProbeError, Result
from kubelet_trio.prober.probe.grpc import HEALTH_CHECK_METHOD, HealthCodec, grpc_probe
from kubelet_trio.prober.probe.health import (
    NOT_SERVING,
    SERVING,
    HealthCheckRequest,
    HealthCheckResponse,
)
from kubelet_trio.prober.probe.http import HttpProbe, request_for_action, resolve_container_port
from kubelet_trio.prober.probe.tcp import tcp_probe
from tests.prober.servers import closed_port, http_server, tcp_listener


def action(port: int | str, path: str = "/", **extra: object) -> HTTPGetAction:
    return HTTPGetAction.from_dict({"port": port, "path": path, **extra})


async def probe_url(port: int, path: str, limit: float = 1.0) -> tuple[Result, str]:
    """An httpGet probe of 127.0.0.1:port/path with the prober's timeout handling."""
    probe = HttpProbe(request_for_action(action(port, path), Container(name="app"), "127.0.0.1"))
    with trio.move_on_after(limit):
        return await probe.run()
    return probe.timed_out()


async def test_http_status_codes() -> None:
    with trio.fail_after(10):
        async with http_server(
            {"/ok": (200, {}, b"fine"), "/bad": (500, {}, b"secret body"), "/teapot": (418, {}, b"")}
        ) as server:
            assert await probe_url(server.port, "/ok") == (Result.SUCCESS, "fine")
            assert await probe_url(server.port, "/bad") == (
                Result.FAILURE,
                "HTTP probe failed with statuscode: 500",
            )
            assert (await probe_url(server.port, "/teapot"))[0] is Result.FAILURE


async def test_http_headers_user_agent_and_host() -> None:
    with trio.fail_after(10):
        async with http_server({"/h": (200, {}, b"")}) as server:
            request = request_for_action(
                action(
                    server.port,
                    "/h",
                    httpHeaders=[{"name": "X-Probe", "value": "1"}, {"name": "Host", "value": "svc.local"}],
                ),
                Container(name="app"),
                "127.0.0.1",
            )
            assert (await HttpProbe(request).run())[0] is Result.SUCCESS
            (_, headers) = server.requests[0]
            assert headers["user-agent"] == "kube-probe/1.36"
            assert headers["accept"] == "*/*"
            assert headers["x-probe"] == "1"
            assert headers["host"] == "svc.local"


async def test_http_redirects_same_host_followed_other_host_warned() -> None:
    with trio.fail_after(10):
        async with http_server() as server:
            server.routes.update(
                {
                    "/old": (302, {"Location": "/new"}, b""),
                    "/new": (200, {}, b"moved here"),
                    "/away": (301, {"Location": "http://localhost:1/elsewhere"}, b"bye"),
                    "/loop": (302, {"Location": "/loop"}, b""),
                }
            )
            assert await probe_url(server.port, "/old") == (Result.SUCCESS, "moved here")
            assert await probe_url(server.port, "/away") == (
                Result.WARNING,
                "Probe terminated redirects, Response body: bye",
            )
            result, output = await probe_url(server.port, "/loop")
            assert result is Result.FAILURE and "stopped after 10 redirects" in output
            # Go's http.Client: 10 requests, the 10th redirect refused (this client made 11 on httpx)
            assert output == 'Get "/loop": stopped after 10 redirects'
            assert sum(1 for path, _ in server.requests if path == "/loop") == 10


async def test_http_timeout_and_refused() -> None:
    with trio.fail_after(10):
        async with http_server({"/slow": (200, {}, b"")}) as server:
            server.delay = 2
            start = trio.current_time()
            result, output = await probe_url(server.port, "/slow", limit=0.3)
            assert result is Result.FAILURE and "context deadline exceeded" in output
            assert trio.current_time() - start < 1.5
        port = closed_port()
        result, output = await probe_url(port, "/")
        assert result is Result.FAILURE
        assert (
            output
            == f'Get "http://127.0.0.1:{port}/": dial tcp 127.0.0.1:{port}: connect: connection refused'
        )


def test_named_ports() -> None:
    app = Container.from_dict({"name": "app", "ports": [{"name": "http", "containerPort": 8080}]})
    assert resolve_container_port("http", app) == 8080
    assert resolve_container_port("9090", app) == 9090
    assert resolve_container_port(81, app) == 81
    with pytest.raises(ProbeError, match="port metrics not found"):
        resolve_container_port("metrics", app)
    with pytest.raises(ProbeError, match="invalid port number: 0"):
        resolve_container_port(0, app)
    url, _ = request_for_action(action("http", "healthz", scheme="HTTPS"), app, "10.88.0.9")
    assert url == "https://10.88.0.9:8080/healthz"


async def test_tcp_probe() -> None:
    with trio.fail_after(10):
        async with tcp_listener() as port:
            assert await tcp_probe("127.0.0.1", port) == (Result.SUCCESS, "")
        port = closed_port()
        result, output = await tcp_probe("127.0.0.1", port)
        assert result is Result.FAILURE
        assert output == f"dial tcp 127.0.0.1:{port}: connect: connection refused"  # Go's wording


class _Health:
    def __init__(self, statuses: dict[str, int]) -> None:
        self.statuses = statuses

    async def check(self, stream: object) -> None:
        request = await stream.recv_message()  # type: ignore[attr-defined]
        status = self.statuses.get(request.service)
        if status is None:
            raise GRPCError(Status.NOT_FOUND, "unknown service")
        await stream.send_message(HealthCheckResponse(status))  # type: ignore[attr-defined]

    def __mapping__(self) -> dict[str, Handler]:
        return {
            HEALTH_CHECK_METHOD: Handler(
                self.check, Cardinality.UNARY_UNARY, HealthCheckRequest, HealthCheckResponse
            )
        }


class _Unimplemented:
    """What a grpc-go server without the health service answers."""

    async def check(self, stream: object) -> None:
        raise GRPCError(Status.UNIMPLEMENTED, "unknown service grpc.health.v1.Health")

    def __mapping__(self) -> dict[str, Handler]:
        return {
            HEALTH_CHECK_METHOD: Handler(
                self.check, Cardinality.UNARY_UNARY, HealthCheckRequest, HealthCheckResponse
            )
        }


@contextlib.asynccontextmanager
async def grpc_server(handlers: list[object]) -> AsyncIterator[int]:
    async with open_asyncio_thread() as bridge:
        server = await bridge.run_sync(Server, handlers, codec=HealthCodec())
        await bridge.call(server.start, "127.0.0.1", 0)
        try:
            assert server._server is not None
            yield server._server.sockets[0].getsockname()[1]
        finally:
            await bridge.run_sync(server.close)
            await bridge.call(server.wait_closed)


async def test_grpc_probe() -> None:
    with trio.fail_after(20):
        async with grpc_server([_Health({"": SERVING, "db": NOT_SERVING})]) as port:
            assert await grpc_probe("127.0.0.1", port, "") == (Result.SUCCESS, "service healthy")
            assert await grpc_probe("127.0.0.1", port, "db") == (
                Result.FAILURE,
                'service unhealthy (responded with "NOT_SERVING")',
            )
            result, output = await grpc_probe("127.0.0.1", port, "nope")
            assert result is Result.FAILURE and output.startswith("error: health rpc probe failed: NOT_FOUND")
        async with grpc_server([_Unimplemented()]) as port:
            result, output = await grpc_probe("127.0.0.1", port, "")
            assert result is Result.FAILURE and "does not implement the grpc health protocol" in output
        result, output = await grpc_probe("127.0.0.1", closed_port(), "")
        assert result is Result.FAILURE and output.startswith("error: failed to connect service at")


async def test_grpc_probes_share_the_probe_managers_asyncio_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many gRPC probes, one asyncio thread: started at the first probe, joined when the manager stops."""
    from kubelet_trio import aiobridge
    from kubelet_trio.api import Pod
    from kubelet_trio.prober import ProbeManager
    from kubelet_trio.prober.results import ProbeKind, ProbeResult
    from kubelet_trio.sim.runtime import SimRuntime

    started: list[aiobridge.AsyncioThread] = []

    class Counted(aiobridge.AsyncioThread):
        def __init__(self, nursery: trio.Nursery) -> None:
            super().__init__(nursery)
            started.append(self)

    pod = Pod.from_dict({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}})
    manager = ProbeManager(runtime=SimRuntime(), status_provider=lambda uid: None)
    with trio.fail_after(20):
        async with grpc_server([_Health({"": SERVING})]) as port:
            monkeypatch.setattr(aiobridge, "AsyncioThread", Counted)  # the server's bridge is not counted
            container = Container.from_dict({"name": "app", "livenessProbe": {"grpc": {"port": port}}})
            results: list[ProbeResult] = []

            async def probe() -> None:
                results.append(
                    await manager.prober.probe(ProbeKind.LIVENESS, pod, container, "cid", "127.0.0.1")
                )

            async with trio.open_nursery() as nursery:
                await nursery.start(manager.run)
                assert started == []  # no thread before the first gRPC probe
                async with trio.open_nursery() as probes:
                    for _ in range(5):
                        probes.start_soon(probe)
                await probe()
                assert results == [ProbeResult.SUCCESS] * 6
                [bridge] = started
                thread = await bridge.run_sync(threading.current_thread)
                assert thread.is_alive()
                nursery.cancel_scope.cancel()
            assert not thread.is_alive()


def test_health_messages_round_trip() -> None:
    assert HealthCheckRequest("").encode() == b""
    assert HealthCheckRequest("db").encode() == b"\x0a\x02db"
    assert HealthCheckRequest.decode(b"\x0a\x02db") == HealthCheckRequest("db")
    assert HealthCheckResponse.decode(b"\x08\x01") == HealthCheckResponse(SERVING)
    assert HealthCheckResponse.decode(b"") == HealthCheckResponse(0)
    # unknown fields are skipped
    assert HealthCheckResponse.decode(b"\x12\x01x\x08\x02") == HealthCheckResponse(NOT_SERVING)


async def test_prober_applies_timeouts_and_events() -> None:
    """A server that accepts and never answers: the probe's 1 s timeout makes it a failure."""
    from functools import partial

    from kubelet_trio.api import Pod
    from kubelet_trio.prober import Prober
    from kubelet_trio.prober.results import ProbeKind, ProbeResult
    from kubelet_trio.sim.runtime import SimRuntime

    async def hang(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    events: list[tuple[str, str]] = []
    prober = Prober(
        runtime=SimRuntime(), events=lambda pod, t, reason, message: events.append((reason, message))
    )
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            (listener,) = await nursery.start(partial(trio.serve_tcp, hang, 0, host="127.0.0.1"))
            port = listener.socket.getsockname()[1]
            pod = Pod.from_dict({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}})
            for kind, probe, expected in [
                (
                    ProbeKind.LIVENESS,
                    {"grpc": {"port": port}},
                    "timeout: health rpc did not complete within 1s",
                ),
                (ProbeKind.READINESS, {"httpGet": {"port": port, "path": "/"}}, "context deadline exceeded"),
            ]:
                field = "livenessProbe" if kind is ProbeKind.LIVENESS else "readinessProbe"
                container = Container.from_dict({"name": "app", field: {**probe, "timeoutSeconds": 1}})
                start = trio.current_time()
                assert await prober.probe(kind, pod, container, "cid", "127.0.0.1") is ProbeResult.FAILURE
                assert 1 <= trio.current_time() - start < 3
                assert events[-1][0] == "Unhealthy" and expected in events[-1][1]
            nursery.cancel_scope.cancel()
    assert events[0][1].startswith("Liveness probe failed: ")
    with pytest.raises(ProbeError):
        await prober.probe(
            ProbeKind.READINESS,
            pod,
            Container.from_dict({"name": "a", "readinessProbe": {"httpGet": {"port": "nope"}}}),
            "c",
            "",
        )
    assert events[-1] == (
        "Unhealthy",
        "Readiness probe errored and resulted in unknown state: port nope not found",
    )
