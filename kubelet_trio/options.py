"""Command-line flags and the ``KubeletConfiguration`` file → one validated :class:`KubeletOptions`.

Go: ``cmd/kubelet/app/options`` and ``pkg/kubelet/apis/config/v1beta1``. Flags carry the Go kubelet's
names where the concept exists; the file (``--config``, ``apiVersion: kubelet.config.k8s.io/v1beta1``,
``kind: KubeletConfiguration``) uses the upstream keys. Precedence: built-in defaults < file < flags.

- Durations are Go duration strings (``2m``, ``1m30s``, ``500ms``); flags also take plain seconds.
- A ``--config`` file is defaulted as Go defaults ``kubelet.config.k8s.io/v1beta1``: keys it leaves out
  take the v1beta1 default, which for the Kubelet API's authorization and webhook authentication differs
  from the flags' own (``Setting.file_default``; see :mod:`kubelet_trio.defaults`).
- Unknown keys in the file are reported as one warning naming them; they do not stop the kubelet.
- Security-relevant upstream settings this kubelet does not enforce (:data:`UNENFORCED`: ``podPidsLimit``,
  ``protectKernelDefaults``, ``cgroupsPerQOS``, ...) are accepted the same way as a flag and as a key:
  a value that asks for the protection gets a warning of its own, one per setting, naming it as not
  enforced; a value that asks for nothing (``protectKernelDefaults: false``) is accepted silently.
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

import ipaddress
import math
import os
import re
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import yaml

from kubelet_trio import defaults
from kubelet_trio.api import Quantity
from kubelet_trio.apimode import ApiModeOptions
from kubelet_trio.cliflag import (
    GO_BOOL_VALUES,
    FlagError,
    FlagSpec,
    parse_flags,
    parse_go_bool,
    tls_cipher_suites,
    tls_version,
)
from kubelet_trio.config.http import parse_manifest_url_headers
from kubelet_trio.eviction import EvictionConfigError, parse_thresholds
from kubelet_trio.kubelet import KubeletConfig
from kubelet_trio.runonce import RunOnceSettings
from kubelet_trio.subcommands import SUBCOMMANDS
from kubelet_trio.sysctl import SysctlAllowlist
from kubelet_trio.upstream_flags import unsupported_message

__all__ = [
    "CONFIG_API_VERSION",
    "CONFIG_KIND",
    "IGNORED_KEYS",
    "NOT_ENFORCED",
    "SETTINGS",
    "UNENFORCED",
    "CertificateSettings",
    "ComponentConfigs",
    "KubeletOptions",
    "OptionsError",
    "OptionsWarning",
    "Setting",
    "Unenforced",
    "component_configs",
    "help_text",
    "load_options",
    "parse_duration",
    "version_text",
]

CONFIG_API_VERSION = "kubelet.config.k8s.io/v1beta1"
CONFIG_KIND = "KubeletConfiguration"
DEFAULT_ENDPOINT = defaults.CONTAINER_RUNTIME_ENDPOINT


class OptionsError(ValueError):
    """An invalid flag, file or value; the message names it. The CLI exits with status 2."""


@attrs.frozen
class OptionsWarning:
    """Something about the configuration worth a warning, logged once logging is set up: a constant
    message and its values as data."""

    message: str
    fields: Mapping[str, Any] = attrs.Factory(dict)


#: The message of the warning for a security-relevant setting that asks for a protection not enforced.
NOT_ENFORCED = "security-relevant setting is NOT enforced by kubelet-trio"
#: The message of the one warning naming the configuration keys that are read but not used.
IGNORED_KEYS = "ignoring unknown or unsupported configuration keys"


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


def _percent(value: Any, from_file: bool) -> int:
    number = _int(value, from_file)
    if not 0 <= number <= 100:
        raise ValueError("expected a percentage 0-100")
    return number


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


def _ip_list(value: Any, from_file: bool) -> tuple[str, ...]:
    """File: a list of IPs; flags: comma-separated (repeatable)."""
    if from_file:
        if not isinstance(value, list):
            raise ValueError("expected a list of IP addresses")
        items = [str(v) for v in value]
    else:
        items = [
            part for item in (value if isinstance(value, list) else [value]) for part in str(item).split(",")
        ]
    return tuple(_ip(item, from_file) for item in items if item.strip())


def _string(value: Any, from_file: bool) -> str:
    if not isinstance(value, str):
        raise ValueError("expected a string")
    return value


def _strings(value: Any, from_file: bool) -> tuple[str, ...]:
    """File: a list of strings; flags: comma-separated (repeatable), as pflag's StringSlice."""
    if from_file:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError("expected a list of strings")
        items = [str(v) for v in value]
    else:
        items = [
            part for item in (value if isinstance(value, list) else [value]) for part in str(item).split(",")
        ]
    return tuple(item.strip() for item in items if item.strip())


def _tls_min_version(value: Any, from_file: bool) -> str:
    """tlsMinVersion: one of Go's names, VersionTLS10 ... VersionTLS13 ("": the default, TLS 1.2)."""
    name = _string(value, from_file).strip()
    if name:
        tls_version(name)  # Go's error for any other name
    return name


def _tls_cipher_suites(value: Any, from_file: bool) -> tuple[str, ...]:
    """tlsCipherSuites: Go's cipher suite names (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, ...)."""
    names = _strings(value, from_file)
    tls_cipher_suites(names)  # Go's error names the first unknown one
    return names


