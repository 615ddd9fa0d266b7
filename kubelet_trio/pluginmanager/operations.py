"""Registering and deregistering one plugin (Go: ``operationexecutor/operation_generator.go``).

The error texts are Go's, so a plugin's registrar logs the same words under either kubelet; what the plugin
chose (its type, its errors' text) is truncated in them. The RPCs go through grpclib on an asyncio thread
(:mod:`kubelet_trio.aiobridge`); each registration opens its own connection to the plugin's socket and
closes it when done, as Go's does.
"""

from __future__ import annotations

from collections.abc import Mapping

import trio

from kubelet_trio.aiobridge import AsyncioThread
from kubelet_trio.boundary import truncate
from kubelet_trio.cri.gen import pluginregistration as api
from kubelet_trio.pluginmanager.cache import (
    ActualState,
    PluginHandler,
    PluginValidationError,
    RegisteredPlugin,
    SocketIdentity,
)

__all__ = [
    "DIAL_TIMEOUT",
    "GET_INFO_TIMEOUT",
    "NOTIFY_TIMEOUT",
    "RegistrationError",
    "register",
    "unregister",
]

DIAL_TIMEOUT = 10.0  # connecting to the plugin's socket
GET_INFO_TIMEOUT = 1.0
NOTIFY_TIMEOUT = 5.0


class RegistrationError(Exception):
    """A registration that did not happen; the message is Go's."""


async def register(
    bridge: AsyncioThread,
    socket_path: str,
    identity: SocketIdentity,
    handlers: Mapping[str, PluginHandler],
    actual: ActualState,
) -> None:
    """Ask the plugin at ``socket_path`` who it is, hand it to its type's handler and tell it the outcome.

    Raises :class:`RegistrationError` when the plugin could not be asked (the caller retries with
    backoff) or was refused (told to the plugin, which is then recorded as registered only if its
    handler's ``register_plugin`` was reached, as in Go: a failed registration is retried only when the
    socket is created again).
    """
    from grpclib.client import Channel

    from kubelet_trio.cri.gen.pluginregistration.services import RegistrationStub

    channel = await bridge.run_sync(Channel, path=socket_path)
    try:
        stub = RegistrationStub(channel)
        try:
            with trio.fail_after(DIAL_TIMEOUT + GET_INFO_TIMEOUT):
                info = await bridge.call(stub.get_info, api.InfoRequest(), timeout=GET_INFO_TIMEOUT)
        except Exception as err:  # the plugin's failure to answer: a gRPC error, a reset, a timeout
            raise RegistrationError(
                "RegisterPlugin error -- failed to get plugin info using RPC GetInfo"
                f" at socket {socket_path}, err: {_text(err)}"
            ) from None

        async def notify(registered: bool, error: str = "") -> None:
            what = "registration status" if registered else "error"
            status = api.RegistrationStatus(plugin_registered=registered, error=error)
            try:
                with trio.fail_after(NOTIFY_TIMEOUT):
                    await bridge.call(stub.notify_registration_status, status, timeout=NOTIFY_TIMEOUT)
            except Exception as err:
                raise RegistrationError(
                    f"RegisterPlugin error -- failed to send {what} at socket {socket_path},"
                    f" err: {_text(err)}"
                ) from None
            if error:
                raise RegistrationError(error)

        handler = handlers.get(info.type)
        if handler is None:
            await notify(
                False,
                "RegisterPlugin error -- no handler registered for plugin type:"
                f" {truncate(info.type)} at socket {socket_path}",
            )
            return  # notify raised
        endpoint = info.endpoint or socket_path
        versions = tuple(info.supported_versions)
        try:
            handler.validate_plugin(info.name, endpoint, versions)
        except PluginValidationError as err:
            await notify(False, f"RegisterPlugin error -- plugin validation failed with err: {_text(err)}")
            return
        # recorded before the handler runs, so that the socket going away meanwhile deregisters it
        actual.add(RegisteredPlugin(socket_path, identity, info.type, info.name, endpoint, versions))
        try:
            await handler.register_plugin(info.name, endpoint, versions)
        except Exception as err:
            await notify(False, f"RegisterPlugin error -- plugin registration failed with err: {_text(err)}")
            return
        await notify(True)
    finally:
        with trio.CancelScope(shield=True):  # a cancelled registration still closes its connection
            await bridge.run_sync(channel.close)


async def unregister(
    plugin: RegisteredPlugin, handlers: Mapping[str, PluginHandler], actual: ActualState
) -> None:
    """Forget the plugin, then tell its handler (Go's order: a new socket may register meanwhile)."""
    actual.remove(plugin.socket_path)
    handler = handlers.get(plugin.plugin_type)
    if handler is None:
        raise RegistrationError(
            f"UnregisterPlugin error -- failed to get plugin handler for {plugin.socket_path}"
        )
    await handler.deregister_plugin(plugin.name)


def _text(err: BaseException) -> str:
    """An error's text for Go's messages, truncated: it may carry the plugin's words (a status message)."""
    return truncate(str(err) or type(err).__name__)
