"""Command-line flags and the ``KubeletConfiguration`` file → one validated :class:`KubeletOptions`.

Go: ``cmd/kubelet/app/options`` and ``pkg/kubelet/apis/config/v1beta1``. Flags carry the Go kubelet's
names where the concept exists; the file (``--config``, ``apiVersion: kubelet.config.k8s.io/v1beta1``,
``kind: KubeletConfiguration``) uses the upstream keys. Precedence: built-in defaults < file < flags.

- Durations are Go duration strings (``2m``, ``1m30s``, ``500ms``); flags also take plain seconds.
- Unknown keys in the file are reported as one warning naming them; they do not stop the kubelet.
- An invalid value (file or flag) is an :class:`OptionsError` naming the key or flag and the value; the
  CLI prints it and exits with status 2.
- Relative ``staticPodPath``/``podLogsDir`` in the file are relative to the file's directory (as
  upstream resolves them).

Every setting is declared once, as a :class:`KubeletOptions` field made by :func:`setting` (name, type,
flag, key, parser, default from :mod:`kubelet_trio.defaults`, help); :data:`SETTINGS`, the argument
parser, the file reader and the help text are derived from the fields, and :func:`component_configs` is
the one place the settings are copied into the components' configurations (``KubeletConfig``,
``ApiModeOptions``, ``RunOnceSettings``).
"""

from __future__ import annotations

import argparse
import ipaddress
import math
import os
import re
import socket
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import yaml

from kubelet_trio import defaults
from kubelet_trio.api import Quantity
from kubelet_trio.apimode import ApiModeOptions
from kubelet_trio.config.http import parse_manifest_url_headers
from kubelet_trio.kubelet import KubeletConfig
from kubelet_trio.runonce import RunOnceSettings
from kubelet_trio.sysctl import SysctlAllowlist

__all__ = [
    "CONFIG_API_VERSION",
    "CONFIG_KIND",
    "SETTINGS",
    "ComponentConfigs",
    "KubeletOptions",
    "OptionsError",
    "Setting",
    "build_parser",
    "component_configs",
    "load_options",
    "parse_duration",
]

CONFIG_API_VERSION = "kubelet.config.k8s.io/v1beta1"
CONFIG_KIND = "KubeletConfiguration"
DEFAULT_ENDPOINT = defaults.CONTAINER_RUNTIME_ENDPOINT


class OptionsError(ValueError):
    """An invalid flag, file or value; the message names it. The CLI exits with status 2."""


# -- value parsers: (value, from_file) -> typed value; ValueError("expected ...") on bad input ----------

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Go's ``time.ParseDuration`` (``1h2m3.5s``, ``500ms``, ``0``) → seconds."""
    value = text.strip()
    if value in ("0", "+0", "-0"):
        return 0.0
    sign = -1.0 if value.startswith("-") else 1.0
    body = value.lstrip("+-")
    pos, total = 0, 0.0
    while pos < len(body):
        match = _DURATION_PART.match(body, pos)
        if match is None:
            raise ValueError("expected a duration such as 1m0s, 20s or 500ms")
        total += float(match[1]) * _UNIT_SECONDS[match[2]]
        pos = match.end()
    if not body:
        raise ValueError("expected a duration such as 1m0s, 20s or 500ms")
    return sign * total


def _duration(value: Any, from_file: bool) -> float:
    if isinstance(value, str):
        try:
            seconds = parse_duration(value)
        except ValueError:
            if from_file:
                raise
            try:
                seconds = float(value)  # flags also take plain seconds
            except ValueError:
                raise ValueError("expected a duration such as 1m0s, 20s or 500ms (or seconds)") from None
    else:
        raise ValueError('expected a duration string such as "1m0s"')
    if seconds < 0:
        raise ValueError("must not be negative")
    return seconds


def _positive_duration(value: Any, from_file: bool) -> float:
    seconds = _duration(value, from_file)
    if seconds <= 0:
        raise ValueError("must be greater than zero")
    return seconds


