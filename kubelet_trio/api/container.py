"""``core/v1`` Container and the types it is built from (probes, env, ports, resources, mounts)."""

from __future__ import annotations

from typing import Any

from kubelet_trio.api.quantity import Quantity
from kubelet_trio.api.serialize import Model, field, model

__all__ = [
    "Capabilities",
    "ConfigMapEnvSource",
    "ConfigMapKeySelector",
    "Container",
    "ContainerPort",
    "EnvFromSource",
    "EnvVar",
    "EnvVarSource",
    "EphemeralContainer",
    "ExecAction",
    "GRPCAction",
    "HTTPGetAction",
    "HTTPHeader",
    "Lifecycle",
    "LifecycleHandler",
    "ObjectFieldSelector",
    "Probe",
    "ResourceFieldSelector",
    "ResourceRequirements",
    "SecretEnvSource",
    "SecretKeySelector",
    "SecurityContext",
    "SleepAction",
    "TCPSocketAction",
    "VolumeMount",
]

IntOrString = int | str


@model
class ExecAction(Model):
    command: tuple[str, ...] | None = field()


@model
class HTTPHeader(Model):
    name: str | None = field()
    value: str | None = field()


@model
class HTTPGetAction(Model):
    path: str | None = field()
    port: int | str | None = field()
    host: str | None = field()
    scheme: str | None = field()
    http_headers: tuple[HTTPHeader, ...] | None = field()


@model
class TCPSocketAction(Model):
    port: int | str | None = field()
    host: str | None = field()


@model
class GRPCAction(Model):
    port: int | None = field()
    service: str | None = field()


@model
class SleepAction(Model):
    seconds: int | None = field()


@model
class Probe(Model):
    exec: ExecAction | None = field()
    http_get: HTTPGetAction | None = field()
    tcp_socket: TCPSocketAction | None = field()
    grpc: GRPCAction | None = field()
    initial_delay_seconds: int | None = field()
    timeout_seconds: int | None = field()
    period_seconds: int | None = field()
    success_threshold: int | None = field()
    failure_threshold: int | None = field()
    termination_grace_period_seconds: int | None = field()


@model
class LifecycleHandler(Model):
    exec: ExecAction | None = field()
    http_get: HTTPGetAction | None = field()
    tcp_socket: TCPSocketAction | None = field()
    sleep: SleepAction | None = field()


@model
class Lifecycle(Model):
    post_start: LifecycleHandler | None = field()
    pre_stop: LifecycleHandler | None = field()
    stop_signal: str | None = field()


@model
class ContainerPort(Model):
    name: str | None = field()
    container_port: int | None = field()
    host_port: int | None = field()
    host_ip: str | None = field(json="hostIP")
    protocol: str | None = field()


@model
class ObjectFieldSelector(Model):
    api_version: str | None = field()
    field_path: str | None = field()


@model
class ResourceFieldSelector(Model):
    container_name: str | None = field()
    resource: str | None = field()
    divisor: Quantity | None = field()


@model
class ConfigMapKeySelector(Model):
    name: str | None = field()
    key: str | None = field()
    optional: bool | None = field()


@model
class SecretKeySelector(Model):
    name: str | None = field()
    key: str | None = field()
    optional: bool | None = field()


@model
class EnvVarSource(Model):
    field_ref: ObjectFieldSelector | None = field()
    resource_field_ref: ResourceFieldSelector | None = field()
    config_map_key_ref: ConfigMapKeySelector | None = field()
    secret_key_ref: SecretKeySelector | None = field()


@model
class EnvVar(Model):
    name: str | None = field()
    value: str | None = field()
    value_from: EnvVarSource | None = field()


@model
class ConfigMapEnvSource(Model):
    name: str | None = field()
    optional: bool | None = field()


@model
class SecretEnvSource(Model):
    name: str | None = field()
    optional: bool | None = field()


@model
class EnvFromSource(Model):
    prefix: str | None = field()
    config_map_ref: ConfigMapEnvSource | None = field()
    secret_ref: SecretEnvSource | None = field()


@model
class ResourceRequirements(Model):
    limits: dict[str, Quantity] | None = field()
    requests: dict[str, Quantity] | None = field()
    claims: Any = field()


@model
class VolumeMount(Model):
    name: str | None = field()
    mount_path: str | None = field()
    sub_path: str | None = field()
    sub_path_expr: str | None = field()
    read_only: bool | None = field()
    recursive_read_only: str | None = field()
    mount_propagation: str | None = field()


@model
class Capabilities(Model):
    add: tuple[str, ...] | None = field()
    drop: tuple[str, ...] | None = field()


@model
class SecurityContext(Model):
    """Container security context; rarely used members stay in ``extra`` / opaque."""

    privileged: bool | None = field()
    run_as_user: int | None = field()
    run_as_group: int | None = field()
    run_as_non_root: bool | None = field()
    read_only_root_filesystem: bool | None = field()
    allow_privilege_escalation: bool | None = field()
    capabilities: Capabilities | None = field()
    proc_mount: str | None = field()
    se_linux_options: Any = field()
    seccomp_profile: Any = field()
    app_armor_profile: Any = field()
    windows_options: Any = field()


@model
class Container(Model):
    name: str | None = field()
    image: str | None = field()
    image_pull_policy: str | None = field()
    command: tuple[str, ...] | None = field()
    args: tuple[str, ...] | None = field()
    working_dir: str | None = field()
    ports: tuple[ContainerPort, ...] | None = field()
    env: tuple[EnvVar, ...] | None = field()
    env_from: tuple[EnvFromSource, ...] | None = field()
    resources: ResourceRequirements | None = field()
    volume_mounts: tuple[VolumeMount, ...] | None = field()
    liveness_probe: Probe | None = field()
    readiness_probe: Probe | None = field()
    startup_probe: Probe | None = field()
    lifecycle: Lifecycle | None = field()
    termination_message_path: str | None = field()
    termination_message_policy: str | None = field()
    security_context: SecurityContext | None = field()
    restart_policy: str | None = field()
    stdin: bool | None = field()
    stdin_once: bool | None = field()
    tty: bool | None = field()

    @property
    def is_sidecar(self) -> bool:
        """True for an init container with ``restartPolicy: Always`` (a restartable sidecar)."""
        return self.restart_policy == "Always"


@model
class EphemeralContainer(Container):
    """A container added to a running pod through the ``ephemeralcontainers`` subresource (debugging):
    never restarted, and without ports, probes, lifecycle hooks or resources. ``targetContainerName``
    names the container whose process namespace it joins (when the runtime supports it)."""

    target_container_name: str | None = field()
