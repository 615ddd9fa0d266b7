"""Value parsers of the settings: ``(value, from_file) -> typed value``.

``from_file`` is True for a ``KubeletConfiguration`` value (YAML-typed: a number is a number) and False
for a flag (a string, or the list of a repeatable flag's values). Bad input raises ``ValueError`` whose
text says what was expected; the loader adds the flag or key and the value.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from kubelet_trio import cliflag
from kubelet_trio.api import Quantity
from kubelet_trio.config.http import parse_manifest_url_headers
from kubelet_trio.sysctl import SysctlAllowlist

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


def duration(value: Any, from_file: bool) -> float:
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


def positive_duration(value: Any, from_file: bool) -> float:
    seconds = duration(value, from_file)
    if seconds <= 0:
        raise ValueError("must be greater than zero")
    return seconds


def integer(value: Any, from_file: bool) -> int:
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


def non_negative_int(value: Any, from_file: bool) -> int:
    number = integer(value, from_file)
    if number < 0:
        raise ValueError("must not be negative")
    return number


def positive_int(value: Any, from_file: bool) -> int:
    number = integer(value, from_file)
    if number < 1:
        raise ValueError("must be greater than zero")
    return number


def port(value: Any, from_file: bool) -> int:
    number = integer(value, from_file)
    if not 0 <= number <= 65535:
        raise ValueError("expected a port number 0-65535 (0 = disabled)")
    return number


def log_max_size(value: Any, from_file: bool) -> str:
    """containerLogMaxSize: a quantity string (``10Mi``); negative turns rotation off, as in Go."""
    if not isinstance(value, str):
        raise ValueError('expected a quantity string such as "10Mi"')
    try:
        Quantity(value).int_value()
    except ValueError:
        raise ValueError("expected a quantity such as 10Mi or 500Ki") from None
    return value


def percent(value: Any, from_file: bool) -> int:
    number = integer(value, from_file)
    if not 0 <= number <= 100:
        raise ValueError("expected a percentage 0-100")
    return number


def log_max_files(value: Any, from_file: bool) -> int:
    number = integer(value, from_file)
    if number < 2:
        raise ValueError("must be at least 2 (the current file and one rotated file)")
    return number


def log_monitor_interval(value: Any, from_file: bool) -> float:
    seconds = duration(value, from_file)
    if seconds < 3:
        raise ValueError("must be at least 3s")
    return seconds


def verbosity(value: Any, from_file: bool) -> int:
    number = integer(value, from_file)
    if not 0 <= number <= 10:
        raise ValueError("expected a verbosity level 0-10")
    return number


def ip(value: Any, from_file: bool) -> str:
    try:
        return str(ipaddress.ip_address(str(value).strip()))
    except ValueError:
        raise ValueError("expected an IP address") from None


def ip_list(value: Any, from_file: bool) -> tuple[str, ...]:
    """File: a list of IPs; flags: comma-separated (repeatable)."""
    if from_file:
        if not isinstance(value, list):
            raise ValueError("expected a list of IP addresses")
        items = [str(v) for v in value]
    else:
        items = [
            part for item in (value if isinstance(value, list) else [value]) for part in str(item).split(",")
        ]
    return tuple(ip(item, from_file) for item in items if item.strip())


def string(value: Any, from_file: bool) -> str:
    if not isinstance(value, str):
        raise ValueError("expected a string")
    return value


def strings(value: Any, from_file: bool) -> tuple[str, ...]:
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


def tls_min_version(value: Any, from_file: bool) -> str:
    """tlsMinVersion: one of Go's names, VersionTLS10 ... VersionTLS13 ("": the default, TLS 1.2)."""
    name = string(value, from_file).strip()
    if name:
        cliflag.tls_version(name)  # Go's error for any other name
    return name


def tls_cipher_suites(value: Any, from_file: bool) -> tuple[str, ...]:
    """tlsCipherSuites: Go's cipher suite names (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, ...)."""
    names = strings(value, from_file)
    cliflag.tls_cipher_suites(names)  # Go's error names the first unknown one
    return names


def cidr(value: Any, from_file: bool) -> str:
    """An IPv4 network such as 198.18.5.0/24 ("" = unset)."""
    text = string(value, from_file).strip()
    if not text:
        return ""
    try:
        network = ipaddress.ip_network(text)
    except ValueError:
        raise ValueError("expected an IPv4 CIDR such as 198.18.5.0/24") from None
    if network.version != 4 or network.prefixlen > 30:
        raise ValueError("expected an IPv4 CIDR with room for pods (a prefix of /30 or shorter)")
    return str(network)


def endpoint(value: Any, from_file: bool) -> str:
    text = string(value, from_file)
    if text and not text.startswith(("unix://", "/")):
        raise ValueError("expected a unix socket endpoint such as unix:///run/containerd/containerd.sock")
    return text if not text.startswith("/") else f"unix://{text}"


def boolean(value: Any, from_file: bool) -> bool:
    """File: a YAML boolean; flags: what Go's ``strconv.ParseBool`` accepts (``--flag`` alone is true)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and not from_file:
        return cliflag.parse_go_bool(value)
    raise ValueError("expected true or false")


def choice(*choices: str) -> Callable[[Any, bool], str]:
    def parse(value: Any, from_file: bool) -> str:
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return str(value)

    return parse


def headers(value: Any, from_file: bool) -> dict[str, list[str]]:
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


def labels(value: Any, from_file: bool) -> dict[str, str]:
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


def positive_number(value: Any, from_file: bool) -> float:
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


def reserved(value: Any, from_file: bool) -> dict[str, str]:
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


def eviction(value: Any, from_file: bool) -> dict[str, str]:
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


def eviction_grace_periods(value: Any, from_file: bool) -> dict[str, float]:
    """evictionSoftGracePeriod: ``memory.available=1m30s`` or a map of signal to duration (seconds)."""
    periods: dict[str, float] = {}
    for signal, text in _pairs(value, from_file, "=").items():
        if signal not in EVICTION_SIGNALS:
            raise ValueError(f"unknown eviction signal {signal!r} (expected {', '.join(EVICTION_SIGNALS)})")
        try:
            periods[signal] = duration(text, from_file)
        except ValueError:
            raise ValueError(f"{signal}: {text!r} is not a duration") from None
        if periods[signal] < 0:
            raise ValueError(f"{signal}: {text!r} must not be negative")
    return periods


def eviction_reclaims(value: Any, from_file: bool) -> dict[str, str]:
    """evictionMinimumReclaim: ``memory.available=0Mi,nodefs.available=500Mi`` or a map."""
    return eviction(_pairs(value, from_file, "="), True)


def sysctl_patterns(value: Any, from_file: bool) -> tuple[str, ...]:
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


def taints(value: Any, from_file: bool) -> tuple[dict[str, str], ...]:
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


def optional_int(value: Any, from_file: bool) -> int | None:
    """An integer that may be left unset (``null`` in the file, as Go's ``*int32``)."""
    return None if value is None else integer(value, from_file)
