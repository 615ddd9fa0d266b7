"""Mounting CSI volumes into pods (Go: ``csi_attacher.go`` ``MountDevice``/``UnmountDevice`` and
``csi_mounter.go`` ``SetUpAt``/``TearDownAt``), with Go's paths so either kubelet finds the other's mounts:

- staging (``NodeStageVolume``, when the driver has ``STAGE_UNSTAGE_VOLUME``), once per volume on the node:
  ``<root>/plugins/kubernetes.io/csi/<driver>/<sha256(volumeHandle)>/globalmount``, its ``vol_data.json``
  beside it;
- publishing (``NodePublishVolume``) per pod: ``<root>/pods/<uid>/volumes/kubernetes.io~csi/<name>/mount``
  (``<name>``: the PV's name, or the pod's volume name for an inline volume),
  its ``vol_data.json`` beside it. That file is what teardown and a restarted kubelet read: the driver and
  volume handle of a mount whose pod is gone.

A volume already published (its target is a mount point with a matching ``vol_data.json``) is not published
again, and a staged one not staged again: after a restart the running pods' volumes are adopted as they are.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from kubelet_trio.aiobridge import AsyncioThreadSource
from kubelet_trio.cri.gen.csi import v1 as csi
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.logs import kv
from kubelet_trio.volume.csi.client import CsiClient, CsiError
from kubelet_trio.volume.csi.drivers import CsiDrivers

__all__ = [
    "CSI_POD_PLUGIN_DIR",
    "CsiVolumePlugin",
    "CsiVolumeSpec",
    "DriverSettings",
    "PodInfo",
    "VolumeNotReady",
    "VolumeUsage",
    "attachment_name",
    "ephemeral_volume_handle",
    "global_mount_path",
]

logger = logging.getLogger(__name__)

CSI_POD_PLUGIN_DIR = "kubernetes.io~csi"
VOL_DATA = "vol_data.json"
PERSISTENT = "Persistent"
EPHEMERAL = "Ephemeral"

_ACCESS_MODES = {
    "ReadWriteOnce": csi.VolumeCapabilityAccessModeMode.SINGLE_NODE_WRITER,
    "ReadWriteOncePod": csi.VolumeCapabilityAccessModeMode.SINGLE_NODE_WRITER,
    "ReadOnlyMany": csi.VolumeCapabilityAccessModeMode.MULTI_NODE_READER_ONLY,
    "ReadWriteMany": csi.VolumeCapabilityAccessModeMode.MULTI_NODE_MULTI_WRITER,
}


@attrs.frozen
class VolumeUsage:
    """A published volume's usage (Go's ``volume.Metrics``); ``None`` where the driver did not say."""

    capacity_bytes: int | None = None
    available_bytes: int | None = None
    used_bytes: int | None = None
    inodes: int | None = None
    inodes_free: int | None = None
    inodes_used: int | None = None


def _statvfs_usage(path: str) -> VolumeUsage:
    st = os.statvfs(path)
    capacity, available = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    return VolumeUsage(
        capacity_bytes=capacity,
        available_bytes=available,
        used_bytes=(st.f_blocks - st.f_bfree) * st.f_frsize,
        inodes=st.f_files,
        inodes_free=st.f_ffree,
        inodes_used=st.f_files - st.f_ffree,
    )


class VolumeNotReady(Exception):
    """The volume cannot be mounted yet (not attached, driver not registered): the sync is retried."""


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def attachment_name(volume_handle: str, driver: str, node: str) -> str:
    """The VolumeAttachment the attach/detach controller creates for this volume on this node."""
    return "csi-" + _sha256(volume_handle + driver + node)


def ephemeral_volume_handle(pod_uid: str, volume_name: str) -> str:
    """The handle an inline (ephemeral) CSI volume is published under."""
    return "csi-" + _sha256(pod_uid + volume_name)


def global_mount_path(root_dir: str, driver: str, volume_handle: str) -> str:
    return os.path.join(
        root_dir, "plugins", "kubernetes.io", "csi", driver, _sha256(volume_handle), "globalmount"
    )


@attrs.frozen
class DriverSettings:
    """A ``CSIDriver`` object's spec, with Go's defaults when there is none."""

    attach_required: bool = True
    pod_info_on_mount: bool = False
    fs_group_policy: str = "ReadWriteOnceWithFSType"
    lifecycle_modes: tuple[str, ...] = (PERSISTENT,)
    requires_republish: bool = False

    @classmethod
    def from_object(cls, obj: Mapping[str, Any] | None) -> DriverSettings:
        if obj is None:
            return cls()
        spec = obj.get("spec") or {}
        return cls(
            attach_required=spec.get("attachRequired", True) is not False,
            pod_info_on_mount=bool(spec.get("podInfoOnMount", False)),
            fs_group_policy=str(spec.get("fsGroupPolicy") or "ReadWriteOnceWithFSType"),
            lifecycle_modes=tuple(spec.get("volumeLifecycleModes") or (PERSISTENT,)),
            requires_republish=bool(spec.get("requiresRepublish", False)),
        )


@attrs.frozen
class CsiVolumeSpec:
    """What to mount: a CSI PersistentVolume's source, or a pod's inline ``csi`` volume."""

    volume_name: str  # the pod's volume name
    # the PV's name, or the pod's volume name for an inline volume: as Go, the directory under
    # kubernetes.io~csi (so either kubelet finds the other's mounts)
    spec_name: str
    driver: str
    volume_handle: str
    lifecycle: str = PERSISTENT
    read_only: bool = False
    fs_type: str = ""
    attributes: Mapping[str, str] = attrs.Factory(dict)
    access_mode: str = "ReadWriteOnce"
    mount_options: tuple[str, ...] = ()
    publish_secrets: Mapping[str, str] = attrs.Factory(dict)
    stage_secrets: Mapping[str, str] = attrs.Factory(dict)

    def capability(self) -> csi.VolumeCapability:
        return csi.VolumeCapability(
            mount=csi.VolumeCapabilityMountVolume(fs_type=self.fs_type, mount_flags=list(self.mount_options)),
            access_mode=csi.VolumeCapabilityAccessMode(
                mode=_ACCESS_MODES.get(
                    self.access_mode, csi.VolumeCapabilityAccessModeMode.SINGLE_NODE_WRITER
                )
            ),
        )


@attrs.frozen
class PodInfo:
    name: str
    namespace: str
    uid: str
    service_account: str


def _save(directory: str, data: Mapping[str, str]) -> None:
    os.makedirs(directory, 0o750, exist_ok=True)
    with open(os.path.join(directory, VOL_DATA), "w", encoding="utf-8") as out:
        json.dump(dict(data), out)


def _load(directory: str) -> dict[str, str] | None:
    try:
        with open(os.path.join(directory, VOL_DATA), encoding="utf-8") as data:
            loaded = json.load(data)
    except (OSError, ValueError):
        return None
    return {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else None


def _remove_dir(path: str) -> None:
    """Remove a mount's directory and the volume directory holding it (Go's ``removeMountDir``)."""
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(path)
    parent = os.path.dirname(path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(parent, VOL_DATA))
    with contextlib.suppress(OSError):
        os.rmdir(parent)


@attrs.define(eq=False, kw_only=True)
class CsiVolumePlugin:
    """Stage, publish, unpublish and unstage CSI volumes of this node's pods."""

    root_dir: str
    node_name: str
    drivers: CsiDrivers
    bridge: AsyncioThreadSource
    is_mount_point: Callable[[str], bool]
    run_sync: RunSync = run_in_thread

    def _client(self, driver: str) -> CsiClient:
        registered = self.drivers.get(driver)
        if registered is None:
            raise VolumeNotReady(f"driver name {driver} not found in the list of registered CSI drivers")
        return CsiClient(self.bridge.get(), registered.endpoint)

    def target_path(self, pod_uid: str, spec_name: str) -> str:
        return os.path.join(self.root_dir, "pods", pod_uid, "volumes", CSI_POD_PLUGIN_DIR, spec_name, "mount")

    async def set_up(
        self,
        pod: PodInfo,
        spec: CsiVolumeSpec,
        settings: DriverSettings,
        publish_context: Mapping[str, str] | None = None,
    ) -> str:
        """Stage (if the driver stages) and publish ``spec`` for ``pod``; returns the target path."""
        client = self._client(spec.driver)
        target = self.target_path(pod.uid, spec.spec_name)
        data = {**self._vol_data(spec), "volumeLifecycleMode": spec.lifecycle}
        if await self.run_sync(self._published, target, data):
            return target  # adopted: a restarted kubelet finds it mounted
        staging = ""
        if spec.lifecycle == PERSISTENT:
            capabilities = await client.node_capabilities()
            if csi.NodeServiceCapabilityRpcType.STAGE_UNSTAGE_VOLUME in capabilities:
                staging = global_mount_path(self.root_dir, spec.driver, spec.volume_handle)
                await self._stage(client, spec, staging, publish_context or {})
        attributes = dict(spec.attributes)
        if settings.pod_info_on_mount:
            attributes.update(
                {
                    "csi.storage.k8s.io/pod.name": pod.name,
                    "csi.storage.k8s.io/pod.namespace": pod.namespace,
                    "csi.storage.k8s.io/pod.uid": pod.uid,
                    "csi.storage.k8s.io/serviceAccount.name": pod.service_account,
                    "csi.storage.k8s.io/ephemeral": str(spec.lifecycle == EPHEMERAL).lower(),
                }
            )
        await self.run_sync(_save, os.path.dirname(target), data)
        await self.run_sync(os.makedirs, os.path.dirname(target), 0o750, True)
        try:
            await client.node_publish_volume(
                csi.NodePublishVolumeRequest(
                    volume_id=spec.volume_handle,
                    publish_context=dict(publish_context or {}),
                    staging_target_path=staging,
                    target_path=target,
                    volume_capability=spec.capability(),
                    readonly=spec.read_only,
                    secrets=dict(spec.publish_secrets),
                    volume_context=attributes,
                )
            )
        except CsiError:
            if not await self.run_sync(self.is_mount_point, target):
                await self.run_sync(_remove_dir, target)
            raise
        logger.info(
            "kubernetes.io/csi: mounter.SetUp successfully requested NodePublish",
            extra=kv(target=target, driver=spec.driver, volume=spec.volume_handle),
        )
        return target

    def _vol_data(self, spec: CsiVolumeSpec) -> dict[str, str]:
        """Go's ``vol_data.json`` of a staged volume (a published one adds its lifecycle mode)."""
        return {
            "specVolID": spec.spec_name,
            "volumeHandle": spec.volume_handle,
            "driverName": spec.driver,
            "nodeName": self.node_name,
            "attachmentID": attachment_name(spec.volume_handle, spec.driver, self.node_name),
        }

    def _published(self, target: str, data: Mapping[str, str]) -> bool:
        found = _load(os.path.dirname(target))
        return (
            found is not None
            and found.get("volumeHandle") == data["volumeHandle"]
            and found.get("driverName") == data["driverName"]
            and self.is_mount_point(target)
        )

    async def _stage(
        self, client: CsiClient, spec: CsiVolumeSpec, staging: str, publish_context: Mapping[str, str]
    ) -> None:
        data = self._vol_data(spec)
        if await self.run_sync(self._published, staging, data):
            return
        await self.run_sync(os.makedirs, staging, 0o750, True)
        await self.run_sync(_save, os.path.dirname(staging), data)
        await client.node_stage_volume(
            csi.NodeStageVolumeRequest(
                volume_id=spec.volume_handle,
                publish_context=dict(publish_context),
                staging_target_path=staging,
                volume_capability=spec.capability(),
                secrets=dict(spec.stage_secrets),
                volume_context=dict(spec.attributes),
            )
        )
        logger.info(
            "kubernetes.io/csi: attacher.MountDevice successfully requested NodeStageVolume",
            extra=kv(path=staging, driver=spec.driver, volume=spec.volume_handle),
        )

    async def tear_down(self, volume_dir: str) -> None:
        """Unpublish the volume whose directory (``.../kubernetes.io~csi/<volume>``) holds a
        ``vol_data.json``, then unstage it if no other pod on the node still has it published."""
        data = await self.run_sync(_load, volume_dir)
        target = os.path.join(volume_dir, "mount")
        if data is None:  # nothing was published here (a publish that failed before writing it)
            await self.run_sync(_remove_dir, target)
            return
        driver, handle = data.get("driverName", ""), data.get("volumeHandle", "")
        if await self.run_sync(self.is_mount_point, target) or await self.run_sync(os.path.isdir, target):
            await self._client(driver).node_unpublish_volume(handle, target)
        await self.run_sync(_remove_dir, target)
        logger.info(
            "kubernetes.io/csi: Unmounter.TearDownAt successfully unmounted dir", extra=kv(dir=target)
        )
        staging = global_mount_path(self.root_dir, driver, handle)
        if not await self.run_sync(os.path.isdir, staging):
            return
        if await self.run_sync(self._still_published, driver, handle):
            return
        await self._client(driver).node_unstage_volume(handle, staging)
        await self.run_sync(_remove_dir, staging)
        with contextlib.suppress(OSError):
            await self.run_sync(os.rmdir, os.path.dirname(os.path.dirname(staging)))  # the driver's dir
        logger.info(
            "kubernetes.io/csi: attacher.UnmountDevice successfully requested NodeUnStageVolume",
            extra=kv(path=staging, driver=driver, volume=handle),
        )

    async def usage(self, volume_dir: str) -> VolumeUsage | None:
        """The usage of the volume published under ``volume_dir``: the driver's ``NodeGetVolumeStats``
        when it has ``GET_VOLUME_STATS``, else the target's filesystem (Go's ``MetricsStatFS`` fallback);
        ``None`` when nothing is published there."""
        data = await self.run_sync(_load, volume_dir)
        target = os.path.join(volume_dir, "mount")
        if data is None or not await self.run_sync(os.path.isdir, target):
            return None
        client = self._client(data.get("driverName", ""))
        if csi.NodeServiceCapabilityRpcType.GET_VOLUME_STATS not in await client.node_capabilities():
            measured: VolumeUsage = await self.run_sync(_statvfs_usage, target)
            return measured
        response = await client.node_get_volume_stats(data.get("volumeHandle", ""), target)
        found: dict[str, int] = {}
        for entry in response.usage:
            prefix = "inodes" if entry.unit == csi.VolumeUsageUnit.INODES else "bytes"
            found.update({f"{prefix}.total": entry.total, f"{prefix}.available": entry.available})
            found[f"{prefix}.used"] = entry.used
        return VolumeUsage(
            capacity_bytes=found.get("bytes.total"),
            available_bytes=found.get("bytes.available"),
            used_bytes=found.get("bytes.used"),
            inodes=found.get("inodes.total"),
            inodes_free=found.get("inodes.available"),
            inodes_used=found.get("inodes.used"),
        )

    def _still_published(self, driver: str, handle: str) -> bool:
        pods = os.path.join(self.root_dir, "pods")
        with contextlib.suppress(FileNotFoundError):
            for uid in os.listdir(pods):
                volumes = os.path.join(pods, uid, "volumes", CSI_POD_PLUGIN_DIR)
                with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                    for name in os.listdir(volumes):
                        data = _load(os.path.join(volumes, name))
                        if data and data.get("driverName") == driver and data.get("volumeHandle") == handle:
                            return True
        return False
