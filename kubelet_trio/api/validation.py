"""Pod validation as the API server does it (``pkg/apis/core/validation``), for what the kubelet relies on.

Run it on a *defaulted* pod (:func:`kubelet_trio.api.defaults.default_pod`). Every finding is a
:class:`FieldError` with the field path and a message worded like the API server's
(``Required value``, ``Invalid value: ...``, ``Unsupported value: ...``, ``Duplicate value: ...``).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any

from kubelet_trio.api.container import (
    Container,
    EnvVar,
    HTTPGetAction,
    Lifecycle,
    LifecycleHandler,
    ObjectFieldSelector,
    Probe,
    ResourceFieldSelector,
    SecurityContext,
    TCPSocketAction,
)
from kubelet_trio.api.errors import FieldError, FieldPath, MapKey
from kubelet_trio.api.meta import ObjectMeta
from kubelet_trio.api.names import (
    is_dns1123_label,
    is_dns1123_subdomain,
    is_iana_svc_name,
    is_label_value,
    is_qualified_name,
)
from kubelet_trio.api.pod import Pod, PodSpec
from kubelet_trio.api.quantity import Quantity
from kubelet_trio.api.volume import DownwardAPIVolumeFile, KeyToPath, Volume

__all__ = ["validate_pod"]

RESTART_POLICIES = ("Always", "OnFailure", "Never")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
PROTOCOLS = ("TCP", "UDP", "SCTP")
TERMINATION_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")
HOST_PATH_TYPES = (
    "",
    "DirectoryOrCreate",
    "Directory",
    "FileOrCreate",
    "File",
    "Socket",
    "CharDevice",
    "BlockDevice",
)
MOUNT_PROPAGATIONS = ("None", "HostToContainer", "Bidirectional")
SECCOMP_TYPES = ("Localhost", "RuntimeDefault", "Unconfined")
PROC_MOUNT_TYPES = ("Default", "Unmasked")  # 1.36: Unmasked only in a user namespace (hostUsers: false)
FS_GROUP_CHANGE_POLICIES = ("OnRootMismatch", "Always")
OS_NAMES = ("linux", "windows")
URI_SCHEMES = ("HTTP", "HTTPS")
TOLERATION_OPERATORS = ("Exists", "Equal")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
ENV_FIELD_PATHS = (
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
)
VOLUME_FIELD_PATHS = (
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
)
RESOURCE_FIELD_RESOURCES = (
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
)
MAX_INT32 = 2**31 - 1
MIN_TOKEN_EXPIRATION = 600
MAX_TOKEN_EXPIRATION = 2**32
MAX_ANNOTATIONS_BYTES = 256 * 1024
_BYTE_DIVISOR_NAMES = ("1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei")
_BYTE_DIVISORS = frozenset(Quantity(d).value for d in _BYTE_DIVISOR_NAMES)
_SUBSCRIPTED = re.compile(r"^metadata\.(labels|annotations)\['(.*)'\]$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_SYSCTL = re.compile(r"([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?")
_HTTP_HEADER_NAME = re.compile(r"[-A-Za-z0-9]+")


def _show(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str | int | bool) else str(value)


class _Errors:
    """Accumulates :class:`FieldError`s, with the API server's message shapes."""

    def __init__(self) -> None:
        self.items: list[FieldError] = []

    def required(self, path: FieldPath, detail: str = "") -> None:
        self.items.append(FieldError(path, "Required value" + (f": {detail}" if detail else "")))

    def invalid(self, path: FieldPath, value: Any, detail: str) -> None:
        self.items.append(FieldError(path, f"Invalid value: {_show(value)}: {detail}"))

    def unsupported(self, path: FieldPath, value: Any, supported: Iterable[str]) -> None:
        choices = ", ".join(json.dumps(s) for s in supported)
        self.items.append(FieldError(path, f"Unsupported value: {_show(value)}: supported values: {choices}"))

    def duplicate(self, path: FieldPath, value: Any) -> None:
        self.items.append(FieldError(path, f"Duplicate value: {_show(value)}"))

    def not_found(self, path: FieldPath, value: Any) -> None:
        self.items.append(FieldError(path, f"Not found: {_show(value)}"))

    def forbidden(self, path: FieldPath, detail: str) -> None:
        self.items.append(FieldError(path, f"Forbidden: {detail}"))

    def name(self, path: FieldPath, value: str | None, check: Callable[[str], list[str]]) -> bool:
        """Required + syntax; True when the name is present and valid."""
        if not value:
            self.required(path)
            return False
        problems = check(value)
        for problem in problems:
            self.invalid(path, value, problem)
        return not problems

    def non_negative(self, path: FieldPath, value: int | None) -> None:
        if value is not None and value < 0:
            self.invalid(path, value, "must be greater than or equal to 0")

    def in_range(self, path: FieldPath, value: int | None, low: int, high: int) -> None:
        if value is not None and not low <= value <= high:
            self.invalid(path, value, f"must be between {low} and {high}, inclusive")

    def one_of(self, path: FieldPath, value: str | None, supported: tuple[str, ...]) -> None:
        if value is None or value == "":
            if "" not in supported:
                self.required(path)
        elif value not in supported:
            self.unsupported(path, value, supported)


