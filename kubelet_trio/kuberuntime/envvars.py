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
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

import attrs

from kubelet_trio.api import Container, EnvVar, ObjectFieldSelector, Pod, VolumeMount
from kubelet_trio.kuberuntime.resources import NodeAllocatable, container_resource_value

__all__ = [
    "NO_OBJECTS",
    "ConfigMap",
    "EnvError",
    "ObjectStore",
    "ObjectUnavailable",
    "Secret",
    "expand",
    "expand_command_and_args",
    "expand_command_only_static",
    "expand_subpath_expr",
    "extract_field_path",
    "format_map",
    "go_quote",
    "make_environment_variables",
    "mapping_for",
    "pod_field_value",
]

logger = logging.getLogger(__name__)

_OPERATOR = "$"
_OPENER = "("
_CLOSER = ")"


class EnvError(Exception):
    """The container's environment cannot be built (a missing object or key, a bad field path)."""


@attrs.frozen
class ConfigMap:
    namespace: str
    name: str
    data: Mapping[str, str] = attrs.field(factory=dict)
    binary_data: Mapping[str, bytes] = attrs.field(factory=dict)


@attrs.frozen
class Secret:
    namespace: str
    name: str
    data: Mapping[str, bytes] = attrs.field(factory=dict)


class ObjectUnavailable(EnvError, ValueError):
    """The object's existence is unknown (the API server could not be asked): unlike "not found", this
    fails even an ``optional`` reference, as in Go. Volume setup reports it as FailedMount."""


class ObjectStore(Protocol):
    """Where ConfigMaps and Secrets come from (Go: the configMap/secret managers). None = not found;
    :class:`ObjectUnavailable` = unknown."""

    def get_config_map(self, namespace: str, name: str) -> ConfigMap | None: ...

    def get_secret(self, namespace: str, name: str) -> Secret | None: ...


@attrs.frozen
class _NoObjects:
    """A standalone kubelet's store: no API server, so no object exists."""

    def get_config_map(self, namespace: str, name: str) -> ConfigMap | None:
        return None

    def get_secret(self, namespace: str, name: str) -> Secret | None:
        return None


NO_OBJECTS: ObjectStore = _NoObjects()


# --- $(VAR) expansion ---------------------------------------------------------------------------


def mapping_for(*contexts: Mapping[str, str]) -> Callable[[str], str]:
    """Look a name up in each context in turn; an unknown name stays ``$(NAME)``."""

    def mapping(name: str) -> str:
        for context in contexts:
            if name in context:
                return context[name]
        return f"{_OPERATOR}{_OPENER}{name}{_CLOSER}"

    return mapping


def _read_variable(text: str) -> tuple[str, bool, int]:
    """``(read, is_variable, advance)`` for the text right after a ``$``."""
    first = text[0]
    if first == _OPERATOR:
        return _OPERATOR, False, 1  # "$$" is an escaped "$"
    if first == _OPENER:
        closer = text.find(_CLOSER, 1)
        if closer != -1:
            return text[1:closer], True, closer + 1
        return _OPERATOR + _OPENER, False, 1  # incomplete reference: kept as written
    return _OPERATOR + first, False, 1


def expand(text: str, mapping: Callable[[str], str]) -> str:
    """Kubernetes ``$(VAR)`` expansion: ``$(NAME)`` is replaced through ``mapping``, ``$$`` becomes ``$``,
    anything else is left as written."""
    out: list[str] = []
    checkpoint = 0
    cursor = 0
    while cursor < len(text):
        if text[cursor] == _OPERATOR and cursor + 1 < len(text):
            out.append(text[checkpoint:cursor])
            read, is_variable, advance = _read_variable(text[cursor + 1 :])
            out.append(mapping(read) if is_variable else read)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    return "".join(out) + text[checkpoint:]


def expand_command_and_args(
    container: Container, envs: Sequence[tuple[str, str]]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``ExpandContainerCommandAndArgs`` against the container's final environment."""
    mapping = mapping_for(dict(envs))
    command = tuple(expand(c, mapping) for c in container.command or ())
    args = tuple(expand(a, mapping) for a in container.args or ())
    return command, args


def expand_command_only_static(command: Sequence[str], env: Iterable[EnvVar] | None) -> list[str]:
    """``ExpandContainerCommandOnlyStatic`` (exec probes): only ``env[].value`` is known; variables from
    ``valueFrom`` expand to the empty string."""
    mapping = mapping_for({e.name or "": e.value or "" for e in env or ()})
    return [expand(c, mapping) for c in command]


def expand_subpath_expr(mount: VolumeMount, envs: Sequence[tuple[str, str]]) -> str:
    """``ExpandContainerVolumeMounts``: a reference to an unset or empty variable is an error."""
    values = dict(envs)
    missing: set[str] = set()

    def mapping(name: str) -> str:
        value = values.get(name, "")
        if not value:
            missing.add(name)
        return value

    expanded = expand(mount.sub_path_expr or "", mapping)
    if missing:
        raise EnvError(f"missing value for {', '.join(sorted(missing))}")
    return expanded


# --- the downward API's field paths ------------------------------------------------------------


def go_quote(text: str) -> str:
    """Go's ``%q`` (``strconv.Quote``) for a string."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch in "\a\b\f\n\r\t\v":
            out.append(
                {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch, "\\v")
            )
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif not ch.isprintable():
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def format_map(values: Mapping[str, str] | None) -> str:
    """``fieldpath.FormatMap``: ``key="value"`` lines sorted by key, no trailing newline."""
    present = values or {}
    return "\n".join(f"{key}={go_quote(present[key])}" for key in sorted(present))


_SUBSCRIPT = re.compile(r"^(?P<path>.+?)\['(?P<key>.*)'\]$", re.DOTALL)


def _split_subscript(path: str) -> tuple[str, str | None]:
    """``SplitMaybeSubscriptedPath``: ``metadata.labels['k']`` → ``("metadata.labels", "k")``."""
    if not path.endswith("']"):
        return path, None
    head, sep, key = path[:-2].partition("['")
    if not sep or not head:
        return path, None
    return head, key


def extract_field_path(pod: Pod, field_path: str) -> str:
    """``fieldpath.ExtractFieldPathAsString`` for the metadata paths of a pod."""
    meta = pod.metadata
    labels = (meta.labels if meta else None) or {}
    annotations = (meta.annotations if meta else None) or {}
    path, key = _split_subscript(field_path)
    if key is not None:
        if path == "metadata.annotations":
            return annotations.get(key, "")
        if path == "metadata.labels":
            return labels.get(key, "")
        raise EnvError(f"fieldPath {go_quote(field_path)} does not support subscript")
    if field_path == "metadata.annotations":
        return format_map(annotations)
    if field_path == "metadata.labels":
        return format_map(labels)
    if field_path == "metadata.name":
        return pod.name
    if field_path == "metadata.namespace":
        return pod.namespace
    if field_path == "metadata.uid":
        return pod.uid
    raise EnvError(f"unsupported fieldPath: {field_path}")


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
) -> list[tuple[str, str]]:
    """``makeEnvironmentVariables``: ``envFrom`` first, then ``env`` (which overrides it); a ``value``
    is expanded against the variables defined before it. Raises :class:`EnvError`.

    ``envFrom`` keys that are not valid variable names are skipped, as in Go, and one message per
    source naming them is appended to ``warnings`` (the caller records it as an
    ``InvalidEnvironmentVariableNames`` event).

    Service links are not generated (there is no service lister).
    """
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

    mapping = mapping_for(env)
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
    return list(env.items())
