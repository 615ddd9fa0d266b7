"""The plugin manager (Go: ``pkg/kubelet/pluginmanager``): plugins register with the kubelet by creating
a socket under ``<root-dir>/plugins_registry/``; the watcher notices it, the reconciler asks the plugin who
it is (``pluginregistration.v1`` ``GetInfo``) and hands it to the handler of its type (``CSIPlugin``,
``DevicePlugin``), then tells the plugin how that went (``NotifyRegistrationStatus``). A socket that goes
away, or is created again, deregisters the plugin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.pluginmanager.cache import (
        CSI_PLUGIN,
        DEVICE_PLUGIN,
        PluginHandler,
        PluginValidationError,
        RegisteredPlugin,
    )
    from kubelet_trio.pluginmanager.manager import PLUGINS_REGISTRY, PluginManager

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "CSI_PLUGIN": "kubelet_trio.pluginmanager.cache",
    "DEVICE_PLUGIN": "kubelet_trio.pluginmanager.cache",
    "PluginHandler": "kubelet_trio.pluginmanager.cache",
    "PluginValidationError": "kubelet_trio.pluginmanager.cache",
    "RegisteredPlugin": "kubelet_trio.pluginmanager.cache",
    "PLUGINS_REGISTRY": "kubelet_trio.pluginmanager.manager",
    "PluginManager": "kubelet_trio.pluginmanager.manager",
}

__all__ = [
    "CSI_PLUGIN",
    "DEVICE_PLUGIN",
    "PLUGINS_REGISTRY",
    "PluginHandler",
    "PluginManager",
    "PluginValidationError",
    "RegisteredPlugin",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
