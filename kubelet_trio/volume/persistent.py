"""Volumes from outside the node (Go: the desired-state populator's PVC → PV resolution and the ``csi``,
``local`` and ``hostPath`` PV plugins): ``persistentVolumeClaim``, generic ``ephemeral`` and inline ``csi``
volumes. :class:`ExternalVolumes` is what the volume manager calls for those; everything it needs from the
API (claims, volumes, ``CSIDriver`` settings, ``VolumeAttachment`` status, secrets) is read when a volume is
first set up, with Go's error texts when something is not ready so the pod's ``FailedMount`` events say why.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio
import trio_util

from kubelet_trio import defaults
from kubelet_trio.api import Pod, Volume
from kubelet_trio.client.errors import NotFound
from kubelet_trio.logs import kv
from kubelet_trio.volume.csi.client import CsiError
from kubelet_trio.volume.csi.plugin import (
    CSI_POD_PLUGIN_DIR,
    EPHEMERAL,
    CsiVolumePlugin,
    CsiVolumeSpec,
    DriverSettings,
    PodInfo,
    VolumeNotReady,
    VolumeUsage,
    attachment_name,
    ephemeral_volume_handle,
)

if TYPE_CHECKING:  # a standalone node has no client: the client stack stays unloaded
    from kubelet_trio.client import ApiClient

__all__ = ["EXTERNAL_SOURCES", "ClaimUsage", "ExternalMount", "ExternalVolumes"]

logger = logging.getLogger(__name__)

#: the pod volume sources this module sets up
EXTERNAL_SOURCES = ("persistentVolumeClaim", "ephemeral", "csi")


@attrs.frozen
class ExternalMount:
    """A set-up volume: the host path the container bind-mounts, and whether the volume manager applies
    the pod's fsGroup to it (Go's ``fsGroupPolicy`` rules; local and hostPath PVs: always, as Go's)."""

    kind: str  # "csi", "local", "hostPath"
    host_path: str
    read_only: bool = False
    apply_fs_group: bool = False


def _secret_data(obj: Mapping[str, Any]) -> dict[str, str]:
    return {k: base64.b64decode(v).decode("utf-8", "replace") for k, v in (obj.get("data") or {}).items()}


@attrs.frozen
class ClaimUsage:
    """A claim-backed volume's usage, for ``/stats/summary`` (``pvcRef``) and ``kubelet_volume_stats_*``."""

    volume_name: str
    claim_namespace: str
    claim_name: str
    usage: VolumeUsage