def validate_pod(pod: Pod) -> list[FieldError]:
    """Validate a defaulted pod; an empty list means the API server would accept it."""
    errs = _Errors()
    if pod.metadata is None:
        errs.required(("metadata",))
    else:
        _validate_meta(errs, pod.metadata)
    if pod.spec is None:
        errs.required(("spec",))
    else:
        _validate_spec(errs, pod.spec, ("spec",))
    return errs.items


def _validate_meta(errs: _Errors, meta: ObjectMeta) -> None:
    path: FieldPath = ("metadata",)
    if not meta.name and not meta.generate_name:
        errs.required((*path, "name"), "name or generateName is required")
    elif meta.name:
        errs.name((*path, "name"), meta.name, is_dns1123_subdomain)
    if meta.namespace:
        errs.name((*path, "namespace"), meta.namespace, is_dns1123_label)
    _validate_labels(errs, meta.labels, (*path, "labels"))
    if meta.annotations:
        total = 0
        for key, value in meta.annotations.items():
            total += len(key) + len(value)
            for problem in is_qualified_name(key.lower()):
                errs.invalid((*path, "annotations"), key, problem)
        if total > MAX_ANNOTATIONS_BYTES:
            errs.items.append(
                FieldError(
                    (*path, "annotations"), f"Too long: must have at most {MAX_ANNOTATIONS_BYTES} bytes"
                )
            )
    errs.non_negative((*path, "deletionGracePeriodSeconds"), meta.deletion_grace_period_seconds)


def _validate_labels(errs: _Errors, labels: Mapping[str, str] | None, path: FieldPath) -> None:
    for key, value in (labels or {}).items():
        for problem in is_qualified_name(key):
            errs.invalid(path, key, problem)
        for problem in is_label_value(value):
            errs.invalid((*path, MapKey(key)), value, problem)


def _validate_spec(errs: _Errors, spec: PodSpec, path: FieldPath) -> None:
    volumes = _validate_volumes(errs, spec.volumes or (), (*path, "volumes"))
    if not spec.containers:
        errs.required((*path, "containers"))
    seen: dict[str, FieldPath] = {}
    host_users = spec.extra.get("hostUsers") is not False  # a user namespace only when set to false
    for kind, containers in (("initContainers", spec.init_containers), ("containers", spec.containers)):
        for i, container in enumerate(containers or ()):
            cpath = (*path, kind, i)
            if container.name and container.name in seen:
                errs.duplicate((*cpath, "name"), container.name)
            elif container.name:
                seen[container.name] = cpath
            _validate_container(
                errs, container, cpath, volumes, init=kind == "initContainers", host_users=host_users
            )
    _validate_host_ports(errs, spec, path)
    errs.one_of((*path, "restartPolicy"), spec.restart_policy, RESTART_POLICIES)
    errs.one_of((*path, "dnsPolicy"), spec.dns_policy, DNS_POLICIES)
    _validate_dns_config(errs, spec, path)
    errs.non_negative((*path, "terminationGracePeriodSeconds"), spec.termination_grace_period_seconds)
    errs.in_range((*path, "activeDeadlineSeconds"), spec.active_deadline_seconds, 1, MAX_INT32)
    if spec.hostname:
        errs.name((*path, "hostname"), spec.hostname, is_dns1123_label)
    if spec.subdomain:
        errs.name((*path, "subdomain"), spec.subdomain, is_dns1123_label)
    if spec.node_name:
        errs.name((*path, "nodeName"), spec.node_name, is_dns1123_subdomain)
    if spec.service_account_name:
        errs.name((*path, "serviceAccountName"), spec.service_account_name, is_dns1123_subdomain)
    _validate_labels(errs, spec.node_selector, (*path, "nodeSelector"))
    for i, alias in enumerate(spec.host_aliases or ()):
        apath = (*path, "hostAliases", i)
        _validate_ip(errs, alias.ip, (*apath, "ip"))
        for j, hostname in enumerate(alias.hostnames or ()):
            errs.name((*apath, "hostnames", j), hostname, is_dns1123_subdomain)
    for i, toleration in enumerate(spec.tolerations or ()):
        tpath = (*path, "tolerations", i)
        if toleration.key:
            for problem in is_qualified_name(toleration.key):
                errs.invalid((*tpath, "key"), toleration.key, problem)
        operator = toleration.operator or "Equal"
        if operator not in TOLERATION_OPERATORS:
            errs.unsupported((*tpath, "operator"), operator, TOLERATION_OPERATORS)
        if not toleration.key and operator != "Exists":
            errs.invalid((*tpath, "operator"), operator, "operator must be Exists when `key` is empty")
        if operator == "Exists" and toleration.value:
            errs.invalid(
                (*tpath, "operator"), toleration.value, "value must be empty when `operator` is 'Exists'"
            )
        if toleration.effect and toleration.effect not in TAINT_EFFECTS:
            errs.unsupported((*tpath, "effect"), toleration.effect, TAINT_EFFECTS)
        if toleration.toleration_seconds is not None and toleration.effect != "NoExecute":
            errs.invalid(
                (*tpath, "effect"),
                toleration.effect or "",
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            )
    for i, gate in enumerate(spec.readiness_gates or ()):
        gpath = (*path, "readinessGates", i, "conditionType")
        if not gate.condition_type:
            errs.required(gpath)
        else:
            for problem in is_qualified_name(gate.condition_type):
                errs.invalid(gpath, gate.condition_type, problem)
    if spec.security_context is not None:
        sc_path = (*path, "securityContext")
        errs.in_range((*sc_path, "runAsUser"), spec.security_context.run_as_user, 0, MAX_INT32)
        errs.in_range((*sc_path, "runAsGroup"), spec.security_context.run_as_group, 0, MAX_INT32)
        errs.in_range((*sc_path, "fsGroup"), spec.security_context.fs_group, 0, MAX_INT32)
        for i, group in enumerate(spec.security_context.supplemental_groups or ()):
            errs.in_range((*sc_path, "supplementalGroups", i), group, 0, MAX_INT32)
        policy = spec.security_context.fs_group_change_policy
        if policy is not None and policy not in FS_GROUP_CHANGE_POLICIES:
            errs.unsupported((*sc_path, "fsGroupChangePolicy"), policy, FS_GROUP_CHANGE_POLICIES)
        _validate_seccomp(errs, spec.security_context.seccomp_profile, (*sc_path, "seccompProfile"))
        seen_sysctls: set[str] = set()
        for i, sysctl in enumerate(spec.security_context.sysctls or ()):
            npath = (*sc_path, "sysctls", i, "name")
            if not sysctl.name:
                errs.required(npath)
            elif len(sysctl.name) > 253 or not _SYSCTL.fullmatch(sysctl.name):
                errs.invalid(
                    npath, sysctl.name, f"must have at most 253 characters and match regex {_SYSCTL.pattern}"
                )
            elif sysctl.name in seen_sysctls:
                errs.duplicate(npath, sysctl.name)
            else:
                seen_sysctls.add(sysctl.name)
    pod_os = spec.extra.get("os")  # not modelled: the kubelet runs Linux pods only
    os_name = pod_os.get("name") if isinstance(pod_os, Mapping) else None
    if isinstance(pod_os, Mapping) and os_name not in OS_NAMES:
        if os_name:
            errs.unsupported((*path, "os", "name"), os_name, OS_NAMES)
        else:
            errs.required((*path, "os", "name"))


