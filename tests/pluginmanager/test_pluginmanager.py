"""The plugin manager against plugins served over real gRPC on unix sockets (the upstream
``pluginregistration.v1`` API, as csi-node-driver-registrar and device plugins serve it)."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing
from grpclib.server import Server

from kubelet_trio.aiobridge import AsyncioThread, open_asyncio_thread
from kubelet_trio.cri.gen import pluginregistration as api
from kubelet_trio.cri.gen.pluginregistration.services import RegistrationBase
from kubelet_trio.fsio import run_inline
from kubelet_trio.logs import record_fields
from kubelet_trio.pluginmanager import CSI_PLUGIN, PluginManager, PluginValidationError, operations
from kubelet_trio.pluginmanager.manager import FAILURE_LOG_BURST
from kubelet_trio.pluginmanager.pluginwatcher import scan_sockets


class FakePlugin(RegistrationBase):
    """A plugin's registration service: answers GetInfo and records the kubelet's verdicts."""

    def __init__(self, info: api.PluginInfo) -> None:
        self.info = info
        self.get_info_calls = 0
        self.statuses: list[api.RegistrationStatus] = []

    async def get_info(self, message: api.InfoRequest) -> api.PluginInfo:
        self.get_info_calls += 1
        return self.info

    async def notify_registration_status(
        self, message: api.RegistrationStatus
    ) -> api.RegistrationStatusResponse:
        self.statuses.append(message)
        return api.RegistrationStatusResponse()


@attrs.define
class RecordingHandler:
    refuse: str | None = None
    fail: str | None = None
    calls: list[tuple[str, ...]] = attrs.Factory(list)

    def validate_plugin(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        self.calls.append(("validate", name, endpoint, *versions))
        if self.refuse:
            raise PluginValidationError(self.refuse)

    async def register_plugin(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        self.calls.append(("register", name, endpoint, *versions))
        if self.fail:
            raise RuntimeError(self.fail)

    async def deregister_plugin(self, name: str) -> None:
        self.calls.append(("deregister", name))


async def serve(bridge: AsyncioThread, plugin: FakePlugin, path: Path) -> Server:
    server = await bridge.run_sync(Server, [plugin])
    await bridge.call(server.start, path=str(path))
    return server


async def stop(bridge: AsyncioThread, server: Server, path: Path) -> None:
    await bridge.run_sync(server.close)
    await bridge.call(server.wait_closed)
    await trio.Path(path).unlink(missing_ok=True)


async def until(condition: Callable[[], bool]) -> None:
    with trio.fail_after(20):  # a hang guard, not a timing assertion
        while not condition():  # noqa: ASYNC110 (the plugin's gRPC handlers run on the asyncio thread)
            await trio.sleep(0.02)


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """A short directory: a unix socket path must fit in 107 bytes, and pytest's are long."""
    path = Path(tempfile.mkdtemp(prefix="pm-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def bridge() -> AsyncIterator[AsyncioThread]:
    async with open_asyncio_thread() as bridge:
        yield bridge


def csi_info(name: str = "hostpath.csi.k8s.io", endpoint: str = "/csi/csi.sock") -> api.PluginInfo:
    return api.PluginInfo(type=CSI_PLUGIN, name=name, endpoint=endpoint, supported_versions=["1.0.0"])


async def test_registers_deregisters_and_reregisters(
    tmp_path: Path, bridge: AsyncioThread, nursery: trio.Nursery
) -> None:
    registry = tmp_path / "plugins_registry"
    handler = RecordingHandler()
    manager = PluginManager(str(registry))
    manager.add_handler(CSI_PLUGIN, handler)
    await nursery.start(manager.run)
    assert registry.is_dir()

    sock = registry / "hostpath.csi.k8s.io-reg.sock"
    plugin = FakePlugin(csi_info())
    server = await serve(bridge, plugin, sock)
    await until(lambda: len(plugin.statuses) == 1)
    assert plugin.statuses == [api.RegistrationStatus(plugin_registered=True, error="")]
    assert handler.calls == [
        ("validate", "hostpath.csi.k8s.io", "/csi/csi.sock", "1.0.0"),
        ("register", "hostpath.csi.k8s.io", "/csi/csi.sock", "1.0.0"),
    ]
    assert [p.name for p in manager.registered()] == ["hostpath.csi.k8s.io"]

    await stop(bridge, server, sock)  # the socket goes: the plugin is deregistered
    await until(lambda: len(handler.calls) == 3)
    assert handler.calls[2] == ("deregister", "hostpath.csi.k8s.io")
    assert manager.registered() == []

    server = await serve(bridge, plugin, sock)  # back: registered again
    await until(lambda: len(plugin.statuses) == 2)
    assert handler.calls[3:] == [
        ("validate", "hostpath.csi.k8s.io", "/csi/csi.sock", "1.0.0"),
        ("register", "hostpath.csi.k8s.io", "/csi/csi.sock", "1.0.0"),
    ]
    await stop(bridge, server, sock)


async def test_empty_endpoint_means_the_registration_socket(
    tmp_path: Path, bridge: AsyncioThread, nursery: trio.Nursery
) -> None:
    registry = tmp_path / "plugins_registry"
    (registry / "sub").mkdir(parents=True)
    handler = RecordingHandler()
    manager = PluginManager(str(registry))
    manager.add_handler(CSI_PLUGIN, handler)
    await nursery.start(manager.run)
    sock = registry / "sub" / "driver.sock"  # sockets in subdirectories count too, as in Go
    plugin = FakePlugin(csi_info(endpoint=""))
    server = await serve(bridge, plugin, sock)
    await until(lambda: len(plugin.statuses) == 1)
    assert handler.calls[1] == ("register", "hostpath.csi.k8s.io", str(sock), "1.0.0")
    await stop(bridge, server, sock)


@pytest.mark.parametrize(
    ("handler", "plugin_type", "error", "retried"),
    [
        (
            RecordingHandler(),
            "FancyPlugin",
            "RegisterPlugin error -- no handler registered for plugin type: FancyPlugin at socket {sock}",
            True,
        ),
        (
            RecordingHandler(refuse="version 0.1 unsupported"),
            CSI_PLUGIN,
            "RegisterPlugin error -- plugin validation failed with err: version 0.1 unsupported",
            True,
        ),
        (
            RecordingHandler(fail="name taken"),
            CSI_PLUGIN,
            "RegisterPlugin error -- plugin registration failed with err: name taken",
            False,  # recorded before the handler ran: tried again only when the socket is re-created
        ),
    ],
)
async def test_refusals_are_told_to_the_plugin_in_gos_words(
    tmp_path: Path,
    bridge: AsyncioThread,
    nursery: trio.Nursery,
    handler: RecordingHandler,
    plugin_type: str,
    error: str,
    retried: bool,
) -> None:
    registry = tmp_path / "plugins_registry"
    manager = PluginManager(str(registry))
    manager.add_handler(CSI_PLUGIN, handler)
    await nursery.start(manager.run)
    sock = registry / "p.sock"
    info = csi_info()
    info.type = plugin_type
    plugin = FakePlugin(info)
    server = await serve(bridge, plugin, sock)
    await until(lambda: len(plugin.statuses) >= 1)
    assert plugin.statuses[0] == api.RegistrationStatus(
        plugin_registered=False, error=error.format(sock=sock)
    )
    if retried:  # after the first backoff (0.5 s) the reconciler asks again
        await until(lambda: plugin.get_info_calls >= 2)
    else:
        await trio.sleep(2.5)  # two and a half reconcile periods: nothing more may happen
        assert plugin.get_info_calls == 1
    await stop(bridge, server, sock)


async def test_a_plugin_that_does_not_answer_is_retried_without_stopping_others(
    tmp_path: Path, bridge: AsyncioThread, nursery: trio.Nursery
) -> None:
    registry = tmp_path / "plugins_registry"
    registry.mkdir()
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # accepts, never speaks HTTP/2
    silent.bind(str(registry / "a-silent.sock"))
    silent.listen()
    handler = RecordingHandler()
    manager = PluginManager(str(registry))
    manager.add_handler(CSI_PLUGIN, handler)
    try:
        await nursery.start(manager.run)
        plugin = FakePlugin(csi_info())
        sock = registry / "b-good.sock"
        server = await serve(bridge, plugin, sock)
        await until(lambda: len(plugin.statuses) == 1)
        assert plugin.statuses[0].plugin_registered
        assert [p.name for p in manager.registered()] == ["hostpath.csi.k8s.io"]
        await stop(bridge, server, sock)
    finally:
        silent.close()


def test_scan_ignores_dot_names_and_plain_files(tmp_path: Path) -> None:
    (tmp_path / ".hidden").mkdir()
    (tmp_path / "plain.sock").write_text("not a socket")
    sockets = {}
    for name in ("x.sock", ".dot.sock", ".hidden/y.sock"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(str(tmp_path / name))
        sockets[name] = s
    try:
        found, directories = scan_sockets(str(tmp_path))
        assert list(found) == [str(tmp_path / "x.sock")]
        assert directories == [str(tmp_path)]
        before = found[str(tmp_path / "x.sock")]
        sockets["x.sock"].close()
        os.unlink(tmp_path / "x.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(str(tmp_path / "x.sock"))
        sockets["x.sock"] = s
        assert (
            scan_sockets(str(tmp_path))[0][str(tmp_path / "x.sock")] != before
        )  # a new socket, a new plugin
    finally:
        for s in sockets.values():
            s.close()


async def test_failed_registrations_back_off_as_go(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Go's goroutinemap: 0.5 s after the first failure, doubling up to 2 min 2 s; the reconciler looks
    once a second, so an attempt happens at the first look after the backoff ends."""
    attempts: list[float] = []

    async def unreachable(*args: object) -> None:
        attempts.append(trio.current_time())
        raise operations.RegistrationError("RegisterPlugin error -- failed to get plugin info")

    monkeypatch.setattr(operations, "register", unreachable)
    registry = tmp_path / "plugins_registry"
    registry.mkdir()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(registry / "p.sock"))
    try:
        async with trio.open_nursery() as nursery:
            start = trio.current_time()
            await nursery.start(PluginManager(str(registry), run_sync=run_inline).run)
            await trio.sleep(400)
            nursery.cancel_scope.cancel()
    finally:
        listener.close()
    # backoffs 0.5, 1, 2, 4, 8, 16, 32, 64, 122, 122: each attempt at the first 1 s tick at or after it ends
    assert [round(t - start) for t in attempts] == [0, 1, 2, 4, 8, 16, 32, 64, 128, 250, 372]


@pytest.fixture
def idle_jump_clock() -> trio.testing.MockClock:
    """Virtual time that jumps to the next timer only once everything has been idle a tenth of a second
    (real), so that each registration attempt over the real socket finishes before the next tick."""
    return trio.testing.MockClock(autojump_threshold=0.1)


async def test_dead_sockets_are_logged_once_with_counts(
    tmp_path: Path, idle_jump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A registry full of sockets nobody answers on: Go logs every attempt (each socket retried with
    backoff, seven times in a minute); here a socket is logged when it starts failing, within a budget,
    and the rest are counted in a summary."""
    registry = tmp_path / "plugins_registry"
    registry.mkdir()
    count = 100
    dead = []
    try:
        for i in range(count):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(str(registry / f"dead-{i:03}.sock"))  # bound, never listening: connections refused
            dead.append(s)
        with caplog.at_level(logging.INFO, logger="kubelet_trio.pluginmanager"):
            async with trio.open_nursery() as nursery:
                manager = PluginManager(str(registry), run_sync=run_inline)
                manager.add_handler(CSI_PLUGIN, RecordingHandler())
                await nursery.start(manager.run)
                await trio.sleep(60)
                nursery.cancel_scope.cancel()
    finally:
        for s in dead:
            s.close()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    firsts = [r for r in errors if r.getMessage() == "operationExecutor.RegisterPlugin failed"]
    summaries = [r for r in errors if r.getMessage() == "Plugin registrations failing"]
    assert len(firsts) == FAILURE_LOG_BURST
    assert [record_fields(r)["failing"] for r in firsts] == list(range(1, FAILURE_LOG_BURST + 1))
    assert [(record_fields(r)["failing"], record_fields(r)["suppressed"]) for r in summaries] == [
        (count, count - FAILURE_LOG_BURST)
    ]
    assert len(errors) == FAILURE_LOG_BURST + 1
