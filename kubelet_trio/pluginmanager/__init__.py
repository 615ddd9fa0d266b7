"""The plugin manager (Go: ``pkg/kubelet/pluginmanager``): plugins register with the kubelet by creating
a socket under ``<root-dir>/plugins_registry/``; the watcher notices it, the reconciler asks the plugin who
it is (``pluginregistration.v1`` ``GetInfo``) and hands it to the handler of its type (``CSIPlugin``,
``DevicePlugin``), then tells the plugin how that went (``NotifyRegistrationStatus``). A socket that goes
away, or is created again, deregisters the plugin."""

from kubelet_trio.pluginmanager.cache import (
    CSI_PLUGIN,
    DEVICE_PLUGIN,
    PluginHandler,
    PluginValidationError,
    RegisteredPlugin,
)
from kubelet_trio.pluginmanager.manager import PLUGINS_REGISTRY, PluginManager

__all__ = [
    "CSI_PLUGIN",
    "DEVICE_PLUGIN",
    "PLUGINS_REGISTRY",
    "PluginHandler",
    "PluginManager",
    "PluginValidationError",
    "RegisteredPlugin",
]