def _validate_ip(errs: _Errors, ip: str | None, path: FieldPath) -> None:
    if not ip:
        errs.required(path)
        return
    try:
        ipaddress.ip_address(ip)
    except ValueError:
        errs.invalid(path, ip, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")


def _validate_dns_config(errs: _Errors, spec: PodSpec, path: FieldPath) -> None:
    config = spec.dns_config
    if spec.dns_policy == "None" and config is None:
        errs.required((*path, "dnsConfig"), "must provide `dnsConfig` when `dnsPolicy` is None")
        return
    if config is None:
        return
    cpath = (*path, "dnsConfig")
    nameservers = config.nameservers or ()
    if spec.dns_policy == "None" and not nameservers:
        errs.required(
            (*cpath, "nameservers"), "must provide at least one DNS nameserver when `dnsPolicy` is None"
        )
    if len(nameservers) > 3:
        errs.invalid((*cpath, "nameservers"), ",".join(nameservers), "must not have more than 3 nameservers")
    for i, server in enumerate(nameservers):
        _validate_ip(errs, server, (*cpath, "nameservers", i))
    searches = config.searches or ()
    if len(searches) > 32:
        errs.invalid((*cpath, "searches"), " ".join(searches), "must not have more than 32 search paths")
    for i, search in enumerate(searches):
        if search != ".":
            errs.name((*cpath, "searches", i), search.removesuffix("."), is_dns1123_subdomain)
    for i, option in enumerate(config.options or ()):
        if not option.name:
            errs.required((*cpath, "options", i, "name"))


def _validate_host_ports(errs: _Errors, spec: PodSpec, path: FieldPath) -> None:
    seen: set[str] = set()
    for kind, containers in (("initContainers", spec.init_containers), ("containers", spec.containers)):
        for i, container in enumerate(containers or ()):
            for j, port in enumerate(container.ports or ()):
                ppath = (*path, kind, i, "ports", j)
                if spec.host_network and port.host_port and port.host_port != port.container_port:
                    errs.invalid(
                        (*ppath, "hostPort"),
                        port.host_port,
                        "must match `containerPort` when `hostNetwork` is true",
                    )
                if not port.host_port:
                    continue
                key = f"{port.host_ip or ''}/{port.host_port}/{port.protocol or 'TCP'}"
                if key in seen:
                    errs.duplicate((*ppath, "hostPort"), key)
                seen.add(key)


def _validate_container(
    errs: _Errors,
    c: Container,
    path: FieldPath,
    volumes: Mapping[str, Volume],
    *,
    init: bool,
    host_users: bool = True,
) -> None:
    errs.name((*path, "name"), c.name, is_dns1123_label)
    if not c.image:
        errs.required((*path, "image"))
    elif c.image != c.image.strip():
        errs.invalid((*path, "image"), c.image, "must not have leading or trailing whitespace")
    errs.one_of((*path, "imagePullPolicy"), c.image_pull_policy, PULL_POLICIES)
    errs.one_of(
        (*path, "terminationMessagePolicy"), c.termination_message_policy, TERMINATION_MESSAGE_POLICIES
    )
    if init:
        if c.restart_policy is not None and c.restart_policy != "Always":
            errs.unsupported((*path, "restartPolicy"), c.restart_policy, ("Always",))
        if not c.is_sidecar:
            for attr, name in (
                ("lifecycle", "lifecycle"),
                ("liveness_probe", "livenessProbe"),
                ("readiness_probe", "readinessProbe"),
                ("startup_probe", "startupProbe"),
            ):
                if getattr(c, attr) is not None:
                    errs.forbidden(
                        (*path, name), "may not be set for init containers without restartPolicy=Always"
                    )
    elif c.restart_policy is not None:
        errs.forbidden((*path, "restartPolicy"), "may not be set for non-init containers")
    _validate_ports(errs, c, (*path, "ports"))
    for i, var in enumerate(c.env or ()):
        _validate_env_var(errs, var, (*path, "env", i))
    for i, source in enumerate(c.env_from or ()):
        spath = (*path, "envFrom", i)
        if source.prefix:
            _validate_env_name(errs, source.prefix, (*spath, "prefix"))
        refs = [r for r in (source.config_map_ref, source.secret_ref) if r is not None]
        if len(refs) != 1:
            errs.invalid(spath, "", "must specify one of: `configMapRef` or `secretRef`")
        if source.config_map_ref is not None:
            errs.name((*spath, "configMapRef", "name"), source.config_map_ref.name, is_dns1123_subdomain)
        if source.secret_ref is not None:
            errs.name((*spath, "secretRef", "name"), source.secret_ref.name, is_dns1123_subdomain)
    _validate_resources(errs, c, (*path, "resources"))
    mount_paths: set[str] = set()
    for i, mount in enumerate(c.volume_mounts or ()):
        mpath = (*path, "volumeMounts", i)
        if not mount.name:
            errs.required((*mpath, "name"))
        elif mount.name not in volumes:
            errs.not_found((*mpath, "name"), mount.name)
        if not mount.mount_path:
            errs.required((*mpath, "mountPath"))
        elif mount.mount_path in mount_paths:
            errs.invalid((*mpath, "mountPath"), mount.mount_path, "must be unique")
        else:
            mount_paths.add(mount.mount_path)
        if mount.sub_path:
            _validate_relative_path(errs, mount.sub_path, (*mpath, "subPath"))
        if mount.sub_path and mount.sub_path_expr:
            errs.invalid(
                (*mpath, "subPathExpr"), mount.sub_path_expr, "subPathExpr and subPath are mutually exclusive"
            )
        if mount.mount_propagation is not None:
            errs.one_of((*mpath, "mountPropagation"), mount.mount_propagation, MOUNT_PROPAGATIONS)
    for attr, name in (
        ("liveness_probe", "livenessProbe"),
        ("readiness_probe", "readinessProbe"),
        ("startup_probe", "startupProbe"),
    ):
        probe = getattr(c, attr)
        if probe is not None:
            readiness = name == "readinessProbe"
            _validate_probe(errs, probe, (*path, name), single_success=not readiness, readiness=readiness)
    if c.lifecycle is not None:
        _validate_lifecycle(errs, c.lifecycle, (*path, "lifecycle"))
    if c.security_context is not None:
        _validate_container_security(errs, c.security_context, (*path, "securityContext"), host_users)
    for i, mount in enumerate(c.volume_mounts or ()):
        privileged = c.security_context is not None and c.security_context.privileged
        if mount.mount_propagation == "Bidirectional" and not privileged:
            errs.forbidden(
                (*path, "volumeMounts", i, "mountPropagation"),
                "Bidirectional mount propagation is available only to privileged containers",
            )


def _validate_container_security(
    errs: _Errors, sc: SecurityContext, path: FieldPath, host_users: bool = True
) -> None:
    errs.in_range((*path, "runAsUser"), sc.run_as_user, 0, MAX_INT32)
    if sc.proc_mount is not None:
        if sc.proc_mount not in PROC_MOUNT_TYPES:
            errs.unsupported((*path, "procMount"), sc.proc_mount, PROC_MOUNT_TYPES)
        elif sc.proc_mount == "Unmasked" and host_users:
            errs.invalid((*path, "procMount"), sc.proc_mount, "`hostUsers` must be false to use `Unmasked`")
    errs.in_range((*path, "runAsGroup"), sc.run_as_group, 0, MAX_INT32)
    _validate_seccomp(errs, sc.seccomp_profile, (*path, "seccompProfile"))
    if sc.allow_privilege_escalation is False:
        if sc.privileged:
            errs.invalid(path, "", "cannot set `allowPrivilegeEscalation` to false and `privileged` to true")
        if sc.capabilities is not None and "CAP_SYS_ADMIN" in (sc.capabilities.add or ()):
            errs.invalid(
                path,
                "",
                "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN",
            )


def _validate_seccomp(errs: _Errors, profile: Any, path: FieldPath) -> None:
    """``seccompProfile`` (kept opaque by the model; its members' types are checked when decoding)."""
    if not isinstance(profile, Mapping):
        return
    kind, localhost = profile.get("type"), profile.get("localhostProfile")
    if not kind:
        errs.required((*path, "type"))
    elif kind not in SECCOMP_TYPES:
        errs.unsupported((*path, "type"), kind, SECCOMP_TYPES)
    elif kind == "Localhost" and not localhost:
        errs.required((*path, "localhostProfile"), "must be set when seccomp type is Localhost")
    if kind != "Localhost" and localhost is not None:
        errs.invalid((*path, "localhostProfile"), localhost, "can only be set when seccomp type is Localhost")
    if isinstance(localhost, str) and localhost:
        _validate_relative_path(errs, localhost, (*path, "localhostProfile"))


def _validate_ports(errs: _Errors, c: Container, path: FieldPath) -> None:
    names: set[str] = set()
    for i, port in enumerate(c.ports or ()):
        ppath = (*path, i)
        if port.name:
            for problem in is_iana_svc_name(port.name):
                errs.invalid((*ppath, "name"), port.name, problem)
            if port.name in names:
                errs.duplicate((*ppath, "name"), port.name)
            names.add(port.name)
        if not port.container_port:
            errs.required((*ppath, "containerPort"))
        else:
            errs.in_range((*ppath, "containerPort"), port.container_port, 1, 65535)
        if port.host_port:
            errs.in_range((*ppath, "hostPort"), port.host_port, 1, 65535)
        errs.one_of((*ppath, "protocol"), port.protocol, PROTOCOLS)


def _validate_env_name(errs: _Errors, name: str, path: FieldPath) -> None:
    """The relaxed rule of Kubernetes 1.30+ (RelaxedEnvironmentVariableValidation, on from 1.32)."""
    if "=" in name or not name.isprintable() or not name.isascii():
        errs.invalid(
            path,
            name,
            "a valid environment variable name must consist only of printable ASCII characters "
            "other than '='",
        )


def _validate_env_var(errs: _Errors, var: EnvVar, path: FieldPath) -> None:
    if not var.name:
        errs.required((*path, "name"))
    else:
        _validate_env_name(errs, var.name, (*path, "name"))
    source = var.value_from
    if source is None:
        return
    spath = (*path, "valueFrom")
    kinds = [
        k
        for k in (
            source.field_ref,
            source.resource_field_ref,
            source.config_map_key_ref,
            source.secret_key_ref,
        )
        if k is not None
    ]
    if source.extra.get("fileKeyRef") is not None:  # newer than the model; any other extra is unknown
        kinds.append(source.extra["fileKeyRef"])
    if len(kinds) != 1:
        errs.invalid(
            spath,
            "",
            "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"
            if not kinds
            else "may not have more than one field specified at a time",
        )
    if var.value:
        errs.invalid(spath, "", "may not be specified when `value` is not empty")
    if source.field_ref is not None:
        _validate_field_selector(errs, source.field_ref, (*spath, "fieldRef"), ENV_FIELD_PATHS)
    if source.resource_field_ref is not None:
        _validate_resource_selector(
            errs, source.resource_field_ref, (*spath, "resourceFieldRef"), volume=False
        )
    for attr, name in (("config_map_key_ref", "configMapKeyRef"), ("secret_key_ref", "secretKeyRef")):
        ref = getattr(source, attr)
        if ref is None:
            continue
        rpath = (*spath, name)
        errs.name((*rpath, "name"), ref.name, is_dns1123_subdomain)
        if not ref.key:
            errs.required((*rpath, "key"))
        elif len(ref.key) > 253 or not _CONFIG_KEY.fullmatch(ref.key):
            errs.invalid(
                (*rpath, "key"),
                ref.key,
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
            )
        elif ref.key in (".", ".."):
            errs.invalid((*rpath, "key"), ref.key, f"must not be '{ref.key}'")
        elif ref.key.startswith(".."):
            errs.invalid((*rpath, "key"), ref.key, "must not start with '..'")


def _validate_field_selector(
    errs: _Errors, selector: ObjectFieldSelector, path: FieldPath, supported: tuple[str, ...]
) -> None:
    if selector.api_version not in (None, "", "v1"):
        errs.unsupported((*path, "apiVersion"), selector.api_version, ("v1",))
    field_path = selector.field_path
    if not field_path:
        errs.required((*path, "fieldPath"))
        return
    match = _SUBSCRIPTED.fullmatch(field_path)
    if match:
        for problem in is_qualified_name(match.group(2).lower()):
            errs.invalid((*path, "fieldPath"), field_path, problem)
    elif field_path not in supported:
        errs.unsupported((*path, "fieldPath"), field_path, supported)


def _validate_resource_selector(
    errs: _Errors, selector: ResourceFieldSelector, path: FieldPath, *, volume: bool
) -> None:
    if volume and not selector.container_name:
        errs.required((*path, "containerName"))
    if not selector.resource:
        errs.required((*path, "resource"))
    elif selector.resource not in RESOURCE_FIELD_RESOURCES and not selector.resource.startswith(
        ("limits.hugepages-", "requests.hugepages-")
    ):
        errs.unsupported((*path, "resource"), selector.resource, RESOURCE_FIELD_RESOURCES)
    _validate_divisor(errs, selector, (*path, "divisor"))


def _validate_divisor(errs: _Errors, selector: ResourceFieldSelector, path: FieldPath) -> None:
    """Go's ``validateContainerResourceDivisor``: a zero divisor means unset; otherwise only the units the
    downward API can express for that resource (the reported value is the resource's name, as Go does)."""
    divisor, resource = selector.divisor, selector.resource or ""
    if divisor is None or divisor.is_zero():
        return
    name = resource.split(".", 1)[-1]
    if name == "cpu" and divisor.value not in (Decimal("0.001"), 1):
        errs.invalid(path, resource, "only divisor's values 1m and 1 are supported with the cpu resource")
    elif (name in ("memory", "ephemeral-storage") or name.startswith("hugepages-")) and (
        divisor.value not in _BYTE_DIVISORS
    ):
        units = ", ".join(_BYTE_DIVISOR_NAMES)
        errs.invalid(path, resource, f"only divisor's values {units} are supported with the {name} resource")


def _validate_resources(errs: _Errors, c: Container, path: FieldPath) -> None:
    resources = c.resources
    if resources is None:
        return
    for kind, values in (("limits", resources.limits), ("requests", resources.requests)):
        for name, quantity in (values or {}).items():
            qpath = (*path, kind, MapKey(name))
            for problem in is_qualified_name(name):
                errs.invalid((*path, kind), name, problem)
            if quantity.value < 0:
                errs.invalid(qpath, quantity.canonical(), "must be greater than or equal to 0")
            elif _is_extended(name) and quantity.value != quantity.value.to_integral_value():
                errs.invalid(qpath, quantity.canonical(), "must be an integer")
    limits: Mapping[str, Quantity] = resources.limits or {}
    for name, request in (resources.requests or {}).items():
        limit = limits.get(name)
        if limit is None and _is_extended(name):
            errs.required(
                (*path, "limits", MapKey(name)), "Limit must be set for non overcommitable resources"
            )
        elif limit is not None and _is_extended(name) and request != limit:
            errs.invalid(
                (*path, "requests", MapKey(name)),
                request.canonical(),
                f"must be equal to {name} limit of {limit.canonical()}",
            )
        elif limit is not None and request > limit:
            errs.invalid(
                (*path, "requests", MapKey(name)),
                request.canonical(),
                f"must be less than or equal to {name} limit of {limit.canonical()}",
            )


def _is_extended(name: str) -> bool:
    """Go's ``IsExtendedResourceName``: a prefixed name outside ``kubernetes.io/`` (``example.com/gpu``),
    counted in whole units and never overcommitted. Unprefixed names are native (cpu, memory, ...)."""
    native = "/" not in name or "kubernetes.io/" in name
    return not native and not name.startswith("requests.")


def _handlers(handler: Probe | LifecycleHandler) -> list[str]:
    names = ("exec", "httpGet", "tcpSocket", "grpc", "sleep")
    attrs_ = ("exec", "http_get", "tcp_socket", "grpc", "sleep")
    return [n for n, a in zip(names, attrs_, strict=True) if getattr(handler, a, None) is not None]


def _validate_handler(errs: _Errors, handler: Probe | LifecycleHandler, path: FieldPath) -> None:
    kinds = _handlers(handler)
    if not kinds:
        errs.required(path, "must specify a handler type")
    elif len(kinds) > 1:
        errs.forbidden((*path, kinds[1]), "may not specify more than 1 handler type")
    if handler.exec is not None and not handler.exec.command:
        errs.required((*path, "exec", "command"))
    if handler.http_get is not None:
        _validate_http_get(errs, handler.http_get, (*path, "httpGet"))
    if handler.tcp_socket is not None:
        _validate_port_ref(errs, handler.tcp_socket, (*path, "tcpSocket", "port"))
    grpc = getattr(handler, "grpc", None)
    if grpc is not None:
        gpath = (*path, "grpc", "port")
        if grpc.port is None:
            errs.required(gpath)
        else:
            errs.in_range(gpath, grpc.port, 1, 65535)
    sleep = getattr(handler, "sleep", None)
    if sleep is not None:
        errs.non_negative((*path, "sleep", "seconds"), sleep.seconds)


def _validate_port_ref(errs: _Errors, action: HTTPGetAction | TCPSocketAction, path: FieldPath) -> None:
    port = action.port
    if port is None or port == "":
        errs.required(path)
    elif isinstance(port, int):
        errs.in_range(path, port, 1, 65535)
    else:
        for problem in is_iana_svc_name(port):
            errs.invalid(path, port, problem)


def _validate_http_get(errs: _Errors, action: HTTPGetAction, path: FieldPath) -> None:
    _validate_port_ref(errs, action, (*path, "port"))
    if action.scheme is not None:
        errs.one_of((*path, "scheme"), action.scheme, URI_SCHEMES)
    for i, header in enumerate(action.http_headers or ()):
        if not header.name:
            errs.required((*path, "httpHeaders", i, "name"))
        elif not _HTTP_HEADER_NAME.fullmatch(header.name):
            errs.invalid(
                (*path, "httpHeaders", i, "name"),
                header.name,
                "a valid HTTP header must consist of alphanumeric characters or '-' "
                f"(e.g. 'X-Header-Name', regex used for validation is '{_HTTP_HEADER_NAME.pattern}')",
            )


def _validate_probe(
    errs: _Errors, probe: Probe, path: FieldPath, *, single_success: bool, readiness: bool = False
) -> None:
    _validate_handler(errs, probe, path)
    if readiness and probe.termination_grace_period_seconds is not None:
        errs.invalid(
            (*path, "terminationGracePeriodSeconds"),
            probe.termination_grace_period_seconds,
            "must not be set for readinessProbes",
        )
    for attr, name in (
        ("initial_delay_seconds", "initialDelaySeconds"),
        ("timeout_seconds", "timeoutSeconds"),
        ("period_seconds", "periodSeconds"),
        ("success_threshold", "successThreshold"),
        ("failure_threshold", "failureThreshold"),
    ):
        errs.non_negative((*path, name), getattr(probe, attr))
    if single_success and probe.success_threshold not in (None, 1):
        errs.invalid((*path, "successThreshold"), probe.success_threshold, "must be 1")
    tgps = probe.termination_grace_period_seconds
    if tgps is not None and tgps <= 0:
        errs.invalid((*path, "terminationGracePeriodSeconds"), tgps, "must be greater than 0")


def _validate_lifecycle(errs: _Errors, lifecycle: Lifecycle, path: FieldPath) -> None:
    for attr, name in (("post_start", "postStart"), ("pre_stop", "preStop")):
        handler = getattr(lifecycle, attr)
        if handler is not None:
            _validate_handler(errs, handler, (*path, name))


def _validate_relative_path(
    errs: _Errors, value: str, path: FieldPath, *, non_reserved: bool = False
) -> None:
    """Go's ``validateLocalDescendingPath``; ``non_reserved`` adds ``ValidateLocalNonReservedPath``'s rule
    (the atomic writer keeps its ``..data`` links beside the files of configMap/secret/downward volumes)."""
    if value.startswith("/"):
        errs.invalid(path, value, "must be a relative path")
    if ".." in value.split("/"):
        errs.invalid(path, value, "must not contain '..'")
    if non_reserved and value.startswith(".."):
        errs.invalid(path, value, "must not start with '..'")


def _validate_mode(errs: _Errors, mode: int | None, path: FieldPath) -> None:
    if mode is not None and not 0 <= mode <= 0o777:
        errs.invalid(path, mode, "must be a number between 0 and 0777 (octal), both inclusive")


def _validate_items(errs: _Errors, items: Iterable[KeyToPath] | None, path: FieldPath) -> None:
    for i, item in enumerate(items or ()):
        ipath = (*path, i)
        if not item.key:
            errs.required((*ipath, "key"))
        if not item.path:
            errs.required((*ipath, "path"))
        else:
            _validate_relative_path(errs, item.path, (*ipath, "path"), non_reserved=True)
        _validate_mode(errs, item.mode, (*ipath, "mode"))


def _validate_downward_items(
    errs: _Errors, items: Iterable[DownwardAPIVolumeFile] | None, path: FieldPath
) -> None:
    for i, item in enumerate(items or ()):
        ipath = (*path, i)
        if not item.path:
            errs.required((*ipath, "path"))
        else:
            _validate_relative_path(errs, item.path, (*ipath, "path"), non_reserved=True)
        _validate_mode(errs, item.mode, (*ipath, "mode"))
        if (item.field_ref is None) == (item.resource_field_ref is None):
            errs.invalid(ipath, "", "must specify exactly one of: `fieldRef` or `resourceFieldRef`")
        if item.field_ref is not None:
            _validate_field_selector(errs, item.field_ref, (*ipath, "fieldRef"), VOLUME_FIELD_PATHS)
        if item.resource_field_ref is not None:
            _validate_resource_selector(
                errs, item.resource_field_ref, (*ipath, "resourceFieldRef"), volume=True
            )


def _validate_volumes(errs: _Errors, volumes: Iterable[Volume], path: FieldPath) -> dict[str, Volume]:
    by_name: dict[str, Volume] = {}
    for i, volume in enumerate(volumes):
        vpath = (*path, i)
        if errs.name((*vpath, "name"), volume.name, is_dns1123_label) and volume.name is not None:
            if volume.name in by_name:
                errs.duplicate((*vpath, "name"), volume.name)
            else:
                by_name[volume.name] = volume
        elif volume.name:
            by_name.setdefault(volume.name, volume)
        kinds = volume.source_kinds()
        if not kinds:
            errs.required(vpath, "must specify a volume type")
        elif len(kinds) > 1:
            errs.forbidden((*vpath, kinds[1]), "may not specify more than 1 volume type")
        _validate_volume_source(errs, volume, vpath)
    return by_name


def _validate_object_name(errs: _Errors, name: str | None, path: FieldPath) -> None:
    """The name of a configMap or secret a volume reads: required, and not checked as a DNS name by the API
    server - but the kubelet fetches it by a URL path, so (like client-go, which refuses to build such a
    request) it must be a valid path segment."""
    if not name:
        errs.required(path)
    elif name in (".", ".."):
        errs.invalid(path, name, f"may not be '{name}'")
    else:
        for bad in ("/", "%"):
            if bad in name:
                errs.invalid(path, name, f"may not contain '{bad}'")


def _validate_volume_source(errs: _Errors, volume: Volume, path: FieldPath) -> None:
    if volume.empty_dir is not None:
        # The medium is not validated (an unknown one fails at mount time, as in Go).
        size = volume.empty_dir.size_limit
        if size is not None and size.value < 0:
            errs.invalid(
                (*path, "emptyDir", "sizeLimit"), size.canonical(), "must be greater than or equal to 0"
            )
    if volume.host_path is not None:
        hpath = (*path, "hostPath")
        if not volume.host_path.path:
            errs.required((*hpath, "path"))
        if volume.host_path.type is not None and volume.host_path.type not in HOST_PATH_TYPES:
            errs.unsupported((*hpath, "type"), volume.host_path.type, HOST_PATH_TYPES)
    if volume.config_map is not None:
        cpath = (*path, "configMap")
        _validate_object_name(errs, volume.config_map.name, (*cpath, "name"))
        _validate_mode(errs, volume.config_map.default_mode, (*cpath, "defaultMode"))
        _validate_items(errs, volume.config_map.items, (*cpath, "items"))
    if volume.secret is not None:
        spath = (*path, "secret")
        _validate_object_name(errs, volume.secret.secret_name, (*spath, "secretName"))
        _validate_mode(errs, volume.secret.default_mode, (*spath, "defaultMode"))
        _validate_items(errs, volume.secret.items, (*spath, "items"))
    if volume.downward_api is not None:
        dpath = (*path, "downwardAPI")
        _validate_mode(errs, volume.downward_api.default_mode, (*dpath, "defaultMode"))
        _validate_downward_items(errs, volume.downward_api.items, (*dpath, "items"))
    if volume.projected is not None:
        ppath = (*path, "projected")
        _validate_mode(errs, volume.projected.default_mode, (*ppath, "defaultMode"))
        for i, source in enumerate(volume.projected.sources or ()):
            spath = (*ppath, "sources", i)
            kinds = [
                k
                for k, v in (
                    ("secret", source.secret),
                    ("configMap", source.config_map),
                    ("downwardAPI", source.downward_api),
                    ("serviceAccountToken", source.service_account_token),
                    ("clusterTrustBundle", source.cluster_trust_bundle),
                    ("podCertificate", source.pod_certificate),
                )
                if v is not None
            ]
            if len(kinds) > 1:  # an empty projection is allowed
                errs.forbidden(spath, "may not specify more than 1 volume type")
            if source.secret is not None:
                _validate_object_name(errs, source.secret.name, (*spath, "secret", "name"))
                _validate_items(errs, source.secret.items, (*spath, "secret", "items"))
            if source.config_map is not None:
                _validate_object_name(errs, source.config_map.name, (*spath, "configMap", "name"))
                _validate_items(errs, source.config_map.items, (*spath, "configMap", "items"))
            if source.downward_api is not None:
                _validate_downward_items(errs, source.downward_api.items, (*spath, "downwardAPI", "items"))
            token = source.service_account_token
            if token is not None:
                tpath = (*spath, "serviceAccountToken")
                if not token.path:
                    errs.required((*tpath, "path"))
                else:
                    _validate_relative_path(errs, token.path, (*tpath, "path"))
                seconds = token.expiration_seconds
                if seconds is not None and seconds < MIN_TOKEN_EXPIRATION:
                    errs.invalid(
                        (*tpath, "expirationSeconds"),
                        seconds,
                        "may not specify a duration less than 10 minutes",
                    )
                elif seconds is not None and seconds > MAX_TOKEN_EXPIRATION:
                    errs.invalid(
                        (*tpath, "expirationSeconds"),
                        seconds,
                        "may not specify a duration larger than 2^32 seconds",
                    )
