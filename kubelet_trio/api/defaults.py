"""API-server defaulting of a Pod (``pkg/apis/core/v1/defaults.go``), the part the kubelet depends on.

Kept apart from decoding: a parsed Pod round-trips unchanged, and :func:`default_pod` returns a new,
defaulted copy - what the kubelet would have received from the API server or its own decoder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import attrs

from kubelet_trio.api.container import (
    Container,
    ContainerPort,
    EnvVar,
    HTTPGetAction,
    Lifecycle,
    LifecycleHandler,
    ObjectFieldSelector,
    Probe,
    ResourceRequirements,
)
from kubelet_trio.api.pod import Pod, PodSecurityContext, PodSpec
from kubelet_trio.api.volume import (
    DownwardAPIProjection,
    DownwardAPIVolumeFile,
    EmptyDirVolumeSource,
    ProjectedVolumeSource,
    Volume,
    VolumeProjection,
)

__all__ = [
    "DEFAULT_FILE_MODE",
    "DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS",
    "DEFAULT_TERMINATION_MESSAGE_PATH",
    "default_container",
    "default_image_pull_policy",
    "default_pod",
    "default_probe",
]

DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS = 30
DEFAULT_TERMINATION_MESSAGE_PATH = "/dev/termination-log"
DEFAULT_FILE_MODE = 0o644
DEFAULT_TOKEN_EXPIRATION_SECONDS = 3600
DEFAULT_SCHEDULER_NAME = "default-scheduler"

T = TypeVar("T")
C = TypeVar("C", bound=Container)


def _map(items: tuple[T, ...] | None, fn: Callable[[T], T]) -> tuple[T, ...] | None:
    return None if items is None else tuple(fn(item) for item in items)


def default_image_pull_policy(image: str | None) -> str:
    """``Always`` for ``:latest`` or an untagged reference, else ``IfNotPresent``; a digest counts as
    tagged. The tag is the part after the last ``:`` that follows the last ``/`` (a registry port is not
    a tag)."""
    ref = image or ""
    if "@" in ref:
        return "IfNotPresent"
    last = ref.rsplit("/", 1)[-1]
    if ":" not in last:
        return "Always"
    return "Always" if last.rsplit(":", 1)[1] == "latest" else "IfNotPresent"


def _default_http_get(action: HTTPGetAction | None) -> HTTPGetAction | None:
    if action is None:
        return None
    return attrs.evolve(action, path=action.path or "/", scheme=action.scheme or "HTTP")


def default_probe(probe: Probe | None) -> Probe | None:
    """timeout 1 s, period 10 s, success 1, failure 3 (zero counts as unset, like Go's zero value)."""
    if probe is None:
        return None
    return attrs.evolve(
        probe,
        timeout_seconds=probe.timeout_seconds or 1,
        period_seconds=probe.period_seconds or 10,
        success_threshold=probe.success_threshold or 1,
        failure_threshold=probe.failure_threshold or 3,
        http_get=_default_http_get(probe.http_get),
    )


def _default_handler(handler: LifecycleHandler | None) -> LifecycleHandler | None:
    if handler is None:
        return None
    return attrs.evolve(handler, http_get=_default_http_get(handler.http_get))


def _default_lifecycle(lifecycle: Lifecycle | None) -> Lifecycle | None:
    if lifecycle is None:
        return None
    return attrs.evolve(
        lifecycle,
        post_start=_default_handler(lifecycle.post_start),
        pre_stop=_default_handler(lifecycle.pre_stop),
    )


def _default_resources(resources: ResourceRequirements | None) -> ResourceRequirements | None:
    """A limit without a request makes the request equal to the limit (``SetDefaults_Pod``)."""
    if resources is None or not resources.limits:
        return resources
    requests = dict(resources.requests or {})
    for name, limit in resources.limits.items():
        requests.setdefault(name, limit)
    return attrs.evolve(resources, requests=requests)


def _default_field_selector(selector: ObjectFieldSelector | None) -> ObjectFieldSelector | None:
    if selector is None:
        return None
    return attrs.evolve(selector, api_version=selector.api_version or "v1")


def default_container(container: C, *, host_network: bool = False) -> C:
    def port(p: ContainerPort) -> ContainerPort:
        host_port = p.host_port
        if host_network and not host_port:
            host_port = p.container_port
        return attrs.evolve(p, protocol=p.protocol or "TCP", host_port=host_port)

    def env_var(var: EnvVar) -> EnvVar:
        source = var.value_from
        if source is None or source.field_ref is None:
            return var
        return attrs.evolve(
            var, value_from=attrs.evolve(source, field_ref=_default_field_selector(source.field_ref))
        )

    return attrs.evolve(
        container,
        image_pull_policy=container.image_pull_policy or default_image_pull_policy(container.image),
        termination_message_path=container.termination_message_path or DEFAULT_TERMINATION_MESSAGE_PATH,
        termination_message_policy=container.termination_message_policy or "File",
        ports=_map(container.ports, port),
        env=_map(container.env, env_var),
        resources=_default_resources(container.resources),
        liveness_probe=default_probe(container.liveness_probe),
        readiness_probe=default_probe(container.readiness_probe),
        startup_probe=default_probe(container.startup_probe),
        lifecycle=_default_lifecycle(container.lifecycle),
    )


def _default_downward_items(
    items: tuple[DownwardAPIVolumeFile, ...] | None,
) -> tuple[DownwardAPIVolumeFile, ...] | None:
    return _map(items, lambda item: attrs.evolve(item, field_ref=_default_field_selector(item.field_ref)))


def _default_projection(projection: VolumeProjection) -> VolumeProjection:
    token = projection.service_account_token
    if token is not None:
        token = attrs.evolve(
            token, expiration_seconds=token.expiration_seconds or DEFAULT_TOKEN_EXPIRATION_SECONDS
        )
    downward = projection.downward_api
    if downward is not None:
        downward = DownwardAPIProjection(extra=downward.extra, items=_default_downward_items(downward.items))
    return attrs.evolve(projection, service_account_token=token, downward_api=downward)


def _default_volume(volume: Volume) -> Volume:
    if not volume.source_kinds():
        return attrs.evolve(volume, empty_dir=EmptyDirVolumeSource())
    changes: dict[str, Any] = {}
    if volume.config_map is not None and volume.config_map.default_mode is None:
        changes["config_map"] = attrs.evolve(volume.config_map, default_mode=DEFAULT_FILE_MODE)
    if volume.secret is not None and volume.secret.default_mode is None:
        changes["secret"] = attrs.evolve(volume.secret, default_mode=DEFAULT_FILE_MODE)
    if volume.downward_api is not None:
        changes["downward_api"] = attrs.evolve(
            volume.downward_api,
            default_mode=DEFAULT_FILE_MODE
            if volume.downward_api.default_mode is None
            else volume.downward_api.default_mode,
            items=_default_downward_items(volume.downward_api.items),
        )
    if volume.projected is not None:
        projected: ProjectedVolumeSource = volume.projected
        changes["projected"] = attrs.evolve(
            projected,
            default_mode=DEFAULT_FILE_MODE if projected.default_mode is None else projected.default_mode,
            sources=_map(projected.sources, _default_projection),
        )
    if volume.host_path is not None and volume.host_path.type is None:
        changes["host_path"] = attrs.evolve(volume.host_path, type="")
    return attrs.evolve(volume, **changes)


def _default_spec(spec: PodSpec) -> PodSpec:
    host_network = bool(spec.host_network)
    tgps = spec.termination_grace_period_seconds
    return attrs.evolve(
        spec,
        containers=_map(spec.containers, lambda c: default_container(c, host_network=host_network)),
        init_containers=_map(spec.init_containers, lambda c: default_container(c, host_network=host_network)),
        ephemeral_containers=_map(spec.ephemeral_containers, default_container),
        volumes=_map(spec.volumes, _default_volume),
        restart_policy=spec.restart_policy or "Always",
        dns_policy=spec.dns_policy or "ClusterFirst",
        termination_grace_period_seconds=DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS if tgps is None else tgps,
        security_context=spec.security_context or PodSecurityContext(),
        scheduler_name=spec.scheduler_name or DEFAULT_SCHEDULER_NAME,
        enable_service_links=True if spec.enable_service_links is None else spec.enable_service_links,
    )


def default_pod(pod: Pod) -> Pod:
    """Return ``pod`` with the API server's defaults applied (the input is not changed)."""
    spec = pod.spec if pod.spec is not None else PodSpec()
    return attrs.evolve(pod, spec=_default_spec(spec))
