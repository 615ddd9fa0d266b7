"""The plugin manager's handler for CSI drivers (Go: ``csi_plugin.go`` ``RegistrationHandler``).

A driver's registrar sidecar puts a socket in the plugin registry; once the plugin manager has its name,
endpoint and versions, this handler checks the versions (Go's rules and words), records the driver's
endpoint, asks the driver ``NodeGetInfo`` and writes the answer to the Node and CSINode. A driver whose
``NodeGetInfo`` or API write fails is forgotten again, and the registrar is told why.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import attrs

from kubelet_trio.aiobridge import AsyncioThreadSource
from kubelet_trio.logs import kv
from kubelet_trio.pluginmanager import PluginValidationError
from kubelet_trio.volume.csi.client import CsiClient
from kubelet_trio.volume.csi.drivers import (
    CsiDriver,
    CsiDrivers,
    UnsupportedVersions,
    highest_supported_version,
)
from kubelet_trio.volume.csi.nodeinfo import NodeInfoManager

__all__ = ["CsiRegistrationHandler"]

logger = logging.getLogger(__name__)


def _log(message: str) -> str:
    return f"kubernetes.io/csi: {message}"  # Go's log() prefix for the CSI plugin


@attrs.define(eq=False)
class CsiRegistrationHandler:
    drivers: CsiDrivers
    bridge: AsyncioThreadSource
    node_info: NodeInfoManager | None  # None: standalone, no API objects to write

    def _validate(self, caller: str, name: str, versions: Sequence[str]) -> tuple[int, int, int]:
        if not versions:
            raise PluginValidationError(
                _log(
                    f'{caller} for CSI driver "{name}" failed.'
                    " Plugin returned an empty list for supported versions"
                )
            )
        try:
            highest = highest_supported_version(versions)
        except UnsupportedVersions as err:
            quoted = "[" + " ".join(f'"{v}"' for v in versions) + "]"
            raise PluginValidationError(
                _log(
                    f'{caller} for CSI driver "{name}" failed. None of the versions specified {quoted} are'
                    f" supported. err={err}"
                )
            ) from None
        existing = self.drivers.get(name)
        if existing is not None and not existing.version < highest:
            raise PluginValidationError(
                _log(
                    f'{caller} for CSI driver "{name}" failed. Another driver with the same name is already'
                    f' registered with a higher supported version: "{".".join(map(str, existing.version))}"'
                )
            )
        return highest

    def validate_plugin(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        logger.info(
            _log("Trying to validate a new CSI Driver"),
            extra=kv(name=name, endpoint=endpoint, versions=",".join(versions)),
        )
        self._validate("ValidatePlugin", name, versions)

    async def register_plugin(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        logger.info(_log("Register new plugin"), extra=kv(name=name, endpoint=endpoint))
        version = self._validate("RegisterPlugin", name, versions)
        self.drivers.set(CsiDriver(name, endpoint, version))
        try:
            info = await CsiClient(self.bridge.get(), endpoint).node_get_info()
            if self.node_info is not None:
                await self.node_info.install_driver(
                    name, info.node_id, info.max_volumes_per_node, info.topology
                )
        except BaseException:
            await self._unregister(name)
            raise

    async def deregister_plugin(self, name: str) -> None:
        logger.info(_log("registrationHandler.DeRegisterPlugin request for plugin"), extra=kv(name=name))
        await self._unregister(name)

    async def _unregister(self, name: str) -> None:
        self.drivers.delete(name)
        if self.node_info is None:
            return
        try:
            await self.node_info.uninstall_driver(name)
        except Exception as err:
            logger.error(_log("Error uninstalling CSI driver"), extra=kv(name=name, err=str(err)))
