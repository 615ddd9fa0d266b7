"""Container environment: ``$(VAR)`` expansion, ``env``/``envFrom`` resolution and the downward API's
field paths (Go: ``third_party/forked/golang/expansion``, ``kubelet_pods.go`` ``makeEnvironmentVariables`` /
``podFieldSelectorRuntimeValue``, ``container/helpers.go`` ``ExpandContainerCommandAndArgs``,
``pkg/fieldpath``).

ConfigMaps and Secrets come from an :class:`ObjectStore`: in API mode the API server's
(:class:`kubelet_trio.apiobjects.ApiObjectStore`, filled at the start of each pod sync). A standalone
kubelet's store knows no objects, so a pod that references one fails to start with
``CreateContainerConfigError`` (unless the reference is ``optional``) — as a Go kubelet without a client
does for static pods.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence

import attrs

from kubelet_trio.api import Container, ObjectFieldSelector, Pod
from kubelet_trio.cm.allocatable import NodeAllocatable
from kubelet_trio.container.expansion import expand, mapping_for
from kubelet_trio.fieldpath import container_resource_value, extract_field_path
from kubelet_trio.objects import NO_OBJECTS, EnvError, ObjectStore

__all__ = [
    "make_environment_variables",
    "pod_field_value",
]

logger = logging.getLogger(__name__)


# --- $(VAR) expansion ---------------------------------------------------------------------------


# --- the downward API's field paths ------------------------------------------------------------


def pod_field_value(
    selector: ObjectFieldSelector,
    pod: Pod,
    pod_ips: Sequence[str],
    host_ips: Sequence[str],
) -> str:
    """``podFieldSelectorRuntimeValue``: spec and status fields, then the metadata paths."""
    path = selector.field_path or ""
    spec = pod.spec
    if path == "spec.nodeName":
        return (spec.node_name if spec else None) or ""
    if path == "spec.serviceAccountName":
        return (spec.service_account_name if spec else None) or ""
    if path == "status.hostIP":
        if not host_ips:
            raise EnvError("cannot get host IP: the node has no address")
        return host_ips[0]
    if path == "status.hostIPs":
        return ",".join(host_ips)
    if path == "status.podIP":
        return pod_ips[0] if pod_ips else ""
    if path == "status.podIPs":
        return ",".join(pod_ips)
    if path == "spec.terminationGracePeriodSeconds":
        grace = spec.termination_grace_period_seconds if spec else None
        return "30" if grace is None else str(grace)
    return extract_field_path(pod, path)


# --- the environment -----------------------------------------------------------------------------


@attrs.define
class _EnvObjects:
    """The ConfigMaps and Secrets one container's environment reads, each looked up once, as string
    data (secret values decoded as UTF-8, invalid bytes replaced)."""

    store: ObjectStore
    namespace: str
    _seen: dict[tuple[str, str], Mapping[str, str]] = attrs.Factory(dict)

    def data(self, kind: str, name: str) -> Mapping[str, str] | None:
        """``kind`` is "configmap" or "secret"; None when the object does not exist."""
        key = (kind, name)
        if key not in self._seen:
            if kind == "configmap":
                config_map = self.store.get_config_map(self.namespace, name)
                if config_map is None:
                    return None
                self._seen[key] = config_map.data
            else:
                secret = self.store.get_secret(self.namespace, name)
                if secret is None:
                    return None
                self._seen[key] = {k: v.decode("utf-8", "replace") for k, v in secret.data.items()}
        return self._seen[key]

    def not_found(self, kind: str, name: str | None) -> EnvError:
        return EnvError(f'{kind} "{name}" not found')  # Go's NotFound text (the pod's namespace)

    def key_missing(self, kind: str, name: str | None, key: str | None) -> EnvError:
        title = "ConfigMap" if kind == "configmap" else "Secret"
        return EnvError(f"couldn't find key {key} in {title} {self.namespace}/{name}")


#: ``IsEnvVarName``: what an ``envFrom`` key (with its prefix) must look like to become a variable.
ENV_VAR_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")

#: The event recorded for skipped ``envFrom`` keys.
INVALID_ENV_NAMES_REASON = "InvalidEnvironmentVariableNames"


def make_environment_variables(
    pod: Pod,
    container: Container,
    *,
    pod_ips: Sequence[str] = (),
    host_ips: Sequence[str] = (),
    objects: ObjectStore = NO_OBJECTS,
    allocatable: NodeAllocatable | None = None,
    warnings: list[str] | None = None,
    service_env: Mapping[str, str] | None = None,
) -> list[tuple[str, str]]:
    """``makeEnvironmentVariables``: ``envFrom`` first, then ``env`` (which overrides it); a ``value``
    is expanded against the variables defined before it. Raises :class:`EnvError`.

    ``envFrom`` keys that are not valid variable names are skipped, as in Go, and one message per
    source naming them is appended to ``warnings`` (the caller records it as an
    ``InvalidEnvironmentVariableNames`` event).

    ``service_env`` (:func:`kubelet_trio.envvars.service_env_map`) is what a ``$(VAR)`` may also name,
    and its variables the container does not define itself come last, as Go's.
    """
    service_env = service_env or {}
    namespace = pod.namespace
    objects_read = _EnvObjects(objects, namespace)
    env: dict[str, str] = {}

    for env_from in container.env_from or ():
        kind, ref = (
            ("configmap", env_from.config_map_ref)
            if env_from.config_map_ref is not None
            else ("secret", env_from.secret_ref)
        )
        if ref is None:
            continue
        data = objects_read.data(kind, ref.name or "")
        if data is None:
            if ref.optional:
                continue
            raise objects_read.not_found(kind, ref.name)
        prefix = env_from.prefix or ""
        invalid: list[str] = []
        for key, value in data.items():
            if ENV_VAR_NAME.fullmatch(prefix + key) is None:
                invalid.append(prefix + key)
                continue
            env[prefix + key] = value
        if invalid and warnings is not None:
            kind_name = "configMap" if kind == "configmap" else "secret"
            warnings.append(
                f"Keys [{', '.join(sorted(invalid))}] from the EnvFrom {kind_name} {namespace}/{ref.name} "
                "were skipped since they are considered invalid environment variable names."
            )

    mapping = mapping_for(env, service_env)
    for var in container.env or ():
        name = var.name or ""
        value = var.value or ""
        source = var.value_from
        if value:
            value = expand(value, mapping)
        elif source is not None:
            if source.field_ref is not None:
                value = pod_field_value(source.field_ref, pod, pod_ips, host_ips)
            elif source.resource_field_ref is not None:
                try:
                    value = container_resource_value(source.resource_field_ref, pod, container, allocatable)
                except ValueError as err:
                    raise EnvError(str(err)) from err
            else:
                kind, key_ref = (
                    ("configmap", source.config_map_key_ref)
                    if source.config_map_key_ref is not None
                    else ("secret", source.secret_key_ref)
                )
                if key_ref is not None:
                    data = objects_read.data(kind, key_ref.name or "")
                    if data is None:
                        if key_ref.optional:
                            continue
                        raise objects_read.not_found(kind, key_ref.name)
                    if (key_ref.key or "") not in data:
                        if key_ref.optional:
                            continue
                        raise objects_read.key_missing(kind, key_ref.name, key_ref.key)
                    value = data[key_ref.key or ""]
        env[name] = value
    return [*env.items(), *((k, v) for k, v in service_env.items() if k not in env)]
