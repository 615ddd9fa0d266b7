"""``core/v1`` Volume and the volume sources the kubelet mounts itself.

emptyDir, hostPath, configMap, secret, downwardAPI and projected are typed; every other source kind
(persistentVolumeClaim, csi, nfs, ...) stays in ``Volume.extra`` untouched, but is still counted when
validating that a volume has exactly one source (:data:`OTHER_VOLUME_SOURCES`).
"""

from __future__ import annotations

from typing import Any

from kubelet_trio.api.container import ObjectFieldSelector, ResourceFieldSelector
from kubelet_trio.api.quantity import Quantity
from kubelet_trio.api.serialize import Model, field, model

__all__ = [
    "OTHER_VOLUME_SOURCES",
    "ConfigMapProjection",
    "ConfigMapVolumeSource",
    "DownwardAPIProjection",
    "DownwardAPIVolumeFile",
    "DownwardAPIVolumeSource",
    "EmptyDirVolumeSource",
    "HostPathVolumeSource",
    "KeyToPath",
    "ProjectedVolumeSource",
    "SecretProjection",
    "SecretVolumeSource",
    "ServiceAccountTokenProjection",
    "Volume",
    "VolumeProjection",
]

#: JSON names of the volume sources kept opaque.
OTHER_VOLUME_SOURCES = (
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "ephemeral",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "gitRepo",
    "glusterfs",
    "image",
    "iscsi",
    "nfs",
    "persistentVolumeClaim",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
)


@model
class KeyToPath(Model):
    key: str | None = field()
    path: str | None = field()
    mode: int | None = field()


@model
class EmptyDirVolumeSource(Model):
    medium: str | None = field()
    size_limit: Quantity | None = field()


@model
class HostPathVolumeSource(Model):
    path: str | None = field()
    type: str | None = field()


@model
class ConfigMapVolumeSource(Model):
    name: str | None = field()
    items: tuple[KeyToPath, ...] | None = field()
    default_mode: int | None = field()
    optional: bool | None = field()


@model
class SecretVolumeSource(Model):
    secret_name: str | None = field()
    items: tuple[KeyToPath, ...] | None = field()
    default_mode: int | None = field()
    optional: bool | None = field()


@model
class DownwardAPIVolumeFile(Model):
    path: str | None = field()
    field_ref: ObjectFieldSelector | None = field()
    resource_field_ref: ResourceFieldSelector | None = field()
    mode: int | None = field()


@model
class DownwardAPIVolumeSource(Model):
    items: tuple[DownwardAPIVolumeFile, ...] | None = field()
    default_mode: int | None = field()


@model
class ConfigMapProjection(Model):
    name: str | None = field()
    items: tuple[KeyToPath, ...] | None = field()
    optional: bool | None = field()


@model
class SecretProjection(Model):
    name: str | None = field()
    items: tuple[KeyToPath, ...] | None = field()
    optional: bool | None = field()


@model
class DownwardAPIProjection(Model):
    items: tuple[DownwardAPIVolumeFile, ...] | None = field()


@model
class ServiceAccountTokenProjection(Model):
    audience: str | None = field()
    expiration_seconds: int | None = field()
    path: str | None = field()


@model
class VolumeProjection(Model):
    secret: SecretProjection | None = field()
    config_map: ConfigMapProjection | None = field()
    downward_api: DownwardAPIProjection | None = field(json="downwardAPI")
    service_account_token: ServiceAccountTokenProjection | None = field()
    cluster_trust_bundle: Any = field()
    pod_certificate: Any = field()


@model
class ProjectedVolumeSource(Model):
    sources: tuple[VolumeProjection, ...] | None = field()
    default_mode: int | None = field()


@model
class Volume(Model):
    name: str | None = field()
    empty_dir: EmptyDirVolumeSource | None = field()
    host_path: HostPathVolumeSource | None = field()
    config_map: ConfigMapVolumeSource | None = field()
    secret: SecretVolumeSource | None = field()
    downward_api: DownwardAPIVolumeSource | None = field(json="downwardAPI")
    projected: ProjectedVolumeSource | None = field()

    def source_kinds(self) -> list[str]:
        """JSON names of the sources set on this volume (typed and opaque); valid volumes have one."""
        typed = {
            "emptyDir": self.empty_dir,
            "hostPath": self.host_path,
            "configMap": self.config_map,
            "secret": self.secret,
            "downwardAPI": self.downward_api,
            "projected": self.projected,
        }
        kinds = [name for name, value in typed.items() if value is not None]
        kinds += [name for name in OTHER_VOLUME_SOURCES if self.extra.get(name) is not None]
        return kinds