def _int(value: Any, from_file: bool) -> int:
    if isinstance(value, bool):
        raise ValueError("expected an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and not from_file:
        try:
            return int(value)
        except ValueError:
            pass
    raise ValueError("expected an integer")


def _non_negative_int(value: Any, from_file: bool) -> int:
    number = _int(value, from_file)
    if number < 0:
        raise ValueError("must not be negative")
    return number


def _positive_int(value: Any, from_file: bool) -> int:
    number = _int(value, from_file)
    if number < 1:
        raise ValueError("must be greater than zero")
    return number


def _port(value: Any, from_file: bool) -> int:
    number = _int(value, from_file)
    if not 0 <= number <= 65535:
        raise ValueError("expected a port number 0-65535 (0 = disabled)")
    return number


def _log_max_size(value: Any, from_file: bool) -> str:
    """containerLogMaxSize: a quantity string (``10Mi``); negative turns rotation off, as in Go."""
    if not isinstance(value, str):
        raise ValueError('expected a quantity string such as "10Mi"')
    try:
        Quantity(value).int_value()
    except ValueError:
        raise ValueError("expected a quantity such as 10Mi or 500Ki") from None
    return value


def _log_max_files(value: Any, from_file: bool) -> int:
    number = _int(value, from_file)
    if number < 2:
        raise ValueError("must be at least 2 (the current file and one rotated file)")
    return number


def _log_monitor_interval(value: Any, from_file: bool) -> float:
    seconds = _duration(value, from_file)
    if seconds < 3:
        raise ValueError("must be at least 3s")
    return seconds


def _verbosity(value: Any, from_file: bool) -> int:
    number = _int(value, from_file)
    if not 0 <= number <= 10:
        raise ValueError("expected a verbosity level 0-10")
    return number


def _ip(value: Any, from_file: bool) -> str:
    try:
        return str(ipaddress.ip_address(str(value).strip()))
    except ValueError:
        raise ValueError("expected an IP address") from None


def _string(value: Any, from_file: bool) -> str:
    if not isinstance(value, str):
        raise ValueError("expected a string")
    return value


def _endpoint(value: Any, from_file: bool) -> str:
    text = _string(value, from_file)
    if text and not text.startswith(("unix://", "/")):
        raise ValueError("expected a unix socket endpoint such as unix:///run/containerd/containerd.sock")
    return text if not text.startswith("/") else f"unix://{text}"


def _bool(value: Any, from_file: bool) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and not from_file and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    raise ValueError("expected true or false")


def _choice(*choices: str) -> Callable[[Any, bool], str]:
    def parse(value: Any, from_file: bool) -> str:
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return str(value)

    return parse


def _headers(value: Any, from_file: bool) -> dict[str, list[str]]:
    """File: ``{"Key": ["v1", "v2"]}``; flags: repeated ``Key:v1,Other:v2``."""
    if from_file:
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(i, str) for i in v)
            for k, v in value.items()
        ):
            raise ValueError("expected a map of header name to a list of values")
        return {k: list(v) for k, v in value.items()}
    return parse_manifest_url_headers(list(value))


_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def _labels(value: Any, from_file: bool) -> dict[str, str]:
    """``key=value,key2=value2`` (repeatable flag)."""
    labels: dict[str, str] = {}
    for item in value if isinstance(value, list) else [value]:
        for pair in str(item).split(","):
            if not pair:
                continue
            key, sep, label = pair.partition("=")
            if not sep or not _LABEL_KEY.match(key):
                raise ValueError("expected key=value pairs separated by commas")
            labels[key] = label
    return labels


def _positive_number(value: Any, from_file: bool) -> float:
    if isinstance(value, bool):
        raise ValueError("expected a number")
    try:
        number = float(value) if isinstance(value, (int, float)) or not from_file else math.nan
    except ValueError:
        number = math.nan
    if not number > 0:
        raise ValueError("expected a number greater than zero")
    return number


def _pairs(value: Any, from_file: bool, separator: str) -> dict[str, str]:
    """File: a map; flags: ``k<sep>v,k2<sep>v2`` (repeatable)."""
    if from_file:
        if not isinstance(value, Mapping):
            raise ValueError("expected a map")
        return {str(k): str(v) for k, v in value.items()}
    pairs: dict[str, str] = {}
    for item in value if isinstance(value, list) else [value]:
        for pair in str(item).split(","):
            if not pair:
                continue
            key, sep, val = pair.partition(separator)
            if not sep or not key or not val:
                raise ValueError(f"expected key{separator}value pairs separated by commas")
            pairs[key.strip()] = val.strip()
    return pairs


RESERVABLE = ("cpu", "memory", "ephemeral-storage", "pid")


def _reserved(value: Any, from_file: bool) -> dict[str, str]:
    """kubeReserved/systemReserved: ``cpu=100m,memory=256Mi`` or a map; values are quantities."""
    reserved = _pairs(value, from_file, "=")
    for name, amount in reserved.items():
        if name not in RESERVABLE:
            raise ValueError(f"unknown resource {name!r} (expected {', '.join(RESERVABLE)})")
        try:
            if Quantity(amount).milli_value() < 0:
                raise ValueError
        except ValueError:
            raise ValueError(f"{name}: {amount!r} is not a non-negative quantity") from None
    return reserved


EVICTION_SIGNALS = (
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
)


def _eviction(value: Any, from_file: bool) -> dict[str, str]:
    """evictionHard: ``memory.available<100Mi,nodefs.available<10%`` or a map of signal to threshold."""
    thresholds = _pairs(value, from_file, "<")
    for signal, threshold in thresholds.items():
        if signal not in EVICTION_SIGNALS:
            raise ValueError(f"unknown eviction signal {signal!r} (expected {', '.join(EVICTION_SIGNALS)})")
        try:
            if threshold.endswith("%"):
                if not 0 <= float(threshold[:-1]) <= 100:
                    raise ValueError
            elif Quantity(threshold).milli_value() < 0:
                raise ValueError
        except ValueError:
            raise ValueError(f"{signal}: {threshold!r} is not a quantity or a percentage") from None
    return thresholds


