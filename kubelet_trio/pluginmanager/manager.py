"""The plugin manager's loop (Go: ``plugin_manager.go`` + ``reconciler``): scan, then reconcile.

Every :data:`RECONCILE_PERIOD` (sooner when inotify reports a change in the registry tree) the sockets
under the directory are compared with the registered plugins: plugins whose socket is gone or was replaced
are deregistered first, then sockets without a current registration are registered. Operations run
concurrently, at most one per socket; a socket whose registration failed waits an exponential backoff
(Go's ``goroutinemap``: 0.5 s doubling to 2 min 2 s) before it is tried again.

Anyone who can write to the registry directory can fill it with sockets nobody answers on. Go logs each
failed attempt; here a socket's failure is logged when it starts failing (its retries at debug level),
those first lines within a :class:`~kubelet_trio.boundary.LogBudget`, and the ones it held back are
summarised with the count of failing sockets once it allows a line again: a directory of dead sockets
costs a few lines per :data:`FAILURE_LOG_PERIOD`, whatever their number.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from kubelet_trio.aiobridge import AsyncioThreadSource, open_lazy_asyncio_thread
from kubelet_trio.boundary import MAX_MESSAGE, BoundaryErrors, LogBudget, truncate
from kubelet_trio.config.inotify import IN_ALL_CHANGES, Inotify, kick_on_events
from kubelet_trio.flowcontrol import Backoff
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.logs import kv
from kubelet_trio.pluginmanager import operations
from kubelet_trio.pluginmanager.cache import ActualState, PluginHandler, RegisteredPlugin, SocketIdentity
from kubelet_trio.pluginmanager.pluginwatcher import scan_sockets

__all__ = [
    "BACKOFF_INITIAL",
    "BACKOFF_MAX",
    "FAILURE_LOG_BURST",
    "FAILURE_LOG_PERIOD",
    "PLUGINS_REGISTRY",
    "RECONCILE_PERIOD",
    "PluginManager",
]

logger = logging.getLogger(__name__)

PLUGINS_REGISTRY = "plugins_registry"  # under the root dir: where plugins put their registration sockets
RECONCILE_PERIOD = 1.0
BACKOFF_INITIAL = 0.5
BACKOFF_MAX = 122.0
FAILURE_LOG_PERIOD = 10.0  # seconds: at most FAILURE_LOG_BURST lines about failing sockets per period
FAILURE_LOG_BURST = 5


@attrs.define(eq=False)
class PluginManager:
    """Registers the plugins that put a socket under ``sockets_dir`` (``<root-dir>/plugins_registry``)."""

    sockets_dir: str
    run_sync: RunSync = run_in_thread
    boundary_errors: BoundaryErrors | None = None
    bridge: AsyncioThreadSource | None = None  # None: a lazily started one of its own
    _handlers: dict[str, PluginHandler] = attrs.field(factory=dict, init=False)
    _actual: ActualState = attrs.field(factory=ActualState, init=False)
    _desired: dict[str, SocketIdentity] = attrs.field(factory=dict, init=False)
    _pending: set[str] = attrs.field(factory=set, init=False)
    _backoff: Backoff = attrs.field(factory=lambda: Backoff(BACKOFF_INITIAL, BACKOFF_MAX), init=False)
    _watched: set[str] = attrs.field(factory=set, init=False)
    _failing: set[str] = attrs.field(factory=set, init=False)  # sockets whose last registration failed
    _failure_log: LogBudget = attrs.field(
        factory=lambda: LogBudget(FAILURE_LOG_PERIOD, FAILURE_LOG_BURST), init=False
    )

    def add_handler(self, plugin_type: str, handler: PluginHandler) -> None:
        """Handle plugins of ``plugin_type`` (``CSIPlugin``, ``DevicePlugin``); before :meth:`run`."""
        self._handlers[plugin_type] = handler

    def registered(self) -> list[RegisteredPlugin]:
        return self._actual.registered()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self.run_sync(os.makedirs, self.sockets_dir, 0o755, True)
        inotify = Inotify.open()
        send, receive = trio.open_memory_channel[None](1)
        try:
            async with open_lazy_asyncio_thread() as own, trio.open_nursery() as nursery:
                bridge = self.bridge or own
                if inotify is not None:
                    nursery.start_soon(kick_on_events, inotify, lambda _: True, send.clone())
                logger.info("Plugin Watcher Start", extra=kv(path=self.sockets_dir))
                task_status.started()
                while True:
                    await self._scan(inotify)
                    self._reconcile(bridge, nursery)
                    self._summarise_failures()
                    with trio.move_on_after(RECONCILE_PERIOD):
                        await receive.receive()
        finally:
            if inotify is not None:
                inotify.close()

    async def _scan(self, inotify: Inotify | None) -> None:
        try:
            self._desired, directories = await self.run_sync(scan_sockets, self.sockets_dir)
        except OSError as err:
            logger.error(
                "Failed to traverse plugin socket path", extra=kv(path=self.sockets_dir, err=str(err))
            )
            self._desired = {}
            return
        if inotify is not None:
            for directory in directories:
                if (
                    directory not in self._watched
                    and inotify.add_watch(directory, IN_ALL_CHANGES) is not None
                ):
                    self._watched.add(directory)

    def _reconcile(self, bridge: AsyncioThreadSource, nursery: trio.Nursery) -> None:
        for plugin in self._actual.registered():  # deregistrations first, as Go
            if (
                self._desired.get(plugin.socket_path) != plugin.identity
                and plugin.socket_path not in self._pending
            ):
                self._start(nursery, plugin.socket_path, self._unregister, plugin)
        now = trio.current_time()
        for socket_path, identity in self._desired.items():
            if socket_path in self._pending or self._actual.is_current(socket_path, identity):
                continue
            if self._backoff.is_in_backoff_since_update(socket_path, now):
                continue
            self._start(nursery, socket_path, self._register, bridge, socket_path, identity)

    def _start(
        self, nursery: trio.Nursery, socket_path: str, operation: Callable[..., Awaitable[None]], *args: Any
    ) -> None:
        self._pending.add(socket_path)

        async def run() -> None:
            try:
                await operation(*args)
            finally:
                self._pending.discard(socket_path)

        nursery.start_soon(run)

    async def _register(
        self, bridge: AsyncioThreadSource, socket_path: str, identity: SocketIdentity
    ) -> None:
        try:
            await operations.register(bridge.get(), socket_path, identity, self._handlers, self._actual)
        except operations.RegistrationError as err:
            self._backoff.next(socket_path, trio.current_time())
            self._failed(socket_path, truncate(str(err), MAX_MESSAGE))
            return
        self._backoff.reset(socket_path)
        self._failing.discard(socket_path)
        logger.info("operationExecutor.RegisterPlugin succeeded", extra=kv(path=socket_path))

    def _failed(self, socket_path: str, err: str) -> None:
        """Log a socket's failure when it starts failing, within the budget."""
        if socket_path in self._failing:
            logger.debug("operationExecutor.RegisterPlugin failed again", extra=kv(path=socket_path, err=err))
            return
        self._failing.add(socket_path)
        suppressed = self._failure_log.take(trio.current_time())
        if suppressed is None:
            return
        more = {"suppressed": suppressed} if suppressed else {}
        logger.error(
            "operationExecutor.RegisterPlugin failed",
            extra=kv(path=socket_path, err=err, failing=len(self._failing), **more),
        )

    def _summarise_failures(self) -> None:
        """Forget the failing sockets that are gone; say how many fail once the budget allows, when it
        held lines back."""
        self._failing.intersection_update(self._desired)
        suppressed = self._failure_log.flush(trio.current_time())
        if suppressed is not None:
            logger.error(
                "Plugin registrations failing", extra=kv(failing=len(self._failing), suppressed=suppressed)
            )

    async def _unregister(self, plugin: RegisteredPlugin) -> None:
        try:
            await operations.unregister(plugin, self._handlers, self._actual)
        except Exception as err:  # a handler's failure to let go is its own; the plugin is gone either way
            logger.error(
                "operationExecutor.UnregisterPlugin failed",
                extra=kv(path=plugin.socket_path, plugin=plugin.name, err=truncate(str(err), MAX_MESSAGE)),
            )
            return
        logger.info("DeRegisterPlugin called", extra=kv(path=plugin.socket_path, plugin=plugin.name))
