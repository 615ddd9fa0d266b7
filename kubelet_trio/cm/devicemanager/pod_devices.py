"""Which devices each container holds (Go: ``pod_devices.go``), and what the plugins answered for them.

An entry is made at admission, when devices are chosen; the plugin's ``Allocate`` answer is added when the
container is first started (admission here is synchronous, so the call waits for the container). Entries
are what the checkpoint stores and what :func:`run_options` turns into the container's CRI config.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping

import attrs

from kubelet_trio.cri.gen import v1beta1 as dp
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.logs import kv

__all__ = ["DeviceEntry", "DeviceRunOptions", "PodDevices", "run_options"]

logger = logging.getLogger(__name__)


@attrs.define(eq=False)
class DeviceEntry:
    """The devices of one resource held by one container; ``response`` is None until ``Allocate``."""

    device_ids: tuple[str, ...]
    response: dp.ContainerAllocateResponse | None = None


@attrs.define(eq=False)
class PodDevices:
    """pod uid → container name → resource → :class:`DeviceEntry`."""

    _pods: dict[str, dict[str, dict[str, DeviceEntry]]] = attrs.Factory(dict)

    def insert(self, uid: str, container: str, resource: str, entry: DeviceEntry) -> None:
        self._pods.setdefault(uid, {}).setdefault(container, {})[resource] = entry

    def container(self, uid: str, container: str) -> Mapping[str, DeviceEntry]:
        return self._pods.get(uid, {}).get(container, {})

    def get(self, uid: str, container: str, resource: str) -> DeviceEntry | None:
        return self.container(uid, container).get(resource)

    def pods(self) -> set[str]:
        return set(self._pods)

    def remove_pods(self, uids: Iterable[str]) -> None:
        for uid in uids:
            self._pods.pop(uid, None)

    def entries(self) -> Iterator[tuple[str, str, str, DeviceEntry]]:
        for uid, containers in self._pods.items():
            for container, resources in containers.items():
                for resource, entry in resources.items():
                    yield uid, container, resource, entry

    def in_use(self, resource: str) -> set[str]:
        """The devices of ``resource`` some container holds."""
        return {i for _, _, name, entry in self.entries() if name == resource for i in entry.device_ids}

    def resources(self) -> set[str]:
        return {name for _, _, name, _ in self.entries()}


@attrs.frozen
class DeviceRunOptions:
    """What the plugins' answers add to a container's CRI config (Go: ``DeviceRunContainerOptions``)."""

    envs: tuple[tuple[str, str], ...] = ()
    mounts: tuple[pb.Mount, ...] = ()
    devices: tuple[pb.Device, ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    cdi_devices: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.envs or self.mounts or self.devices or self.annotations or self.cdi_devices)


def run_options(responses: Iterable[tuple[str, dp.ContainerAllocateResponse]]) -> DeviceRunOptions:
    """Merge the ``(resource, response)`` answers of one container. As Go, the first value of an env
    var or annotation wins (a conflict is logged), and a mount or device path is used once."""
    envs: dict[str, str] = {}
    annotations: dict[str, str] = {}
    mounts: dict[str, pb.Mount] = {}
    devices: dict[str, pb.Device] = {}
    cdi: dict[str, None] = {}
    for resource, response in responses:
        for target, values, what in (
            (envs, response.envs, "env"),
            (annotations, response.annotations, "annotation"),
        ):
            for key, value in sorted(values.items()):
                if key in target and target[key] != value:
                    logger.error(
                        "Device plugin answer conflicts with an earlier one",
                        extra=kv(resource=resource, kind=what, key=key),
                    )
                    continue
                target[key] = value
        for mount in response.mounts:
            mounts.setdefault(
                mount.container_path,
                pb.Mount(
                    container_path=mount.container_path, host_path=mount.host_path, readonly=mount.read_only
                ),
            )
        for device in response.devices:
            devices.setdefault(
                device.container_path,
                pb.Device(
                    container_path=device.container_path,
                    host_path=device.host_path,
                    permissions=device.permissions,
                ),
            )
        for cdi_device in response.cdi_devices:
            cdi.setdefault(cdi_device.name)
    return DeviceRunOptions(
        envs=tuple(envs.items()),
        mounts=tuple(mounts.values()),
        devices=tuple(devices.values()),
        annotations=tuple(annotations.items()),
        cdi_devices=tuple(cdi),
    )