def _cidr(value: Any, from_file: bool) -> str:
    """An IPv4 network such as 198.18.5.0/24 ("" = unset)."""
    text = _string(value, from_file).strip()
    if not text:
        return ""
    try:
        network = ipaddress.ip_network(text)
    except ValueError:
        raise ValueError("expected an IPv4 CIDR such as 198.18.5.0/24") from None
    if network.version != 4 or network.prefixlen > 30:
        raise ValueError("expected an IPv4 CIDR with room for pods (a prefix of /30 or shorter)")
    return str(network)


def _endpoint(value: Any, from_file: bool) -> str:
    text = _string(value, from_file)
    if text and not text.startswith(("unix://", "/")):
        raise ValueError("expected a unix socket endpoint such as unix:///run/containerd/containerd.sock")
    return text if not text.startswith("/") else f"unix://{text}"


def _bool(value: Any, from_file: bool) -> bool:
    """File: a YAML boolean; flags: what Go's ``strconv.ParseBool`` accepts (``--flag`` alone is true)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and not from_file:
        return parse_go_bool(value)
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


def _eviction_grace_periods(value: Any, from_file: bool) -> dict[str, float]:
    """evictionSoftGracePeriod: ``memory.available=1m30s`` or a map of signal to duration (seconds)."""
    periods: dict[str, float] = {}
    for signal, text in _pairs(value, from_file, "=").items():
        if signal not in EVICTION_SIGNALS:
            raise ValueError(f"unknown eviction signal {signal!r} (expected {', '.join(EVICTION_SIGNALS)})")
        try:
            periods[signal] = _duration(text, from_file)
        except ValueError:
            raise ValueError(f"{signal}: {text!r} is not a duration") from None
        if periods[signal] < 0:
            raise ValueError(f"{signal}: {text!r} must not be negative")
    return periods


def _eviction_reclaims(value: Any, from_file: bool) -> dict[str, str]:
    """evictionMinimumReclaim: ``memory.available=0Mi,nodefs.available=500Mi`` or a map."""
    return _eviction(_pairs(value, from_file, "="), True)


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
    path: bool = False  # relative paths in the file are relative to the file
    aliases: tuple[str, ...] = ()  # other spellings of the flag
    shorthand: str = ""  # a one-letter flag (-v)
    #: The default when a --config file is given, where Go's v1beta1 default differs from the flag's
    #: legacy default (None: the same default either way).
    file_default: Any = None

    @property
    def flags(self) -> tuple[str, ...]:
        """The flag and its aliases (none for a configuration-file-only setting)."""
        return (self.flag, *self.aliases) if self.flag is not None else ()

    @property
    def boolean(self) -> bool:
        """A pflag boolean: ``--flag`` alone means true, ``--flag=false`` sets it false."""
        return self.parse is _bool


G_CONFIG, G_SOURCES, G_RUNTIME, G_NODE, G_API, G_CERTS, G_HTTP, G_RUNONCE, G_LOGS = (
    "configuration",
    "pod sources",
    "container runtime",
    "node",
    "API server mode (--kubeconfig)",
    "TLS bootstrap and certificates",
    "HTTP servers",
    "run-once (--runonce)",
    "logging",
)
G_UNENFORCED = "security-relevant, accepted but not enforced"

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
    path: bool = False,
    aliases: tuple[str, ...] = (),
    shorthand: str = "",
    file_default: Any = None,
) -> Any:
    """A :class:`KubeletOptions` field declaring one setting (mutable defaults are copied per instance)."""
    spec = Setting(
        "",
        flag,
        key,
        parse,
        default,
        help,
        group,
        metavar,
        repeatable,
        path,
        aliases,
        shorthand,
        file_default,
    )
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
    container_runtime: str = setting(
        "--container-runtime",
        None,
        _choice("remote", "managed"),
        "remote",
        "remote: use the CRI runtime at --container-runtime-endpoint; managed: start and supervise a"
        " containerd of this kubelet's own (state under --root-dir)",
        G_RUNTIME,
        "{remote,managed}",
    )
    pod_cidr: str = setting(
        "--pod-cidr",
        "podCIDR",
        _cidr,
        "",
        "the pod subnet of the managed runtime's bridge (default: a free /24 of 198.18.0.0/15, a range no"
        " other network uses); refused when it overlaps a route of this host",
        G_RUNTIME,
        "CIDR",
    )
    pod_infra_container_image: str = setting(
        "--pod-infra-container-image",
        None,
        _string,
        "",
        "the sandbox (pause) image, never garbage collected; with --container-runtime managed it is the"
        " managed containerd's sandbox image, else the CRI runtime's own setting decides",
        G_RUNTIME,
        "IMAGE",
    )
    image_credential_provider_config: str = setting(
        "--image-credential-provider-config",
        None,
        _string,
        "",
        "the CredentialProviderConfig file (or directory of them) naming the exec plugins that supply"
        " registry credentials for image pulls; read at startup, an invalid one stops the kubelet",
        G_RUNTIME,
        "PATH",
    )
    image_credential_provider_bin_dir: str = setting(
        "--image-credential-provider-bin-dir",
        None,
        _string,
        "",
        "the directory of the credential provider plugins' executables",
        G_RUNTIME,
        "PATH",
    )
    image_import_dir: str = setting(
        "--image-import-dir",
        "imageImportDir",
        _string,
        "",
        "a directory of image archives (*.tar, *.tar.gz, *.tar.zst; OCI or Docker, as `ctr images export`"
        " writes them) imported into containerd's k8s.io namespace before the first pod starts and again"
        " when one is added, for nodes without a registry (k3s's agent/images); needs containerd (its ctr"
        " reaches the runtime's socket); default with --container-runtime managed:"
        " <root-dir>/containerd/images",
        G_RUNTIME,
        "DIR",
        path=True,
    )
    cgroup_driver: str = setting(
        "--cgroup-driver",
        "cgroupDriver",
        _choice("cgroupfs", "systemd"),
        defaults.CGROUP_DRIVER,
        "the runtime's cgroup driver; accepted and checked (this kubelet leaves pod cgroups to the runtime)",
        G_RUNTIME,
        "{cgroupfs,systemd}",
    )
    # node
    fail_swap_on: bool = setting(
        "--fail-swap-on",
        "failSwapOn",
        _bool,
        True,
        "refuse to start the node daemon when swap is enabled on the machine",
        G_NODE,
        "BOOL",
    )
    cluster_dns: tuple[str, ...] = setting(
        "--cluster-dns",
        "clusterDNS",
        _ip_list,
        (),
        "DNS server IPs of pods with dnsPolicy ClusterFirst, comma-separated (repeatable)",
        G_NODE,
        "IPS",
        repeatable=True,
    )
    cluster_domain: str = setting(
        "--cluster-domain",
        "clusterDomain",
        _string,
        "",
        "the cluster's DNS domain: pods search it in addition to the host's search domains",
        G_NODE,
        "DOMAIN",
    )
    resolv_conf: str = setting(
        "--resolv-conf",
        "resolvConf",
        _string,
        defaults.RESOLV_CONF,
        'the resolver file pods with dnsPolicy Default copy ("" = none)',
        G_NODE,
        "PATH",
        path=True,
    )
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
    image_gc_high_threshold: int = setting(
        "--image-gc-high-threshold",
        "imageGCHighThresholdPercent",
        _percent,
        defaults.IMAGE_GC_HIGH_THRESHOLD_PERCENT,
        "image filesystem usage (percent) at which unused images are removed, least recently used first"
        " (100: never)",
        G_NODE,
        "PERCENT",
    )
    image_gc_low_threshold: int = setting(
        "--image-gc-low-threshold",
        "imageGCLowThresholdPercent",
        _percent,
        defaults.IMAGE_GC_LOW_THRESHOLD_PERCENT,
        "image filesystem usage (percent) image garbage collection frees down to (at most the high one)",
        G_NODE,
        "PERCENT",
    )
    minimum_image_ttl_duration: float = setting(
        "--minimum-image-ttl-duration",
        "imageMinimumGCAge",
        _duration,
        defaults.IMAGE_MINIMUM_GC_AGE,
        "how long an unused image is kept at least before it may be garbage collected",
        G_NODE,
        "DURATION",
    )
    minimum_container_ttl_duration: float = setting(
        "--minimum-container-ttl-duration",
        None,
        _duration,
        defaults.MINIMUM_CONTAINER_TTL_DURATION,
        "how long a dead container is kept at least before it may be garbage collected (deprecated in Go)",
        G_NODE,
        "DURATION",
    )
    maximum_dead_containers_per_container: int = setting(
        "--maximum-dead-containers-per-container",
        None,
        _int,
        defaults.MAXIMUM_DEAD_CONTAINERS_PER_CONTAINER,
        "dead instances kept per container (negative: no limit; deprecated in Go)",
        G_NODE,
        "N",
    )
    maximum_dead_containers: int = setting(
        "--maximum-dead-containers",
        None,
        _int,
        defaults.MAXIMUM_DEAD_CONTAINERS,
        "dead containers kept on the node in all, spread evenly over pods (negative: no limit; deprecated in"
        " Go)",
        G_NODE,
        "N",
    )
    shutdown_grace_period: float = setting(
        None,
        "shutdownGracePeriod",
        _duration,
        defaults.SHUTDOWN_GRACE_PERIOD,
        "graceful node shutdown: how long the node's shutdown waits for pods (0: off; trigger:"
        " kubelet-trio shutdown-node)",
        G_NODE,
    )
    shutdown_grace_period_critical_pods: float = setting(
        None,
        "shutdownGracePeriodCriticalPods",
        _duration,
        defaults.SHUTDOWN_GRACE_PERIOD_CRITICAL_PODS,
        "the part of shutdownGracePeriod reserved for critical pods, stopped after the others",
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
    event_qps: int = setting(
        "--event-qps",
        "eventRecordQPS",
        _non_negative_int,
        defaults.EVENT_RECORD_QPS,
        "event creations per second (a rate limit of their own, apart from --kube-api-qps; 0: no limit)",
        G_API,
        "QPS",
    )
    event_burst: int = setting(
        "--event-burst",
        "eventBurst",
        _positive_int,
        defaults.EVENT_BURST,
        "burst of the event rate limit",
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
    eviction_soft: dict[str, str] = setting(  # noqa: RUF009 - copied per instance
        "--eviction-soft",
        "evictionSoft",
        _eviction,
        {},
        "soft eviction thresholds, e.g. memory.available<1.5Gi (each needs a grace period)",
        G_NODE,
        "THRESHOLDS",
        repeatable=True,
    )
    eviction_soft_grace_period: dict[str, float] = setting(  # noqa: RUF009 - copied per instance
        "--eviction-soft-grace-period",
        "evictionSoftGracePeriod",
        _eviction_grace_periods,
        {},
        "how long each soft threshold must hold before a pod is evicted, e.g. memory.available=1m30s",
        G_NODE,
        "PERIODS",
        repeatable=True,
    )
    eviction_minimum_reclaim: dict[str, str] = setting(  # noqa: RUF009 - copied per instance
        "--eviction-minimum-reclaim",
        "evictionMinimumReclaim",
        _eviction_reclaims,
        {},
        "how far past its threshold a signal must recover before eviction stops, e.g. nodefs.available=500Mi",
        G_NODE,
        "AMOUNTS",
        repeatable=True,
    )
    eviction_pressure_transition_period: float = setting(
        "--eviction-pressure-transition-period",
        "evictionPressureTransitionPeriod",
        _duration,
        defaults.EVICTION_PRESSURE_TRANSITION_PERIOD,
        "how long a pressure condition stays reported after its threshold was last met",
        G_NODE,
        "DURATION",
    )
    eviction_max_pod_grace_period: int = setting(
        "--eviction-max-pod-grace-period",
        "evictionMaxPodGracePeriod",
        _int,
        defaults.EVICTION_MAX_POD_GRACE_PERIOD,
        "the longest grace period (seconds) a pod evicted for a soft threshold gets",
        G_NODE,
        "SECONDS",
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
    # TLS bootstrap and certificate rotation
    bootstrap_kubeconfig: str = setting(
        "--bootstrap-kubeconfig",
        None,
        _string,
        "",
        "kubeconfig with bootstrap credentials: used to request a client certificate (CSR) when"
        " --kubeconfig does not exist yet; the kubeconfig is then written there",
        G_CERTS,
        "PATH",
    )
    cert_dir: str = setting(
        "--cert-dir",
        None,
        _string,
        defaults.CERT_DIR,
        "directory of the TLS certificates and keys (client certificate from bootstrap, serving certificate)",
        G_CERTS,
        "DIR",
    )
    rotate_certificates: bool = setting(
        "--rotate-certificates",
        "rotateCertificates",
        _bool,
        False,
        "request a new client certificate from the API server as the current one nears expiry",
        G_CERTS,
        "BOOL",
    )
    rotate_server_certificates: bool = setting(
        "--rotate-server-certificates",
        "serverTLSBootstrap",
        _bool,
        False,
        "request the serving certificate from the API server (kubernetes.io/kubelet-serving CSR) and"
        " rotate it",
        G_CERTS,
        "BOOL",
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
        defaults.ANONYMOUS_AUTH,
        "let unauthenticated Kubelet API requests in as system:anonymous (off by default, also without"
        " --config, where Go's legacy flag default is on)",
        G_HTTP,
        "BOOL",
    )
    authentication_token_webhook: bool = setting(
        "--authentication-token-webhook",
        "authentication.webhook.enabled",
        _bool,
        defaults.AUTHENTICATION_WEBHOOK,
        "check Kubelet API bearer tokens with TokenReview (needs --kubeconfig)",
        G_HTTP,
        "BOOL",
        file_default=defaults.CONFIG_FILE_AUTHENTICATION_WEBHOOK,
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
        defaults.AUTHORIZATION_MODE,
        "Kubelet API authorization: AlwaysAllow or Webhook (SubjectAccessReview; needs --kubeconfig)",
        G_HTTP,
        "MODE",
        file_default=defaults.CONFIG_FILE_AUTHORIZATION_MODE,
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
    tls_min_version: str = setting(
        "--tls-min-version",
        "tlsMinVersion",
        _tls_min_version,
        defaults.TLS_MIN_VERSION,
        "the oldest TLS version the Kubelet API accepts: VersionTLS10, VersionTLS11, VersionTLS12 or"
        " VersionTLS13 (default: TLS 1.2)",
        G_HTTP,
        "VERSION",
    )
    tls_cipher_suites: tuple[str, ...] = setting(
        "--tls-cipher-suites",
        "tlsCipherSuites",
        _tls_cipher_suites,
        (),
        "the Kubelet API's TLS 1.0-1.2 cipher suites, Go's names, comma-separated (repeatable; default: the"
        " TLS library's). TLS 1.3 suites are not configurable, as in Go",
        G_HTTP,
        "NAMES",
        repeatable=True,
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
        "log verbosity: messages of V-level up to this are shown (V(4) is debug; run-once shows only"
        " warnings unless -v is given)",
        G_LOGS,
        "LEVEL",
        shorthand="v",
    )
    logging_format: str = setting(
        "--logging-format",
        "logging.format",
        _choice("text", "json"),
        "text",
        "klog's text layout or its JSON layout (one object per line)",
        G_LOGS,
        "{text,json}",
        aliases=("--log-format",),
    )
    log_flush_frequency: float = setting(
        "--log-flush-frequency",
        "logging.flushFrequency",
        _positive_duration,
        defaults.LOG_FLUSH_FREQUENCY,
        "accepted for compatibility: every log line is written when it is logged",
        G_LOGS,
        "DURATION",
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


# -- security-relevant settings accepted but not enforced ---------------------------------------------


@attrs.frozen
class Unenforced:
    """An upstream setting that protects the node or its pods, which this kubelet does not enforce.

    Its flag and its key are treated alike: the value is checked, and when it asks for the protection
    (``requests``) the kubelet starts with a warning of its own naming the setting and what stays
    unprotected (``effect``), apart from the one warning for harmless keys. A value that asks for
    nothing is what this kubelet does anyway and is accepted without a word. (Refusing them instead would
    refuse the files and command lines deployment tools write, and would be no safer than running with
    the protection named as missing: the operator decides.)
    """

    flag: str
    key: str
    parse: Callable[[Any, bool], Any]
    requests: Callable[[Any], bool]
    effect: str

    @property
    def boolean(self) -> bool:
        return self.parse is _bool


#: Go's KubeletConfiguration fields (with their flags) that guard the node or its pods and that this
#: kubelet does not implement yet (pod cgroups are the runtime's; the QoS hierarchy, node allocatable
#: enforcement and pod PID limits come with the cgroup work).
UNENFORCED: tuple[Unenforced, ...] = (
    Unenforced(
        "--pod-max-pids",
        "podPidsLimit",
        _int,
        lambda value: value > 0,
        "pods get no PID limit: one pod can exhaust the node's PIDs",
    ),
    Unenforced(
        "--protect-kernel-defaults",
        "protectKernelDefaults",
        _bool,
        lambda value: value is True,
        "the kernel tunables the kubelet depends on (vm.overcommit_memory, vm.panic_on_oom, kernel.panic,"
        " kernel.panic_on_oops, kernel.keys.*) are neither checked nor refused when they differ",
    ),
    Unenforced(
        "--cgroups-per-qos",
        "cgroupsPerQOS",
        _bool,
        lambda value: value is True,
        "no QoS cgroup hierarchy: pods are not grouped under kubepods/burstable/besteffort",
    ),
    Unenforced(
        "--enforce-node-allocatable",
        "enforceNodeAllocatable",
        _strings,
        lambda value: any(item != "none" for item in value),
        "node allocatable is not enforced with cgroups: pods together can use more than allocatable;"
        " kubeReserved/systemReserved only lower allocatable at admission",
    ),
    Unenforced(
        "--kube-reserved-cgroup",
        "kubeReservedCgroup",
        _string,
        bool,
        "the kube-reserved cgroup is not limited",
    ),
    Unenforced(
        "--system-reserved-cgroup",
        "systemReservedCgroup",
        _string,
        bool,
        "the system-reserved cgroup is not limited",
    ),
    Unenforced(
        "--seccomp-default",
        "seccompDefault",
        _bool,
        lambda value: value is True,
        "containers without a seccompProfile run as the runtime starts them, not with RuntimeDefault",
    ),
    Unenforced(
        "--enable-debugging-handlers",
        "enableDebuggingHandlers",
        _bool,
        lambda value: value is False,
        "exec, attach, port-forward, run and containerLogs stay on the Kubelet API (port: 0 turns it off)",
    ),
    Unenforced(
        "--enable-server",
        "enableServer",
        _bool,
        lambda value: value is False,
        "the Kubelet API still serves on its port (port: 0 / --port 0 turns it off)",
    ),
)
_UNENFORCED_BY_KEY = {u.key: u for u in UNENFORCED}
_UNENFORCED_BY_FLAG = {u.flag.removeprefix("--"): u for u in UNENFORCED}


# -- the command line -----------------------------------------------------------------------------------

#: ``--version`` output (Go's ``verflag``): this kubelet's Kubernetes version and, with ``=raw``, the
#: version record.
VERSION_VALUES = ("true", "false", "raw")


def _show_default(setting: Setting) -> str:
    value = setting.default
    if setting.file_default is not None:
        shown = str(value).lower() if isinstance(value, bool) else value
        file_shown = str(setting.file_default).lower() if isinstance(value, bool) else setting.file_default
        return f" (default {shown}; {file_shown} with --config)"
    if value in ("", {}, (), None) or value is False:
        return ""
    if setting.parse is _eviction:
        return f" (default {','.join(f'{k}<{v}' for k, v in value.items())})"
    if isinstance(value, bool):
        return f" (default {str(value).lower()})"
    if setting.parse in (_duration, _positive_duration, _log_monitor_interval):
        from kubelet_trio.clock import go_duration

        return f" (default {go_duration(value)})"
    return f" (default {value})"


def _flag_specs() -> dict[str, FlagSpec]:
    specs = {
        "config": FlagSpec("config"),
        "config-dir": FlagSpec("config-dir"),
        "version": FlagSpec("version", no_value="true"),
    }
    for setting in SETTINGS:
        for flag in setting.flags:
            name = flag.removeprefix("--")
            specs[name] = FlagSpec(name, setting.boolean, setting.repeatable, setting.shorthand)
    for unenforced in UNENFORCED:
        name = unenforced.flag.removeprefix("--")
        specs[name] = FlagSpec(name, unenforced.boolean, repeatable=unenforced.parse is _strings)
    return specs


_FLAGS = _flag_specs()
_SETTING_OF_FLAG = {flag.removeprefix("--"): setting for setting in SETTINGS for flag in setting.flags}
_HELP_WIDTH, _HELP_COLUMN = 110, 38


def _help_entry(flags: str, text: str) -> list[str]:
    import textwrap

    head = f"  {flags}"
    body = textwrap.wrap(text, _HELP_WIDTH - _HELP_COLUMN, break_on_hyphens=False) or [""]
    if len(head) + 2 > _HELP_COLUMN:
        return [head] + [" " * _HELP_COLUMN + line for line in body]
    return [head.ljust(_HELP_COLUMN) + body[0]] + [" " * _HELP_COLUMN + line for line in body[1:]]


def help_text() -> str:
    """``kubelet-trio --help``: the flags by group, then the configuration-file-only keys."""
    lines = [
        "Usage:",
        "  kubelet-trio [flags]",
        "  kubelet-trio COMMAND [args]        (kubelet-trio COMMAND --help for its options)",
        "",
        "Commands:",
        *(line for name, (_, help_) in SUBCOMMANDS.items() for line in _help_entry(name, help_)),
        "",
        "A Kubernetes node agent on Trio. Runs the pods of a manifest directory, a URL and/or the API server",
        "on a CRI runtime (or the simulated one) until SIGTERM/SIGINT; with --runonce it starts them, waits,",
        "prints a report and exits. Flags are read as the Go kubelet reads them (pflag): --flag=value or",
        "--flag value, a boolean alone is true (--flag=false), -v 4; no abbreviations.",
        "",
        f"{G_CONFIG}:",
        *_help_entry(
            "    --config FILE",
            f"KubeletConfiguration file (apiVersion: {CONFIG_API_VERSION}); flags override it",
        ),
        *_help_entry(
            "    --config-dir DIR",
            "drop-in KubeletConfiguration files (*.conf), applied over --config in name order",
        ),
        *_help_entry("    --version[=raw]", "print the version and exit (raw: the full version record)"),
        *_help_entry("-h, --help", "this help"),
    ]
    with_flags = [s for s in SETTINGS if s.flag is not None]  # config-file only ones: listed below
    for setting in sorted(with_flags, key=lambda s: [x.group for x in with_flags].index(s.group)):
        if f"{setting.group}:" not in lines:
            lines += ["", f"{setting.group}:"]
        short = f"-{setting.shorthand}, " if setting.shorthand else "    "
        metavar = "" if setting.boolean or not setting.metavar else f" {setting.metavar}"
        names = ", ".join(setting.flags)
        key = f" [{setting.key}]" if setting.key else ""
        lines += _help_entry(f"{short}{names}{metavar}", setting.help + _show_default(setting) + key)
    lines += ["", f"{G_UNENFORCED}:"]
    for unenforced in UNENFORCED:
        lines += _help_entry(
            f"    {unenforced.flag}", f"NOT enforced: {unenforced.effect} [{unenforced.key}]"
        )
    lines += [
        "",
        "Durations: 1m0s, 20s, 500ms (flags also take seconds). Upstream kubelet flags this kubelet does not",
        "implement are refused with a message naming them; the security-relevant ones above are accepted,",
        "as flags and as keys, with a warning for each value that asks for what is not enforced.",
        "",
        "configuration file only:",
    ]
    for setting in SETTINGS:
        if setting.flag is None:
            lines += _help_entry(f"    {setting.key}", setting.help + _show_default(setting))
    return "\n".join(lines) + "\n"


def version_text(raw: bool) -> str:
    """``--version`` (``Kubernetes v1.33.0+kubelet-trio.X``) or ``--version=raw`` (Go's version record)."""
    from kubelet_trio import version

    return (version.raw_info() if raw else f"Kubernetes {version.KUBELET_VERSION}") + "\n"


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


@attrs.frozen
class ConfigFile:
    """What a KubeletConfiguration file says: settings (dest -> value), the values of :data:`UNENFORCED`
    keys (key -> value) and the keys it has that are neither."""

    values: dict[str, Any]
    unenforced: dict[str, Any]
    unknown: tuple[str, ...]


def read_config_file(path: str, label: str = "--config") -> ConfigFile:
    """The settings of a KubeletConfiguration file; ``label`` names it in messages."""
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise OptionsError(f"cannot read {label} {path}: {err.strerror or err}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise OptionsError(f"{label} {path} is not valid YAML: {err}") from None
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise OptionsError(
            f"{label} {path}: expected a KubeletConfiguration object, got {type(data).__name__}"
        )
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if api_version != CONFIG_API_VERSION:
        raise OptionsError(
            f"{label} {path}: invalid value for apiVersion: {api_version!r} (expected {CONFIG_API_VERSION})"
        )
    if kind != CONFIG_KIND:
        raise OptionsError(f"{label} {path}: invalid value for kind: {kind!r} (expected {CONFIG_KIND})")
    body = {k: v for k, v in data.items() if k not in ("apiVersion", "kind")}
    values: dict[str, Any] = {}
    unenforced: dict[str, Any] = {}
    unknown: list[str] = []
    base = os.path.dirname(os.path.abspath(path))
    for key, raw in _flatten(body).items():
        setting = _BY_KEY.get(key)
        if setting is None:
            if key in _UNENFORCED_BY_KEY:
                try:
                    unenforced[key] = _UNENFORCED_BY_KEY[key].parse(raw, True)
                except ValueError as err:
                    raise OptionsError(f"{label} {path}: invalid value for {key}: {raw!r}: {err}") from None
            else:
                unknown.append(key)
            continue
        if key in ZERO_MEANS_DEFAULT and raw in (None, "", 0, "0", "0s", {}) and raw is not False:
            continue  # Go's defaulting fills these zero values in (kubeadm writes them)
        try:
            value = setting.parse(raw, True)
        except ValueError as err:
            raise OptionsError(f"{label} {path}: invalid value for {key}: {raw!r}: {err}") from None
        if setting.path and value and not os.path.isabs(value):
            value = os.path.join(base, value)
        values[setting.dest] = value
    return ConfigFile(values, unenforced, tuple(sorted(unknown)))


#: KubeletConfiguration keys whose zero value (``0s``, ``0``, ``""``) Go's defaulting
#: (``SetDefaults_KubeletConfiguration``) replaces with the default: written by tools such as kubeadm,
#: they mean "the default", not zero.
ZERO_MEANS_DEFAULT = frozenset(
    {
        "syncFrequency",
        "fileCheckFrequency",
        "httpCheckFrequency",
        "address",  # (port: Go defaults 0 to 10250; here port 0 turns the Kubelet API off, as the flag does)
        "healthzBindAddress",
        "authentication.webhook.cacheTTL",
        "authorization.webhook.cacheAuthorizedTTL",
        "authorization.webhook.cacheUnauthorizedTTL",
        "streamingConnectionIdleTimeout",
        "nodeStatusUpdateFrequency",
        "nodeStatusReportFrequency",
        "nodeLeaseDurationSeconds",
        "runtimeRequestTimeout",
        "maxPods",
        "kubeAPIBurst",
        "evictionPressureTransitionPeriod",
        "imageMinimumGCAge",
        "containerLogMaxSize",
        "containerRuntimeEndpoint",
        "configMapAndSecretChangeDetectionStrategy",
        "podLogsDir",
        "cgroupDriver",
        "logging.flushFrequency",
        "logging.format",
    }
)


# -- putting it together --------------------------------------------------------------------------------


def _config_dir_files(directory: str) -> list[str]:
    """The drop-ins of ``--config-dir``: its ``*.conf`` files in name order (Go's kubelet config drop-ins)."""
    try:
        names = sorted(name for name in os.listdir(directory) if name.endswith(".conf"))
    except OSError as err:
        raise OptionsError(f"cannot read --config-dir {directory}: {err.strerror or err}") from None
    return [os.path.join(directory, name) for name in names]


def _flag_values(setting: Setting, raws: list[str], flag: str) -> Any:
    raw: Any = raws if setting.repeatable else raws[-1]
    try:
        return setting.parse(raw, False)
    except ValueError as err:
        shown = ",".join(raws) if setting.repeatable else raws[-1]
        raise OptionsError(f"invalid value {shown!r} for {flag}: {err}") from None


def _not_enforced(given: Mapping[str, tuple[Any, str]]) -> list[OptionsWarning]:
    """One warning per :data:`UNENFORCED` setting whose final value (key -> (value, where it was given))
    asks for a protection this kubelet does not give."""
    warnings = []
    for unenforced in UNENFORCED:
        if unenforced.key not in given:
            continue
        value, source = given[unenforced.key]
        if unenforced.requests(value):
            warnings.append(
                OptionsWarning(
                    NOT_ENFORCED,
                    {
                        "setting": unenforced.key,
                        "flag": unenforced.flag,
                        "value": list(value) if isinstance(value, tuple) else value,
                        "source": source,
                        "effect": unenforced.effect,
                    },
                )
            )
    return warnings


def load_options(argv: Sequence[str]) -> tuple[KubeletOptions, list[OptionsWarning]]:
    """Parse flags (pflag rules, see :mod:`kubelet_trio.cliflag`), the ``--config`` file and the
    ``--config-dir`` drop-ins; returns the options and warnings to log.

    A ``--config`` file brings Go's v1beta1 defaults for what it leaves out (``Setting.file_default``);
    drop-ins alone do not, as in Go (they are merged without defaulting).

    Raises :class:`OptionsError` for invalid flags or values (an upstream kubelet flag not implemented here
    is named as such); ``--help`` and ``--version`` print to stdout and raise ``SystemExit(0)``.
    """
    try:
        parsed = parse_flags(argv, _FLAGS, unknown=unsupported_message)
    except FlagError as err:
        raise OptionsError(str(err)) from None
    if parsed.help:
        sys.stdout.write(help_text())
        raise SystemExit(0)
    if versions := parsed.values("version"):
        if versions[-1] not in VERSION_VALUES and versions[-1] not in GO_BOOL_VALUES:
            raise OptionsError(f"invalid value {versions[-1]!r} for --version: expected true, false or raw")
        if versions[-1] == "raw" or GO_BOOL_VALUES.get(versions[-1]):
            sys.stdout.write(version_text(raw=versions[-1] == "raw"))
            raise SystemExit(0)
    values: dict[str, Any] = {}
    warnings: list[OptionsWarning] = []
    unenforced: dict[str, tuple[Any, str]] = {}  # key -> (value, where it was given)
    config_path = (parsed.values("config") or [""])[-1]
    config_dir = (parsed.values("config-dir") or [""])[-1]
    files = [(config_path, "--config")] if config_path else []
    files += [(path, "--config-dir") for path in _config_dir_files(config_dir)] if config_dir else []
    for path, label in files:
        config_file = read_config_file(path, label)
        values |= config_file.values
        unenforced |= {key: (value, f"{label} {path}") for key, value in config_file.unenforced.items()}
        if config_file.unknown:
            warnings.append(
                OptionsWarning(IGNORED_KEYS, {"file": path, "keys": ", ".join(config_file.unknown)})
            )
    given: dict[str, tuple[list[str], str]] = {}  # dest -> (raw values, the flag as written)
    unenforced_flags: dict[str, list[str]] = {}
    for name, raw in parsed.items:
        if name in _UNENFORCED_BY_FLAG:
            unenforced_flags.setdefault(name, []).append(raw)
            continue
        setting = _SETTING_OF_FLAG.get(name)
        if setting is None:  # --config, --config-dir, --version
            continue
        raws, _ = given.get(setting.dest, ([], ""))
        given[setting.dest] = ([*raws, raw] if setting.repeatable else [raw], f"--{name}")
    for dest, (raws, flag) in given.items():
        values[dest] = _flag_values(_BY_DEST[dest], raws, flag)
    for name, raws in unenforced_flags.items():
        spec = _UNENFORCED_BY_FLAG[name]
        flag_value: Any = raws if spec.parse is _strings else raws[-1]
        try:
            unenforced[spec.key] = (spec.parse(flag_value, False), spec.flag)
        except ValueError as err:
            raise OptionsError(f"invalid value {','.join(raws)!r} for {spec.flag}: {err}") from None
    warnings += _not_enforced(unenforced)
    # a --config file is defaulted as v1beta1, where that differs from the flags' legacy defaults
    file_defaults = {s.dest: s.file_default for s in SETTINGS if s.file_default is not None}
    try:
        options = KubeletOptions(
            config=config_path,
            explicit=frozenset(values),
            **((file_defaults if config_path else {}) | values),
        )
    except TypeError as err:  # pragma: no cover - SETTINGS and KubeletOptions disagree
        raise OptionsError(str(err)) from None
    try:  # the soft thresholds and their grace periods go together
        parse_thresholds(
            options.eviction_hard,
            options.eviction_soft,
            options.eviction_soft_grace_period,
            options.eviction_minimum_reclaim,
        )
    except EvictionConfigError as err:
        raise OptionsError(f"invalid eviction settings: {err}") from None
    if options.image_gc_low_threshold > options.image_gc_high_threshold:
        raise OptionsError(
            f"invalid value {options.image_gc_low_threshold} for imageGCLowThresholdPercent: must not be"
            f" greater than imageGCHighThresholdPercent ({options.image_gc_high_threshold})"
        )
    return options, warnings


# -- the component configurations -----------------------------------------------------------------------


@attrs.frozen
class CertificateSettings:
    """TLS bootstrap and rotation (Go: ``pkg/kubelet/certificate``): what the certificate managers need."""

    kubeconfig: str  # written by the bootstrap when it does not hold valid credentials
    bootstrap_kubeconfig: str  # "" = no bootstrap
    cert_dir: str
    rotate_certificates: bool
    rotate_server_certificates: bool  # serverTLSBootstrap
    node_name: str


@attrs.frozen
class ComponentConfigs:
    """What the node's components are built from, derived from :class:`KubeletOptions` in one place."""

    kubelet: KubeletConfig
    api_mode: ApiModeOptions  # used when --kubeconfig is given
    run_once: RunOnceSettings  # used with --runonce
    certificates: CertificateSettings
    container_runtime: str  # remote: the endpoint's runtime; managed: a containerd of our own


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
        tls_min_version=options.tls_min_version,
        tls_cipher_suites=tuple(options.tls_cipher_suites),
        anonymous_auth=options.anonymous_auth,
        authentication_token_webhook=options.authentication_token_webhook,
        authorization_mode=options.authorization_mode,
        authentication_cache_ttl=options.authentication_token_webhook_cache_ttl,
        authorized_cache_ttl=options.authorization_webhook_cache_authorized_ttl,
        unauthorized_cache_ttl=options.authorization_webhook_cache_unauthorized_ttl,
        streaming_connection_idle_timeout=options.streaming_connection_idle_timeout,
        address=options.address,
        allowed_unsafe_sysctls=options.allowed_unsafe_sysctls,
        cluster_dns=options.cluster_dns,
        cluster_domain=options.cluster_domain,
        resolv_conf=options.resolv_conf,
        eviction_hard=dict(options.eviction_hard),
        eviction_soft=dict(options.eviction_soft),
        eviction_soft_grace_period=dict(options.eviction_soft_grace_period),
        eviction_minimum_reclaim=dict(options.eviction_minimum_reclaim),
        eviction_pressure_transition_period=options.eviction_pressure_transition_period,
        eviction_max_pod_grace_period=options.eviction_max_pod_grace_period,
        image_gc_high_threshold_percent=options.image_gc_high_threshold,
        image_gc_low_threshold_percent=options.image_gc_low_threshold,
        image_minimum_gc_age=options.minimum_image_ttl_duration,
        minimum_container_ttl_duration=options.minimum_container_ttl_duration,
        maximum_dead_containers_per_container=options.maximum_dead_containers_per_container,
        maximum_dead_containers=options.maximum_dead_containers,
        shutdown_grace_period=options.shutdown_grace_period,
        shutdown_grace_period_critical_pods=options.shutdown_grace_period_critical_pods,
        pod_infra_container_image=options.pod_infra_container_image,
        max_pods=options.max_pods,
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
        event_record_qps=options.event_qps,
        event_burst=options.event_burst,
    )
    run_once = RunOnceSettings(
        wait=options.runonce_wait,
        timeout=options.runonce_timeout,
        cleanup=options.runonce_cleanup,
        max_pods=options.max_pods,
    )
    certificates = CertificateSettings(
        kubeconfig=options.kubeconfig,
        bootstrap_kubeconfig=options.bootstrap_kubeconfig,
        cert_dir=options.cert_dir,
        rotate_certificates=options.rotate_certificates,
        rotate_server_certificates=options.rotate_server_certificates,
        node_name=options.node_name,
    )
    return ComponentConfigs(kubelet, api_mode, run_once, certificates, options.container_runtime)
