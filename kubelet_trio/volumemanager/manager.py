"""The volume manager: set up a pod's local volumes before its containers start, tear them down after
they stopped (Go: ``pkg/kubelet/volumemanager``, ``WaitForAttachAndMount`` / ``WaitForUnmount``, and
``kubelet_volumes.go`` ``cleanupOrphanedPodDirs``).

Go runs a reconciler loop against a desired/actual state of the world; here the pod worker calls
:meth:`VolumeManager.mount_pod` at the start of every sync (idempotent: emptyDir and hostPath are set up
once, downwardAPI/configMap/secret/projected files are re-projected so label and object changes reach
running containers, and service account tokens are refreshed) and :meth:`VolumeManager.unmount_pod` once
the pod is terminated. Only volumes that some container mounts are set up, like Go. A failure affects
only that pod: it is reported as a ``FailedMount`` event per volume and the sync is retried.

Secret, downwardAPI and projected volumes are written to a tmpfs (Go wraps them in a memory-backed
emptyDir) so secrets and tokens never reach a disk; configMap volumes are on disk, as in Go. Mounting
needs root: ``memory_backed`` None means "when running as root", so a kubelet embedded in an unprivileged
test harness writes them to disk instead (logged once).

Modes are Go's (see :mod:`~kubelet_trio.volumemanager.datadirs`): the directories above a volume are 0750,
so no other local user reaches its files; a volume root is 0777 (a tmpfs root keeps its 1777) and its
files have the modes the pod asked for, which is all a container sees through its bind mount.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Protocol

import attrs
import trio

from kubelet_trio.api import EmptyDirVolumeSource, Pod, ProjectedVolumeSource, Volume
from kubelet_trio.cm.allocatable import NodeAllocatable
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.logs import kobj, kv
from kubelet_trio.objects import NO_OBJECTS, ObjectStore
from kubelet_trio.token import STANDALONE_ERROR, TokenError, TokenRequest
from kubelet_trio.volumemanager.atomic_writer import AtomicWriter, FileProjection
from kubelet_trio.volumemanager.emptydir import (
    memory_volume_size,
    mount_tmpfs_once,
    set_up_empty_dir,
    setup_dir,
)
from kubelet_trio.volumemanager.errors import MountError, VolumeError
from kubelet_trio.volumemanager.hostpath import check_host_path
from kubelet_trio.volumemanager.mounter import Mounter, SystemMounter
from kubelet_trio.volumemanager.ownership import set_dir_ownership, set_volume_ownership
from kubelet_trio.volumemanager.paths import (
    CONFIG_MAP_PLUGIN,
    DOWNWARD_API_PLUGIN,
    EMPTY_DIR_PLUGIN,
    PROJECTED_PLUGIN,
    SECRET_PLUGIN,
    pod_dir,
    pod_volume_dir,
    pods_dir,
)
from kubelet_trio.volumemanager.projection import (
    config_map_volume_payload,
    downward_api_payload,
    projected_payload,
    secret_volume_payload,
    token_requests,
)

if TYPE_CHECKING:
    from kubelet_trio.volume.persistent import ExternalVolumes

__all__ = ["MountedVolume", "VolumeManager", "referenced_volumes"]

logger = logging.getLogger(__name__)

PodEvent = Callable[[Pod, str, str, str], None]


class TokenSource(Protocol):
    """Service account tokens for projected volumes (:class:`kubelet_trio.token.TokenManager`)."""

    async def get_service_account_token(self, request: TokenRequest) -> str: ...

    def delete_service_account_token(self, pod_uid: str) -> None: ...


@attrs.frozen
class MountedVolume:
    """A volume ready to be bind-mounted: ``read_only`` when the plugin requires it (projected files)."""

    name: str
    kind: str
    host_path: str
    read_only: bool = False


#: Go's plugin names, by :attr:`MountedVolume.kind` (the ``volume_plugin`` / ``plugin_name`` labels)
PLUGIN_NAMES = {
    "emptyDir": "kubernetes.io/empty-dir",
    "hostPath": "kubernetes.io/host-path",
    "downwardAPI": "kubernetes.io/downward-api",
    "configMap": "kubernetes.io/configmap",
    "secret": "kubernetes.io/secret",
    "projected": "kubernetes.io/projected",
    "csi": "kubernetes.io/csi",
    "local": "kubernetes.io/local-volume",
}
#: where CSI volumes are published in a pod's volumes directory (Go's ``kubernetes.io~csi``)
CSI_VOLUMES_DIR = "kubernetes.io~csi"
#: ``(plugin, operation, success, seconds)``: one volume operation, for ``storage_operation_*`` metrics
OperationHook = Callable[[str, str, bool, float], None]


def _plugin_name(volume: Volume) -> str:
    kinds = [kind for kind in volume.source_kinds() if kind in PLUGIN_NAMES]
    return PLUGIN_NAMES[kinds[0]] if kinds else "kubernetes.io/" + "-".join(volume.source_kinds())


def referenced_volumes(pod: Pod) -> list[Volume]:
    """The pod's volumes that at least one container mounts, in spec order."""
    spec = pod.spec
    if spec is None:
        return []
    used = {m.name for c in spec.all_containers() for m in c.volume_mounts or ()}
    return [v for v in spec.volumes or () if v.name in used]