def _sysctl_patterns(value: Any, from_file: bool) -> tuple[str, ...]:
    """allowedUnsafeSysctls: a list of names or prefixes ending in ``*``; flags: comma-separated
    (repeatable). Each must be a sysctl the kernel namespaces."""
    if from_file:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError("expected a list of sysctl names or patterns")
        patterns = [str(v) for v in value]
    else:
        items = value if isinstance(value, list) else [value]
        patterns = [pattern for item in items for pattern in str(item).split(",")]
    patterns = [p.strip() for p in patterns if p.strip()]
    SysctlAllowlist.build(patterns)  # raises ValueError naming the pattern
    return tuple(patterns)


TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _taints(value: Any, from_file: bool) -> tuple[dict[str, str], ...]:
    """registerWithTaints: a list of ``{key, value, effect}``; flags: ``key[=value]:Effect,...``."""
    taints: list[dict[str, str]] = []
    if from_file:
        if not isinstance(value, list) or not all(isinstance(t, Mapping) for t in value):
            raise ValueError("expected a list of taints (key, value, effect)")
        items = [{str(k): str(v) for k, v in t.items() if v is not None} for t in value]
    else:
        items = []
        for item in value if isinstance(value, list) else [value]:
            for spec in str(item).split(","):
                if not spec:
                    continue
                head, sep, effect = spec.rpartition(":")
                if not sep:
                    raise ValueError("expected key[=value]:Effect")
                key, _, val = head.partition("=")
                items.append({"key": key, "value": val, "effect": effect})
    for taint in items:
        if not _LABEL_KEY.match(taint.get("key", "")):
            raise ValueError(f"invalid taint key {taint.get('key', '')!r}")
        if taint.get("effect") not in TAINT_EFFECTS:
            raise ValueError(
                f"invalid taint effect {taint.get('effect')!r} (expected {', '.join(TAINT_EFFECTS)})"
            )
        taints.append({k: v for k, v in taint.items() if k in ("key", "value", "effect") and v != ""})
    return tuple(taints)


# -- the settings ---------------------------------------------------------------------------------------
#
# Each setting is one field of KubeletOptions declared with setting(): its name (the field), type (the
# annotation), flag, KubeletConfiguration key, parser, default and help. SETTINGS, the argument parser,
# the file reader and the help text are derived from those fields.


@attrs.frozen
class Setting:
    dest: str
    flag: str | None
    key: str | None  # KubeletConfiguration key; dotted for nested ("logging.format")
    parse: Callable[[Any, bool], Any]
    default: Any
    help: str
    group: str
    metavar: str | None = None
    repeatable: bool = False
    is_switch: bool = False
    path: bool = False  # relative paths in the file are relative to the file


G_CONFIG, G_SOURCES, G_RUNTIME, G_NODE, G_API, G_HTTP, G_RUNONCE, G_LOGS = (
    "configuration",
    "pod sources",
    "container runtime",
    "node",
    "API server mode (--kubeconfig)",
    "HTTP servers",
    "run-once (--runonce)",
    "logging",
)

_SETTING = "kubelet_trio.options.setting"  # the attrs metadata key of a field's Setting


def setting(
    flag: str | None,
    key: str | None,
    parse: Callable[[Any, bool], Any],
    default: Any,
    help: str,
    group: str,
    metavar: str | None = None,
    *,
    repeatable: bool = False,
    is_switch: bool = False,
    path: bool = False,
) -> Any:
    """A :class:`KubeletOptions` field declaring one setting (mutable defaults are copied per instance)."""
    spec = Setting("", flag, key, parse, default, help, group, metavar, repeatable, is_switch, path)
    if isinstance(default, Mapping):
        return attrs.field(factory=lambda: dict(default), metadata={_SETTING: spec})
    return attrs.field(default=default, metadata={_SETTING: spec})


