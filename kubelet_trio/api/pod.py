"""``core/v1`` Pod, PodSpec and PodList."""

from __future__ import annotations

import functools
from typing import Any

from kubelet_trio.api.container import Container, EphemeralContainer
from kubelet_trio.api.meta import ObjectMeta
from kubelet_trio.api.serialize import Model, field, model
from kubelet_trio.api.status import PodStatus
from kubelet_trio.api.volume import Volume

__all__ = [
    "API_SOURCE",
    "CONFIG_MIRROR_ANNOTATION",
    "CONFIG_SOURCE_ANNOTATION",
    "FAILED",
    "PENDING",
    "RUNNING",
    "SUCCEEDED",
    "TERMINAL_PHASES",
    "HostAlias",
    "LocalObjectReference",
    "Pod",
    "PodDNSConfig",
    "PodDNSConfigOption",
    "PodList",
    "PodReadinessGate",
    "PodSecurityContext",
    "PodSpec",
    "Sysctl",
    "Toleration",
]


@model
class HostAlias(Model):
    ip: str | None = field()
    hostnames: tuple[str, ...] | None = field()


@model
class LocalObjectReference(Model):
    """A reference to an object of the pod's namespace by name (``imagePullSecrets`` items)."""

    name: str | None = field()


@model
class PodDNSConfigOption(Model):
    name: str | None = field()
    value: str | None = field()


@model
class PodDNSConfig(Model):
    nameservers: tuple[str, ...] | None = field()
    searches: tuple[str, ...] | None = field()
    options: tuple[PodDNSConfigOption, ...] | None = field()


@model
class Toleration(Model):
    key: str | None = field()
    operator: str | None = field()
    value: str | None = field()
    effect: str | None = field()
    toleration_seconds: int | None = field()


@model
class PodReadinessGate(Model):
    condition_type: str | None = field()


@model
class Sysctl(Model):
    name: str | None = field()
    value: str | None = field()


@model
class PodSecurityContext(Model):
    run_as_user: int | None = field()
    run_as_group: int | None = field()
    run_as_non_root: bool | None = field()
    fs_group: int | None = field()
    fs_group_change_policy: str | None = field()
    supplemental_groups: tuple[int, ...] | None = field()
    sysctls: tuple[Sysctl, ...] | None = field()
    se_linux_options: Any = field()
    seccomp_profile: Any = field()
    app_armor_profile: Any = field()
    windows_options: Any = field()


@model
class PodSpec(Model):
    containers: tuple[Container, ...] | None = field()
    init_containers: tuple[Container, ...] | None = field()
    ephemeral_containers: tuple[EphemeralContainer, ...] | None = field()
    restart_policy: str | None = field()
    termination_grace_period_seconds: int | None = field()
    active_deadline_seconds: int | None = field()
    volumes: tuple[Volume, ...] | None = field()
    host_network: bool | None = field()
    host_pid: bool | None = field(json="hostPID")
    host_ipc: bool | None = field(json="hostIPC")
    share_process_namespace: bool | None = field()
    hostname: str | None = field()
    subdomain: str | None = field()
    host_aliases: tuple[HostAlias, ...] | None = field()
    dns_policy: str | None = field()
    dns_config: PodDNSConfig | None = field()
    node_name: str | None = field()
    node_selector: dict[str, str] | None = field()
    service_account_name: str | None = field()
    automount_service_account_token: bool | None = field()
    enable_service_links: bool | None = field()
    security_context: PodSecurityContext | None = field()
    scheduler_name: str | None = field()
    priority: int | None = field()
    priority_class_name: str | None = field()
    tolerations: tuple[Toleration, ...] | None = field()
    readiness_gates: tuple[PodReadinessGate, ...] | None = field()
    affinity: Any = field()
    runtime_class_name: str | None = field()
    image_pull_secrets: tuple[LocalObjectReference, ...] | None = field()

    def all_containers(self) -> tuple[Container, ...]:
        """Init, regular and ephemeral containers (Go's ``AllContainers`` visit order)."""
        return (self.init_containers or ()) + (self.containers or ()) + (self.ephemeral_containers or ())


#: Pod phases (``v1.PodPhase``); a pod in a terminal phase never runs again.
PENDING = "Pending"
RUNNING = "Running"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
TERMINAL_PHASES = frozenset({SUCCEEDED, FAILED})

#: Where a pod came from (``file``, ``http`` or ``api``), set by the kubelet's config sources; a pod from
#: any source but the API server is a static pod (Go: ``kubetypes.ConfigSourceAnnotationKey``).
CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"
#: Marks the API server's copy of a static pod (Go: ``kubetypes.ConfigMirrorAnnotationKey``).
CONFIG_MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
API_SOURCE = "api"


@model
class Pod(Model):
    api_version: str | None = field()
    kind: str | None = field()
    metadata: ObjectMeta | None = field()
    spec: PodSpec | None = field()
    status: PodStatus | None = field()

    # The identity properties are cached (a pod is immutable): the config merge, the API source and the
    # status publisher read them for every pod of the node on every change of any one of them.
    @functools.cached_property
    def name(self) -> str:
        return (self.metadata.name if self.metadata else None) or ""

    @functools.cached_property
    def namespace(self) -> str:
        return (self.metadata.namespace if self.metadata else None) or ""

    @functools.cached_property
    def uid(self) -> str:
        return (self.metadata.uid if self.metadata else None) or ""

    @functools.cached_property
    def full_name(self) -> str:
        """``<name>_<namespace>``, the kubelet's key for "the same pod" across UIDs."""
        return f"{self.name}_{self.namespace}"

    @property
    def annotations(self) -> dict[str, str]:
        return dict((self.metadata.annotations if self.metadata else None) or {})

    @functools.cached_property
    def is_static(self) -> bool:
        """A pod from a file or URL, not the API server (Go: ``kubetypes.IsStaticPod``)."""
        annotations = (self.metadata.annotations if self.metadata else None) or {}
        return annotations.get(CONFIG_SOURCE_ANNOTATION, API_SOURCE) != API_SOURCE

    @functools.cached_property
    def is_mirror(self) -> bool:
        """The API server's copy of a static pod (Go: ``kubetypes.IsMirrorPod``)."""
        return CONFIG_MIRROR_ANNOTATION in ((self.metadata.annotations if self.metadata else None) or {})

    @property
    def is_terminal(self) -> bool:
        """Its reported phase is Succeeded or Failed: it will not run again."""
        return bool(self.status and self.status.phase in TERMINAL_PHASES)


@model
class PodList(Model):
    """A ``PodList`` or a generic ``List`` whose items are pods (the HTTP source accepts both)."""

    api_version: str | None = field()
    kind: str | None = field()
    metadata: Any = field()
    items: tuple[Pod, ...] | None = field()
