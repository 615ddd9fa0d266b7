"""The desired and actual states of the plugin world (Go: ``pluginmanager/cache``) and the handler protocol.

The desired state is what the registry directory holds: a socket path and the identity of the socket file
there (its inode and change time, so a socket deleted and created again between two scans is a new plugin,
as Go's event timestamp makes it). The actual state is what was handed to a handler.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import attrs

__all__ = [
    "CSI_PLUGIN",
    "DEVICE_PLUGIN",
    "ActualState",
    "PluginHandler",
    "PluginValidationError",
    "RegisteredPlugin",
    "SocketIdentity",
]

# the plugin types of pluginregistration.v1 (PluginInfo.type)
CSI_PLUGIN = "CSIPlugin"
DEVICE_PLUGIN = "DevicePlugin"

SocketIdentity = tuple[int, int]  # (st_ino, st_ctime_ns) of the socket file


class PluginValidationError(Exception):
    """A handler refuses a plugin (an unsupported version, a name taken): told to the plugin."""


class PluginHandler(Protocol):
    """What a plugin type's consumer provides (Go: ``cache.PluginHandler``)."""

    def validate_plugin(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        """Raise :class:`PluginValidationError` to refuse the plugin before anything is registered."""

    async def register_plugin(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        """Start using the plugin; an exception is reported to the plugin as a failed registration."""

    async def deregister_plugin(self, name: str) -> None:
        """Stop using the plugin: its socket is gone or was replaced."""


@attrs.frozen
class RegisteredPlugin:
    socket_path: str
    identity: SocketIdentity
    plugin_type: str
    name: str
    endpoint: str
    versions: tuple[str, ...]


@attrs.define(eq=False)
class ActualState:
    """The registered plugins by socket path."""

    _plugins: dict[str, RegisteredPlugin] = attrs.Factory(dict)

    def add(self, plugin: RegisteredPlugin) -> None:
        self._plugins[plugin.socket_path] = plugin

    def remove(self, socket_path: str) -> None:
        self._plugins.pop(socket_path, None)

    def registered(self) -> list[RegisteredPlugin]:
        return list(self._plugins.values())

    def is_current(self, socket_path: str, identity: SocketIdentity) -> bool:
        plugin = self._plugins.get(socket_path)
        return plugin is not None and plugin.identity == identity