@attrs.frozen(kw_only=True)
class KubeletOptions:
    """The effective settings; ``explicit`` names the settings a flag or the file gave."""

    config: str = ""  # the --config file (not a setting of its own)
    # pod sources
    pod_manifest_path: str = setting(
        "--pod-manifest-path",
        "staticPodPath",
        _string,
        "",
        "directory (or file) of static pod manifests",
        G_SOURCES,
        "PATH",
        path=True,
    )
    manifest_url: str = setting(
        "--manifest-url",
        "staticPodURL",
        _string,
        "",
        "URL serving a Pod, PodList or List",
        G_SOURCES,
        "URL",
    )
    manifest_url_header: dict[str, list[str]] = setting(  # noqa: RUF009 - copied per instance
        "--manifest-url-header",
        "staticPodURLHeader",
        _headers,
        {},
        "HTTP header for --manifest-url, 'Key:value[,Key2:value2]' (repeatable)",
        G_SOURCES,
        "KEY:VALUE",
        repeatable=True,
    )
    file_check_frequency: float = setting(
        "--file-check-frequency",
        "fileCheckFrequency",
        _positive_duration,
        defaults.FILE_CHECK_FREQUENCY,
        "how often the manifest path is re-read (inotify catches changes sooner)",
        G_SOURCES,
        "DURATION",
    )
    http_check_frequency: float = setting(
        "--http-check-frequency",
        "httpCheckFrequency",
        _positive_duration,
        defaults.HTTP_CHECK_FREQUENCY,
        "how often the manifest URL is fetched",
        G_SOURCES,
        "DURATION",
    )
    kubeconfig: str = setting(
        "--kubeconfig",
        None,
        _string,
        "",
        "kubeconfig of the API server: pods come from it, node and pod status go to it",
        G_SOURCES,
        "PATH",
    )
    # runtime
    runtime: str = setting(
        "--runtime",
        None,
        _choice("cri", "sim"),
        "cri",
        "cri: a CRI runtime at --container-runtime-endpoint; sim: the built-in simulated runtime",
        G_RUNTIME,
        "{cri,sim}",
    )
    container_runtime_endpoint: str = setting(
        "--container-runtime-endpoint",
        "containerRuntimeEndpoint",
        _endpoint,
        defaults.CONTAINER_RUNTIME_ENDPOINT,
        "CRI runtime socket",
        G_RUNTIME,
        "unix:///SOCKET",
    )
    image_service_endpoint: str = setting(
        "--image-service-endpoint",
        "imageServiceEndpoint",
        _endpoint,
        "",
        "CRI image service socket (default: the runtime endpoint)",
        G_RUNTIME,
        "unix:///SOCKET",
    )
    runtime_request_timeout: float = setting(
        "--runtime-request-timeout",
        "runtimeRequestTimeout",
        _positive_duration,
        defaults.RUNTIME_REQUEST_TIMEOUT,
        "timeout of every CRI call except pulls",
        G_RUNTIME,
        "DURATION",
    )
    pod_infra_container_image: str = setting(
        "--pod-infra-container-image",
        None,
        _string,
        "",
        "accepted for compatibility: a CRI runtime uses its own sandbox image setting",
        G_RUNTIME,
        "IMAGE",
    )
    # node
    hostname_override: str = setting(
        "--hostname-override",
        None,
        _string,
        "",
        "node name (default: the hostname, lower-cased)",
        G_NODE,
        "NAME",
    )
    node_ip: str = setting(
        "--node-ip",
        None,
        _ip,
        "",
        "the node's IP address, reported as InternalIP and hostIP (default: a non-loopback address of the "
        "node name, else the default-route interface's; 0.0.0.0 or :: only picks the preferred family)",
        G_NODE,
        "IP",
    )
    node_labels: dict[str, str] = setting(  # noqa: RUF009 - copied per instance
        "--node-labels",
        None,
        _labels,
        {},
        "labels for the node object, key=value[,key=value] (used in API server mode)",
        G_NODE,
        "LABELS",
        repeatable=True,
    )
    root_dir: str = setting(
        "--root-dir",
        None,
        _string,
        defaults.ROOT_DIR,
        "the kubelet's state directory",
        G_NODE,
        "DIR",
    )
    pod_logs_dir: str = setting(
        "--pod-logs-dir",
        "podLogsDir",
        _string,
        defaults.POD_LOGS_DIR,
        "root of the container log files",
        G_NODE,
        "DIR",
        path=True,
    )
    sync_frequency: float = setting(
        "--sync-frequency",
        "syncFrequency",
        _positive_duration,
        defaults.SYNC_FREQUENCY,
        "how often a running pod is re-synced",
        G_NODE,
        "DURATION",
    )
    max_pods: int = setting(
        "--max-pods",
        "maxPods",
        _non_negative_int,
        defaults.MAX_PODS,
        "the most pods this node runs (enforced at admission)",
        G_NODE,
        "N",
    )
    allowed_unsafe_sysctls: tuple[str, ...] = setting(
        "--allowed-unsafe-sysctls",
        "allowedUnsafeSysctls",
        _sysctl_patterns,
        (),
        "sysctls (or prefixes ending in *, e.g. kernel.msg*,net.core.somaxconn) pods may set beyond the safe"
        " ones; each must be namespaced (repeatable)",
        G_NODE,
        "SYSCTLS",
        repeatable=True,
    )
    container_log_max_size: str = setting(
        "--container-log-max-size",
        "containerLogMaxSize",
        _log_max_size,
        defaults.CONTAINER_LOG_MAX_SIZE,
        "size (a quantity such as 10Mi) at which a container's log file is rotated (negative: never)",
        G_NODE,
        "SIZE",
    )
    container_log_max_files: int = setting(
        "--container-log-max-files",
        "containerLogMaxFiles",
        _log_max_files,
        defaults.CONTAINER_LOG_MAX_FILES,
        "the most log files kept per container, the current one included (at least 2)",
        G_NODE,
        "N",
    )
    container_log_monitor_interval: float = setting(
        None,
        "containerLogMonitorInterval",
        _log_monitor_interval,
        defaults.CONTAINER_LOG_MONITOR_INTERVAL,
        "how often container log sizes are checked for rotation (at least 3s)",
        G_NODE,
    )
    # API server mode
    kube_api_qps: float = setting(
        "--kube-api-qps",
        "kubeAPIQPS",
        _positive_number,
        defaults.KUBE_API_QPS,
        "requests per second to the API server (client-side token bucket)",
        G_API,
        "QPS",
    )
    kube_api_burst: int = setting(
        "--kube-api-burst",
        "kubeAPIBurst",
        _positive_int,
        defaults.KUBE_API_BURST,
        "burst of the API client's rate limit",
        G_API,
        "N",
    )
    register_node: bool = setting(
        "--register-node",
        "registerNode",
        _bool,
        True,
        "create the Node object (false: only update one that exists)",
        G_API,
        "BOOL",
    )
    register_with_taints: tuple[dict[str, str], ...] = setting(
        "--register-with-taints",
        "registerWithTaints",
        _taints,
        (),
        "taints of the Node when it is registered, key[=value]:Effect[,...] (repeatable)",
        G_API,
        "TAINTS",
        repeatable=True,
    )
    kube_reserved: dict[str, str] = setting(  # noqa: RUF009 - copied per instance
        "--kube-reserved",
        "kubeReserved",
        _reserved,
        {},
        "resources reserved for Kubernetes daemons, e.g. cpu=100m,memory=256Mi (less allocatable)",
        G_API,
        "RESOURCES",
        repeatable=True,
    )
    system_reserved: dict[str, str] = setting(  # noqa: RUF009 - copied per instance
        "--system-reserved",
        "systemReserved",
        _reserved,
        {},
        "resources reserved for the OS, e.g. cpu=100m,memory=256Mi (less allocatable)",
        G_API,
        "RESOURCES",
        repeatable=True,
    )
    eviction_hard: dict[str, str] = setting(  # noqa: RUF009 - copied per instance
        "--eviction-hard",
        "evictionHard",
        _eviction,
        defaults.EVICTION_HARD,
        "hard eviction thresholds, e.g. memory.available<100Mi,nodefs.available<10% (replace the defaults;"
        " subtracted from allocatable)",
        G_API,
        "THRESHOLDS",
        repeatable=True,
    )
    node_status_update_frequency: float = setting(
        "--node-status-update-frequency",
        "nodeStatusUpdateFrequency",
        _positive_duration,
        defaults.NODE_STATUS_UPDATE_FREQUENCY,
        "how often the node status is computed and posted when it changed",
        G_API,
        "DURATION",
    )
    config_map_and_secret_change_detection_strategy: str = setting(
        None,
        "configMapAndSecretChangeDetectionStrategy",
        _choice(*defaults.CHANGE_DETECTION_STRATEGIES),
        defaults.CONFIG_MAP_AND_SECRET_CHANGE_DETECTION_STRATEGY,
        "how ConfigMaps and Secrets pods use are kept current: Watch, Cache (TTL) or Get (every sync)",
        G_API,
    )
    node_status_report_frequency: float = setting(
        None,
        "nodeStatusReportFrequency",
        _positive_duration,
        defaults.NODE_STATUS_REPORT_FREQUENCY,
        "how often the node status is posted when nothing changed",
        G_API,
    )
    node_lease_duration_seconds: int = setting(
        None,
        "nodeLeaseDurationSeconds",
        _positive_int,
        defaults.NODE_LEASE_DURATION_SECONDS,
        "the node Lease's leaseDurationSeconds (renewed every quarter of it)",
        G_API,
    )
    # http
    healthz_port: int = setting(
        "--healthz-port",
        "healthzPort",
        _port,
        defaults.HEALTHZ_PORT,
        "port of the /healthz server (0 = off)",
        G_HTTP,
        "PORT",
    )
    healthz_bind_address: str = setting(
        "--healthz-bind-address",
        "healthzBindAddress",
        _ip,
        defaults.HEALTHZ_BIND_ADDRESS,
        "address of the /healthz server",
        G_HTTP,
        "IP",
    )
    read_only_port: int = setting(
        "--read-only-port",
        "readOnlyPort",
        _port,
        defaults.READ_ONLY_PORT,
        "port of the unauthenticated read-only server: /pods, /runningpods, /metrics, /stats/summary,"
        " /containerLogs (0 = off)",
        G_HTTP,
        "PORT",
    )
    address: str = setting(
        "--address",
        "address",
        _ip,
        defaults.ADDRESS,
        "address of the read-only server and the Kubelet API",
        G_HTTP,
        "IP",
    )
    port: int = setting(
        "--port",
        "port",
        _port,
        defaults.PORT,
        "port of the Kubelet API (TLS, authenticated): the read-only server's endpoints (0 = off)",
        G_HTTP,
        "PORT",
    )
    tls_cert_file: str = setting(
        "--tls-cert-file",
        "tlsCertFile",
        _string,
        "",
        "the Kubelet API's serving certificate (default: self-signed under <root-dir>/pki)",
        G_HTTP,
        "PATH",
        path=True,
    )
    tls_private_key_file: str = setting(
        "--tls-private-key-file",
        "tlsPrivateKeyFile",
        _string,
        "",
        "the key of --tls-cert-file",
        G_HTTP,
        "PATH",
        path=True,
    )
    client_ca_file: str = setting(
        "--client-ca-file",
        "authentication.x509.clientCAFile",
        _string,
        "",
        "CA bundle verifying Kubelet API client certificates (user = CN, groups = O)",
        G_HTTP,
        "PATH",
        path=True,
    )
    anonymous_auth: bool = setting(
        "--anonymous-auth",
        "authentication.anonymous.enabled",
        _bool,
        False,
        "let unauthenticated Kubelet API requests in as system:anonymous",
        G_HTTP,
        "BOOL",
    )
    authentication_token_webhook: bool = setting(
        "--authentication-token-webhook",
        "authentication.webhook.enabled",
        _bool,
        False,
        "check Kubelet API bearer tokens with TokenReview (API mode)",
        G_HTTP,
        "BOOL",
    )
    authentication_token_webhook_cache_ttl: float = setting(
        "--authentication-token-webhook-cache-ttl",
        "authentication.webhook.cacheTTL",
        _duration,
        defaults.AUTHENTICATION_WEBHOOK_CACHE_TTL,
        "how long TokenReview answers are cached (0 = not cached)",
        G_HTTP,
        "DURATION",
    )
    authorization_mode: str = setting(
        "--authorization-mode",
        "authorization.mode",
        _choice("AlwaysAllow", "Webhook"),
        "AlwaysAllow",
        "Kubelet API authorization: AlwaysAllow or Webhook (SubjectAccessReview, API mode)",
        G_HTTP,
        "MODE",
    )
    authorization_webhook_cache_authorized_ttl: float = setting(
        "--authorization-webhook-cache-authorized-ttl",
        "authorization.webhook.cacheAuthorizedTTL",
        _duration,
        defaults.AUTHORIZATION_WEBHOOK_CACHE_AUTHORIZED_TTL,
        "how long an allowing SubjectAccessReview answer is cached (0 = not cached)",
        G_HTTP,
        "DURATION",
    )
    authorization_webhook_cache_unauthorized_ttl: float = setting(
        "--authorization-webhook-cache-unauthorized-ttl",
        "authorization.webhook.cacheUnauthorizedTTL",
        _duration,
        defaults.AUTHORIZATION_WEBHOOK_CACHE_UNAUTHORIZED_TTL,
        "how long a denying SubjectAccessReview answer is cached (0 = not cached)",
        G_HTTP,
        "DURATION",
    )
    streaming_connection_idle_timeout: float = setting(
        "--streaming-connection-idle-timeout",
        "streamingConnectionIdleTimeout",
        _duration,
        defaults.STREAMING_CONNECTION_IDLE_TIMEOUT,
        "close exec/attach/port-forward streams after this long without traffic",
        G_HTTP,
        "DURATION",
    )
    # run-once
    runonce: bool = setting(
        "--runonce",
        None,
        _bool,
        False,
        "start the pods of the static sources, wait, report, exit (0: every pod reached the target)",
        G_RUNONCE,
        is_switch=True,
    )
    runonce_wait: str = setting(
        "--runonce-wait",
        None,
        _choice("running", "completion"),
        "running",
        "running: until every container runs; completion: pods with restartPolicy Never/OnFailure"
        " until they finish",
        G_RUNONCE,
        "{running,completion}",
    )
    runonce_timeout: float = setting(
        "--runonce-timeout",
        None,
        _positive_duration,
        300.0,
        "overall deadline; pods not at the target by then fail",
        G_RUNONCE,
        "DURATION",
    )
    runonce_cleanup: bool = setting(
        "--runonce-cleanup",
        None,
        _bool,
        False,
        "stop and remove the pods after the report (default: leave them, like the Go kubelet)",
        G_RUNONCE,
        is_switch=True,
    )
    output: str = setting(
        "--output",
        None,
        _choice("table", "json"),
        "table",
        "report format",
        G_RUNONCE,
        "{table,json}",
    )
    # logging
    verbosity: int = setting(
        "--v",
        "logging.verbosity",
        _verbosity,
        0,
        "log verbosity: 0 info, 4+ debug (run-once shows only warnings unless --v is given)",
        G_LOGS,
        "LEVEL",
    )
    log_format: str = setting(
        "--log-format",
        "logging.format",
        _choice("text", "json"),
        "text",
        "text (key=value) or json (one object per line)",
        G_LOGS,
        "{text,json}",
    )
    explicit: frozenset[str] = frozenset()

    @property
    def container_log_max_bytes(self) -> int:
        return Quantity(self.container_log_max_size).int_value()

    @property
    def node_name(self) -> str:
        return (self.hostname_override or socket.gethostname()).strip().lower()