@attrs.define(eq=False, kw_only=True)
class ExternalVolumes:
    api: ApiClient | None  # None (standalone): only what needs no API object, i.e. nothing here
    csi: CsiVolumePlugin
    # (pod uid, pod volume name) -> (namespace, claim, PV name) of the claim-backed CSI volumes set up
    _claims: dict[tuple[str, str], tuple[str, str, str]] = attrs.field(factory=dict, init=False)
    _measured: dict[tuple[str, str], ClaimUsage] = attrs.field(factory=dict, init=False)  # the last figures

    @staticmethod
    def handles(volume: Volume) -> bool:
        return any(volume.extra.get(kind) is not None for kind in EXTERNAL_SOURCES)

    def _api(self) -> ApiClient:
        if self.api is None:
            raise VolumeNotReady("volume needs the API server, but the kubelet runs without one (standalone)")
        return self.api

    async def set_up(self, pod: Pod, volume: Volume) -> ExternalMount:
        name = volume.name or ""
        info = PodInfo(
            pod.name, pod.namespace, pod.uid, (pod.spec.service_account_name if pod.spec else "") or ""
        )
        inline = volume.extra.get("csi")
        if inline is not None:
            settings = await self._driver_settings(inline.get("driver", ""))
            if EPHEMERAL not in settings.lifecycle_modes:
                raise VolumeNotReady(
                    f'volume mode "{EPHEMERAL}" not supported by driver {inline.get("driver", "")}'
                    f" (only supports {list(settings.lifecycle_modes)})"
                )
            secret_ref = inline.get("nodePublishSecretRef") or {}
            spec = CsiVolumeSpec(
                volume_name=name,
                spec_name=name,
                driver=str(inline.get("driver", "")),
                volume_handle=ephemeral_volume_handle(pod.uid, name),
                lifecycle=EPHEMERAL,
                read_only=bool(inline.get("readOnly", False)),
                fs_type=str(inline.get("fsType") or ""),
                attributes=dict(inline.get("volumeAttributes") or {}),
                publish_secrets=await self._secret(pod.namespace, secret_ref.get("name")),
            )
            path = await self.csi.set_up(info, spec, settings)
            return ExternalMount("csi", path, spec.read_only, _fs_group_ok(settings, spec, inline=True))
        claim, read_only = self._claim(pod, volume)
        pv = await self._bound_volume(pod, claim, volume.extra.get("ephemeral") is not None)
        pv_spec = pv.get("spec") or {}
        if pv_spec.get("local") is not None:
            return ExternalMount(
                "local", str(pv_spec["local"].get("path", "")), read_only, apply_fs_group=True
            )
        if pv_spec.get("hostPath") is not None:
            return ExternalMount(
                "hostPath", str(pv_spec["hostPath"].get("path", "")), read_only, apply_fs_group=True
            )
        source = pv_spec.get("csi")
        if source is None:
            kinds = [k for k in pv_spec if k not in _PV_SPEC_FIELDS]
            raise VolumeNotReady(
                f"persistent volume {pv['metadata']['name']} of type {kinds} is not supported"
            )
        driver = str(source.get("driver", ""))
        settings = await self._driver_settings(driver)
        stage_ref = source.get("nodeStageSecretRef") or {}
        publish_ref = source.get("nodePublishSecretRef") or {}
        spec = CsiVolumeSpec(
            volume_name=name,
            spec_name=pv["metadata"]["name"],
            driver=driver,
            volume_handle=str(source.get("volumeHandle", "")),
            read_only=read_only or bool(source.get("readOnly", False)),
            fs_type=str(source.get("fsType") or ""),
            attributes=dict(source.get("volumeAttributes") or {}),
            access_mode=(pv_spec.get("accessModes") or ["ReadWriteOnce"])[0],
            mount_options=tuple(pv_spec.get("mountOptions") or ()),
            publish_secrets=await self._secret(publish_ref.get("namespace"), publish_ref.get("name")),
            stage_secrets=await self._secret(stage_ref.get("namespace"), stage_ref.get("name")),
        )
        publish_context = await self._attached(spec) if settings.attach_required else {}
        path = await self.csi.set_up(info, spec, settings, publish_context)
        self._claims[(pod.uid, name)] = (pod.namespace, claim, spec.spec_name)
        return ExternalMount(
            "csi", path, spec.read_only, _fs_group_ok(settings, spec, inline=False, pv=pv_spec)
        )

    async def tear_down(self, volume_dir: str) -> None:
        """Tear down what :meth:`set_up` left under ``volumes/<plugin>/<volume>`` (CSI volumes only: local
        and hostPath PVs are the container's bind mounts of host paths, nothing to undo)."""
        if os.path.basename(os.path.dirname(volume_dir)) == CSI_POD_PLUGIN_DIR:
            await self.csi.tear_down(volume_dir)
            uid = os.path.basename(os.path.dirname(os.path.dirname(os.path.dirname(volume_dir))))
            gone = [
                k for k, v in self._claims.items() if k[0] == uid and v[2] == os.path.basename(volume_dir)
            ]
            for key in gone:
                del self._claims[key]

    async def claim_usage(self, pod_uid: str) -> list[ClaimUsage]:
        """Usage of the pod's claim-backed CSI volumes (a driver that fails to answer is logged and
        left out, as Go leaves out a volume whose metrics fail)."""
        found: list[ClaimUsage] = []
        for (uid, volume), (namespace, claim, pv) in sorted(self._claims.items()):
            if uid != pod_uid:
                continue
            volume_dir = os.path.dirname(self.csi.target_path(uid, pv))
            try:
                usage = await self.csi.usage(volume_dir)
            except (CsiError, VolumeNotReady, OSError) as err:
                logger.info("volume stats unavailable", extra=kv(uid=uid, volume=volume, err=str(err)))
                continue
            if usage is not None:
                found.append(ClaimUsage(volume, namespace, claim, usage))
        for key in [k for k in self._measured if k[0] == pod_uid]:
            del self._measured[key]
        self._measured.update({(pod_uid, c.volume_name): c for c in found})
        return found

    def measured(self) -> list[ClaimUsage]:
        """The figures of the last measurement of each volume still set up (``kubelet_volume_stats_*``)."""
        return [c for key, c in sorted(self._measured.items()) if key in self._claims]

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Measure every claim-backed volume each ``VOLUME_STATS_AGG_PERIOD`` (Go's volume stat
        calculators), so the metrics have figures without a summary being asked for."""
        task_status.started()
        async with contextlib.aclosing(trio_util.periodic(defaults.VOLUME_STATS_AGG_PERIOD)) as ticks:
            async for _ in ticks:
                for uid in sorted({uid for uid, _ in self._claims}):
                    await self.claim_usage(uid)

    def _claim(self, pod: Pod, volume: Volume) -> tuple[str, bool]:
        source = volume.extra.get("persistentVolumeClaim")
        if source is not None:
            return str(source.get("claimName", "")), bool(source.get("readOnly", False))
        return f"{pod.name}-{volume.name}", False  # a generic ephemeral volume's claim

    async def _bound_volume(self, pod: Pod, claim: str, ephemeral: bool) -> dict[str, Any]:
        api = self._api()
        namespace = pod.namespace
        try:
            pvc = await api.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim}")
        except NotFound:
            raise VolumeNotReady(
                f"error processing PVC {namespace}/{claim}: failed to fetch PVC from API server:"
                f' persistentvolumeclaims "{claim}" not found'
            ) from None
        metadata = pvc.get("metadata") or {}
        if ephemeral and not any(
            o.get("uid") == pod.uid and o.get("controller") for o in metadata.get("ownerReferences") or ()
        ):
            raise VolumeNotReady(
                f"PVC {namespace}/{claim} was not created for pod {namespace}/{pod.name} (pod is not owner)"
            )
        if metadata.get("deletionTimestamp"):
            raise VolumeNotReady(f"can't start pod because PVC {namespace}/{claim} is being deleted")
        phase = (pvc.get("status") or {}).get("phase", "")
        volume_name = (pvc.get("spec") or {}).get("volumeName", "")
        if phase != "Bound" or not volume_name:
            raise VolumeNotReady(
                f'PVC {namespace}/{claim} has non-bound phase ("{phase}")'
                f' or empty pvc.Spec.VolumeName ("{volume_name}")'
            )
        try:
            pv: dict[str, Any] = await api.get(f"/api/v1/persistentvolumes/{volume_name}")
        except NotFound:
            raise VolumeNotReady(
                f'error processing PVC {namespace}/{claim}: failed to fetch PV "{volume_name}"'
                f' from API server: persistentvolumes "{volume_name}" not found'
            ) from None
        bound = ((pv.get("spec") or {}).get("claimRef") or {}).get("uid")
        if bound != metadata.get("uid"):
            raise VolumeNotReady(
                f'error processing PVC {namespace}/{claim}: PV "{volume_name}" is not bound to this claim'
            )
        return pv

    async def _driver_settings(self, driver: str) -> DriverSettings:
        if self.api is None:
            return DriverSettings()
        try:
            return DriverSettings.from_object(
                await self.api.get(f"/apis/storage.k8s.io/v1/csidrivers/{driver}")
            )
        except NotFound:
            return DriverSettings()

    async def _secret(self, namespace: str | None, name: str | None) -> dict[str, str]:
        if not name:
            return {}
        try:
            return _secret_data(await self._api().get(f"/api/v1/namespaces/{namespace}/secrets/{name}"))
        except NotFound:
            raise VolumeNotReady(
                f'fetching secret {namespace}/{name} failed: secrets "{name}" not found'
            ) from None

    async def _attached(self, spec: CsiVolumeSpec) -> dict[str, str]:
        """The attachment's publish context once the attach/detach controller reports it attached."""
        name = attachment_name(spec.volume_handle, spec.driver, self.csi.node_name)
        try:
            attachment = await self._api().get(f"/apis/storage.k8s.io/v1/volumeattachments/{name}")
        except NotFound:
            raise VolumeNotReady(
                f"volume {spec.volume_handle} has not been attached yet: volumeattachment {name} not found"
            ) from None
        status = attachment.get("status") or {}
        if not status.get("attached"):
            error = (status.get("attachError") or {}).get("message")
            why = (
                f"attachment for {spec.volume_handle} failed: {error}"
                if error
                else f"volume {spec.volume_handle} has not been attached yet"
            )
            raise VolumeNotReady(why)
        logger.debug("volume attached", extra=kv(volume=spec.volume_handle, attachment=name))
        return dict(status.get("attachmentMetadata") or {})


_PV_SPEC_FIELDS = {
    "accessModes", "capacity", "claimRef", "mountOptions", "nodeAffinity", "persistentVolumeReclaimPolicy",
    "storageClassName", "volumeMode",
}  # fmt: skip


def _fs_group_ok(
    settings: DriverSettings, spec: CsiVolumeSpec, *, inline: bool, pv: Mapping[str, Any] | None = None
) -> bool:
    """Go's ``supportsFSGroup``: never for ``None`` or read-only, always for ``File``; else (the default
    ``ReadWriteOnceWithFSType``) only with an fsType, and for a PV only with ReadWriteOnce among its modes."""
    if settings.fs_group_policy == "None" or spec.read_only:
        return False
    if settings.fs_group_policy == "File":
        return True
    if not spec.fs_type:
        return False
    if inline:
        return True
    return "ReadWriteOnce" in ((pv or {}).get("accessModes") or ())