def _write_projection(
    path: str, payload: Mapping[str, FileProjection], fs_group: int | None, context: Mapping[str, object]
) -> None:
    """Project into the volume root set up before (a tmpfs, or :func:`setup_dir` on disk); with an
    fsGroup the new files get it before they are published, and the root too (Go walks the volume)."""
    writer = AtomicWriter(path, context)
    writer.write(payload, lambda ts_dir: set_volume_ownership(ts_dir, fs_group, read_only=True))
    set_dir_ownership(path, fs_group, read_only=True)


def _remove_volumes(volumes_dir: str, is_mount_point: Callable[[str], bool]) -> list[str]:
    """Every mounted volume directory under ``volumes_dir`` (to unmount first)."""
    mounted: list[str] = []
    with contextlib.suppress(FileNotFoundError):
        for plugin in os.scandir(volumes_dir):
            if not plugin.is_dir(follow_symlinks=False):
                continue
            for volume in os.scandir(plugin.path):
                if volume.is_dir(follow_symlinks=False) and is_mount_point(volume.path):
                    mounted.append(volume.path)
    return mounted


@attrs.define(eq=False, kw_only=True)
class VolumeManager:
    """Local volumes of every pod of the node under ``<root_dir>/pods/<uid>/volumes``."""

    root_dir: str
    run_sync: RunSync = run_in_thread
    objects: ObjectStore = NO_OBJECTS
    mounter: Mounter = attrs.field(factory=SystemMounter)
    allocatable: NodeAllocatable | None = None
    events: PodEvent | None = None
    tokens: TokenSource | None = None  # None: standalone, token projections fail
    memory_backed: bool | None = None  # secret/downwardAPI/projected on tmpfs; None: when root
    on_operation: OperationHook | None = None
    # persistentVolumeClaim, ephemeral and csi volumes (kubelet_trio.volume); None: not supported here
    external: ExternalVolumes | None = None
    _mounted: dict[str, dict[str, MountedVolume]] = attrs.field(factory=dict, init=False)
    _desired: dict[str, dict[str, str]] = attrs.field(factory=dict, init=False)  # uid → name → plugin

    def volume_counts(self) -> dict[tuple[str, str], int]:
        """(plugin, ``desired_state_of_world`` | ``actual_state_of_world``) → volumes, for
        ``volume_manager_total_volumes``."""
        counts: dict[tuple[str, str], int] = {}
        for volumes in self._desired.values():
            for plugin in volumes.values():
                key = (plugin, "desired_state_of_world")
                counts[key] = counts.get(key, 0) + 1
        for mounted in self._mounted.values():
            for volume in mounted.values():
                key = (PLUGIN_NAMES.get(volume.kind, volume.kind), "actual_state_of_world")
                counts[key] = counts.get(key, 0) + 1
        return counts

    def _observe(self, plugin: str, operation: str, success: bool, started: float) -> None:
        if self.on_operation is not None:
            self.on_operation(plugin, operation, success, trio.current_time() - started)

    def mounted_volumes(self, uid: str) -> Mapping[str, MountedVolume]:
        """``GetMountedVolumesForPod``: name → volume, for building container mounts."""
        return dict(self._mounted.get(uid, {}))

    def pod_dir(self, uid: str) -> str:
        return pod_dir(self.root_dir, uid)

    async def mount_pod(self, pod: Pod) -> Mapping[str, MountedVolume]:
        """Set up every referenced volume; raise :class:`MountError` naming the ones that failed."""
        uid = pod.uid
        mounted = self._mounted.setdefault(uid, {})
        errors: list[VolumeError] = []
        volumes = referenced_volumes(pod)
        self._desired[uid] = {v.name or "": _plugin_name(v) for v in volumes}
        for volume in volumes:
            name = volume.name or ""
            started = trio.current_time()
            current = mounted.get(name)
            try:
                mounted[name] = await self._set_up(pod, volume, current)
                if mounted[name] is not current:  # set up or projected again, not found ready
                    self._observe(_plugin_name(volume), "volume_mount", True, started)
            except (ValueError, OSError) as err:
                self._observe(_plugin_name(volume), "volume_mount", False, started)
                error = VolumeError(name, str(err))
                errors.append(error)
                logger.warning("volume setup failed", extra=kv(pod=kobj(pod), uid=uid, volume=name, err=err))
                if self.events is not None:
                    self.events(pod, "Warning", "FailedMount", str(error))
        if errors:
            raise MountError(errors)
        return dict(mounted)

    async def _set_up(self, pod: Pod, volume: Volume, current: MountedVolume | None) -> MountedVolume:
        name = volume.name or ""
        uid = pod.uid
        pod_sc = pod.spec.security_context if pod.spec else None
        fs_group = pod_sc.fs_group if pod_sc else None
        context = {"pod": kobj(pod), "uid": uid, "volume": name}
        if self.external is not None and self.external.handles(volume):
            if current is not None:
                return current
            return await self._set_up_external(self.external, pod, volume, fs_group)
        if volume.empty_dir is not None:
            if current is not None:
                return current
            path = pod_volume_dir(self.root_dir, uid, EMPTY_DIR_PLUGIN, name)
            await set_up_empty_dir(
                path,
                pod,
                volume.empty_dir,
                mounter=self.mounter,
                run_sync=self.run_sync,
                allocatable=self.allocatable,
                fs_group=fs_group,
            )
            logger.info(
                "volume set up", extra=kv(**context, kind="emptyDir", medium=volume.empty_dir.medium or "")
            )
            return MountedVolume(name, "emptyDir", path)
        if volume.host_path is not None:
            if current is not None:
                return current
            path = await self.run_sync(check_host_path, volume.host_path)
            return MountedVolume(name, "hostPath", path)
        if volume.downward_api is not None:
            source = volume.downward_api
            payload = downward_api_payload(pod, source.items, source.default_mode, self.allocatable)
            plugin, kind = DOWNWARD_API_PLUGIN, "downwardAPI"
        elif volume.config_map is not None:
            payload = config_map_volume_payload(pod, volume.config_map, self.objects)
            plugin, kind = CONFIG_MAP_PLUGIN, "configMap"
        elif volume.secret is not None:
            payload = secret_volume_payload(pod, volume.secret, self.objects)
            plugin, kind = SECRET_PLUGIN, "secret"
        elif volume.projected is not None:
            tokens = await self._tokens(pod, volume.projected)
            payload = projected_payload(
                pod, volume.projected, self.objects, self.allocatable, tokens, fs_group
            )
            plugin, kind = PROJECTED_PLUGIN, "projected"
        else:
            kinds = ", ".join(volume.source_kinds()) or "none"
            raise ValueError(f"volume type {kinds} is not supported by this kubelet")
        path = pod_volume_dir(self.root_dir, uid, plugin, name)
        if kind != "configMap" and self._use_tmpfs():
            size = memory_volume_size(pod, EmptyDirVolumeSource(), self.allocatable)
            await mount_tmpfs_once(
                path, size, mounter=self.mounter, run_sync=self.run_sync, why=f"a {kind} volume"
            )
        else:
            await self.run_sync(setup_dir, path)
        await self.run_sync(_write_projection, path, payload, fs_group, context)
        return MountedVolume(name, kind, path, read_only=True)

    async def _set_up_external(
        self, external: ExternalVolumes, pod: Pod, volume: Volume, fs_group: int | None
    ) -> MountedVolume:
        from kubelet_trio.client import ApiClientError
        from kubelet_trio.volume.csi import CsiError
        from kubelet_trio.volume.csi.plugin import VolumeNotReady

        try:
            mount = await external.set_up(pod, volume)
        except (VolumeNotReady, CsiError, ApiClientError) as err:
            raise ValueError(str(err)) from None  # a FailedMount event; the sync is retried
        if mount.apply_fs_group and fs_group is not None:
            await self.run_sync(set_volume_ownership, mount.host_path, fs_group)
        logger.info(
            "volume set up", extra=kv(pod=kobj(pod), uid=pod.uid, volume=volume.name, kind=mount.kind)
        )
        return MountedVolume(volume.name or "", mount.kind, mount.host_path, read_only=mount.read_only)

    async def _tear_down_external(self, volumes_dir: str) -> list[VolumeError]:
        """Unpublish (and unstage) the pod's CSI volumes; before anything under ``volumes_dir`` is
        removed, since a published volume is a mount of the volume's data."""
        csi_dir = os.path.join(volumes_dir, CSI_VOLUMES_DIR)
        try:
            names = await self.run_sync(os.listdir, csi_dir)
        except (FileNotFoundError, NotADirectoryError):
            return []
        errors: list[VolumeError] = []
        for name in sorted(names):
            if self.external is None:
                errors.append(VolumeError(name, "CSI volume found but this kubelet has no CSI support"))
                continue
            try:
                await self.external.tear_down(os.path.join(csi_dir, name))
            except Exception as err:  # a driver's or the API's failure: retried at the next cleanup
                errors.append(VolumeError(name, str(err), operation="UnmountVolume.TearDown"))
        return errors

    def _use_tmpfs(self) -> bool:
        if self.memory_backed is None:
            self.memory_backed = os.geteuid() == 0
            if not self.memory_backed:
                logger.warning(
                    "not running as root: secret, downwardAPI and projected volumes are written to disk"
                )
        return self.memory_backed

    async def _tokens(self, pod: Pod, source: ProjectedVolumeSource) -> list[str | None]:
        """The projection's service account tokens by source index (cached or refreshed)."""
        requests = token_requests(pod, source)
        tokens: list[str | None] = [None] * len(source.sources or ())
        errors: list[str] = []
        for index, request in requests.items():
            if self.tokens is None:
                errors.append(STANDALONE_ERROR)
                continue
            try:
                tokens[index] = await self.tokens.get_service_account_token(request)
            except TokenError as err:
                errors.append(str(err))
        if errors:
            raise ValueError("; ".join(errors))
        return tokens

    async def unmount_pod(self, uid: str) -> None:
        """Tear down every volume of the pod (unmount tmpfs, remove the directories). hostPath volumes
        are left alone. Raises :class:`MountError` when an unmount fails."""
        volumes_dir = os.path.join(pod_dir(self.root_dir, uid), "volumes")
        errors: list[VolumeError] = []
        started = trio.current_time()
        self._desired.pop(uid, None)
        if self.tokens is not None:
            self.tokens.delete_service_account_token(uid)
        errors.extend(await self._tear_down_external(volumes_dir))
        if errors:
            raise MountError(errors)
        for path in await self.run_sync(_remove_volumes, volumes_dir, self.mounter.is_mount_point):
            try:
                await self.run_sync(self.mounter.unmount, path)
            except OSError as err:
                errors.append(
                    VolumeError(os.path.basename(path), str(err), operation="UnmountVolume.TearDown")
                )
        if errors:
            for volume in self._mounted.get(uid, {}).values():
                self._observe(PLUGIN_NAMES.get(volume.kind, volume.kind), "volume_unmount", False, started)
            raise MountError(errors)
        await self.run_sync(shutil.rmtree, volumes_dir, True)
        for volume in self._mounted.pop(uid, {}).values():  # each volume: the pod's teardown time
            self._observe(PLUGIN_NAMES.get(volume.kind, volume.kind), "volume_unmount", True, started)
        logger.debug("volumes torn down", extra=kv(uid=uid))

    async def cleanup_orphaned_pod_dirs(self, keep: Collection[str]) -> list[str]:
        """Remove the directories of pods that are neither desired nor possibly running (housekeeping)."""
        try:
            uids = await self.run_sync(os.listdir, pods_dir(self.root_dir))
        except FileNotFoundError:
            return []
        removed: list[str] = []
        for uid in uids:
            if uid in keep:
                continue
            try:
                await self.unmount_pod(uid)
                await self.run_sync(shutil.rmtree, pod_dir(self.root_dir, uid), True)
            except (OSError, MountError) as err:
                logger.warning("cannot clean up orphaned pod directory", extra=kv(uid=uid, err=err))
                continue
            removed.append(uid)
            logger.info("removed orphaned pod directory", extra=kv(uid=uid))
        return removed