def _settings() -> tuple[Setting, ...]:
    defaults_ = KubeletOptions()  # defaults made by a factory are this instance's copies
    return tuple(
        attrs.evolve(spec, dest=field.name, default=getattr(defaults_, field.name))
        for field in attrs.fields(KubeletOptions)
        if (spec := field.metadata.get(_SETTING)) is not None
    )


#: Every setting, in declaration (and help) order.
SETTINGS: tuple[Setting, ...] = _settings()
_BY_DEST = {s.dest: s for s in SETTINGS}
_BY_KEY = {s.key: s for s in SETTINGS if s.key}


# -- the argument parser --------------------------------------------------------------------------------


def _show_default(setting: Setting) -> str:
    value = setting.default
    if setting.is_switch or value in ("", {}, (), None):
        return ""
    if setting.parse is _eviction:
        return f" (default {','.join(f'{k}<{v}' for k, v in value.items())})"
    if isinstance(value, bool):
        return f" (default {str(value).lower()})"
    if setting.parse in (_duration, _positive_duration, _log_monitor_interval):
        from kubelet_trio.clock import go_duration

        return f" (default {go_duration(value)})"
    return f" (default {value})"


class _Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=36, width=110)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubelet-trio",
        description=(
            "A Kubernetes node agent on Trio. Runs the pods of a manifest directory and/or URL on a CRI\n"
            "runtime (or the simulated one) until SIGTERM/SIGINT; with --runonce it starts them, waits,\n"
            "prints a report and exits."
        ),
        epilog=(
            "Flags override the --config file. Durations: 1m0s, 20s, 500ms (flags also take seconds).\n"
            "Config-file only: "
            + "; ".join(f"{s.key}: {s.help}{_show_default(s)}" for s in SETTINGS if s.flag is None)
            + ".\nOther commands: kubelet-trio {demo,sim-cri,check-manifests} --help"
        ),
        formatter_class=_Formatter,
        argument_default=argparse.SUPPRESS,
    )
    config = parser.add_argument_group(G_CONFIG)
    config.add_argument(
        "--config",
        metavar="FILE",
        help=f"KubeletConfiguration file (apiVersion: {CONFIG_API_VERSION}); flags override it",
    )
    groups = {G_CONFIG: config}
    for setting in SETTINGS:
        if setting.flag is None:  # config-file only, as in Go (listed in the epilog)
            continue
        group = groups.get(setting.group) or groups.setdefault(
            setting.group, parser.add_argument_group(setting.group)
        )
        key = f" [{setting.key}]" if setting.key else ""
        help_text = (setting.help + _show_default(setting) + key).replace("%", "%%")  # argparse formats it
        if setting.is_switch:
            group.add_argument(setting.flag, dest=setting.dest, action="store_true", help=help_text)
        elif setting.repeatable:
            group.add_argument(
                setting.flag, dest=setting.dest, action="append", metavar=setting.metavar, help=help_text
            )
        else:
            group.add_argument(setting.flag, dest=setting.dest, metavar=setting.metavar, help=help_text)
    return parser


