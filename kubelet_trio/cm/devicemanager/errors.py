"""The device manager's errors: what admission, container start and a plugin's caller can tell apart."""

from __future__ import annotations

__all__ = ["AllocationError", "DeviceManagerError", "PluginCallError", "RegistrationError"]


class DeviceManagerError(Exception):
    """Base of the device manager's errors; ``str()`` is Go's message, shown to users as is."""


class RegistrationError(DeviceManagerError):
    """A plugin's ``Register`` is refused (the plugin receives the message as its gRPC error)."""


class AllocationError(DeviceManagerError):
    """Devices cannot be given to a container (admission turns it into ``UnexpectedAdmissionError``)."""


class PluginCallError(DeviceManagerError):
    """A call to a plugin failed: its status, a transport failure or no answer in time."""