# -- the file -------------------------------------------------------------------------------------------


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings → dotted keys, but only where we know nested keys (``logging.*``)."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and any(k.startswith(dotted + ".") for k in _BY_KEY):
            flat.update(_flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def read_config_file(path: str) -> tuple[dict[str, Any], list[str]]:
    """``(dest → value, warnings)`` from a KubeletConfiguration file."""
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise OptionsError(f"cannot read --config {path}: {err.strerror or err}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise OptionsError(f"--config {path} is not valid YAML: {err}") from None
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise OptionsError(
            f"--config {path}: expected a KubeletConfiguration object, got {type(data).__name__}"
        )
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if api_version != CONFIG_API_VERSION:
        raise OptionsError(
            f"--config {path}: invalid value for apiVersion: {api_version!r} (expected {CONFIG_API_VERSION})"
        )
    if kind != CONFIG_KIND:
        raise OptionsError(f"--config {path}: invalid value for kind: {kind!r} (expected {CONFIG_KIND})")
    body = {k: v for k, v in data.items() if k not in ("apiVersion", "kind")}
    values: dict[str, Any] = {}
    unknown: list[str] = []
    base = os.path.dirname(os.path.abspath(path))
    for key, raw in _flatten(body).items():
        setting = _BY_KEY.get(key)
        if setting is None:
            unknown.append(key)
            continue
        try:
            value = setting.parse(raw, True)
        except ValueError as err:
            raise OptionsError(f"--config {path}: invalid value for {key}: {raw!r}: {err}") from None
        if setting.path and value and not os.path.isabs(value):
            value = os.path.join(base, value)
        values[setting.dest] = value
    warnings = []
    if unknown:
        names = ", ".join(sorted(unknown))
        warnings.append(f"--config {path}: ignoring unknown or unsupported configuration keys: {names}")
    return values, warnings


# -- putting it together --------------------------------------------------------------------------------


def load_options(argv: Sequence[str]) -> tuple[KubeletOptions, list[str]]:
    """Parse flags and the ``--config`` file; returns the options and warnings to print.

    Raises :class:`OptionsError` for invalid values and :class:`SystemExit` for argparse usage errors and
    ``--help`` (status 2 and 0, as argparse does).
    """
    args = vars(build_parser().parse_args(list(argv)))
    values: dict[str, Any] = {}
    warnings: list[str] = []
    config_path = args.pop("config", "")
    if config_path:
        values, warnings = read_config_file(config_path)
    for dest, raw in args.items():
        setting = _BY_DEST[dest]
        try:
            values[dest] = raw if setting.is_switch else setting.parse(raw, False)
        except ValueError as err:
            shown = ",".join(raw) if isinstance(raw, list) else raw
            raise OptionsError(f"invalid value {shown!r} for {setting.flag}: {err}") from None
    try:
        options = KubeletOptions(config=config_path, explicit=frozenset(values), **values)
    except TypeError as err:  # pragma: no cover - SETTINGS and KubeletOptions disagree
        raise OptionsError(str(err)) from None
    return options, warnings


# -- the component configurations -----------------------------------------------------------------------


@attrs.frozen
class ComponentConfigs:
    """What the node's components are built from, derived from :class:`KubeletOptions` in one place."""

    kubelet: KubeletConfig
    api_mode: ApiModeOptions  # used when --kubeconfig is given
    run_once: RunOnceSettings  # used with --runonce


def _concrete_ip(node_ip: str) -> tuple[str, ...]:
    """``--node-ip`` as the node's IPs; none for unset or ``0.0.0.0``/``::`` (a family preference only)."""
    return (node_ip,) if node_ip and not ipaddress.ip_address(node_ip).is_unspecified else ()


def component_configs(options: KubeletOptions) -> ComponentConfigs:
    """The component configurations for ``options``: the only place a setting is copied into one.

    ``kubelet.node_ips`` holds only a concrete ``--node-ip``; the daemon resolves the node's address
    otherwise (a name lookup, the routes) before it builds the node.
    """
    kubelet = KubeletConfig(
        node_name=options.node_name,
        pod_logs_dir=options.pod_logs_dir,
        container_log_max_size=options.container_log_max_bytes,
        container_log_max_files=options.container_log_max_files,
        container_log_monitor_interval=options.container_log_monitor_interval,
        root_dir=options.root_dir,
        node_ips=_concrete_ip(options.node_ip),
        sync_frequency=options.sync_frequency,
        healthz_port=options.healthz_port,
        healthz_bind_address=options.healthz_bind_address,
        read_only_port=options.read_only_port,
        port=options.port,
        tls_cert_file=options.tls_cert_file,
        tls_private_key_file=options.tls_private_key_file,
        client_ca_file=options.client_ca_file,
        anonymous_auth=options.anonymous_auth,
        authentication_token_webhook=options.authentication_token_webhook,
        authorization_mode=options.authorization_mode,
        authentication_cache_ttl=options.authentication_token_webhook_cache_ttl,
        authorized_cache_ttl=options.authorization_webhook_cache_authorized_ttl,
        unauthorized_cache_ttl=options.authorization_webhook_cache_unauthorized_ttl,
        streaming_connection_idle_timeout=options.streaming_connection_idle_timeout,
        address=options.address,
        allowed_unsafe_sysctls=options.allowed_unsafe_sysctls,
    )
    api_mode = ApiModeOptions(
        register_node=options.register_node,
        node_labels=dict(options.node_labels),
        register_with_taints=tuple(options.register_with_taints),
        max_pods=options.max_pods,
        hostname=options.hostname_override or None,
        kubelet_port=options.port,
        kube_reserved=dict(options.kube_reserved),
        system_reserved=dict(options.system_reserved),
        eviction_hard=dict(options.eviction_hard),
        node_status_update_frequency=options.node_status_update_frequency,
        node_status_report_frequency=options.node_status_report_frequency,
        node_lease_duration_seconds=options.node_lease_duration_seconds,
        object_strategy=options.config_map_and_secret_change_detection_strategy,
    )
    run_once = RunOnceSettings(
        wait=options.runonce_wait,
        timeout=options.runonce_timeout,
        cleanup=options.runonce_cleanup,
        max_pods=options.max_pods,
    )
    return ComponentConfigs(kubelet, api_mode, run_once)
