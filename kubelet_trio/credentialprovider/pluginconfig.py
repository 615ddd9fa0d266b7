"""``CredentialProviderConfig``: which exec plugins supply registry credentials (Go:
``pkg/credentialprovider/plugin/config.go``, ``plugin.go`` ``RegisterCredentialProviderPlugins``).

The file given by ``--image-credential-provider-config`` (YAML or JSON; or a directory, whose
``*.json``/``*.yaml``/``*.yml`` files are read in lexicographic order and their providers merged, a name
used twice being an error) is a ``kubelet.config.k8s.io/v1`` (or ``v1beta1``/``v1alpha1``)
``CredentialProviderConfig``::

    apiVersion: kubelet.config.k8s.io/v1
    kind: CredentialProviderConfig
    providers:
    - name: ecr-credential-provider          # the binary in --image-credential-provider-bin-dir
      matchImages: ["*.dkr.ecr.*.amazonaws.com", "registry.io:5000/team"]
      defaultCacheDuration: 12h
      apiVersion: credentialprovider.kubelet.k8s.io/v1
      args: [get-credentials]
      env: [{name: AWS_PROFILE, value: node}]

Decoding is strict (an unknown field is an error). Validation reports every problem with its field path
(``providers[0].apiVersion: Unsupported value: ...``); the paths carry the provider's index, where Go's
say ``providers.name``. ``tokenAttributes`` (service-account-token mode) is refused as by a Go kubelet
whose ``KubeletServiceAccountTokenForCredentialProviders`` gate is off.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from kubelet_trio.clock import go_duration
from kubelet_trio.credentialprovider.urls import InvalidURLError, parse_schemeless_url
from kubelet_trio.logs import go_quote

__all__ = [
    "CONFIG_API_VERSIONS",
    "PLUGIN_API_VERSIONS",
    "CredentialProvider",
    "CredentialProviderConfig",
    "CredentialProviderConfigError",
    "ExecEnvVar",
    "decode_credential_provider_config",
    "parse_go_duration",
    "read_credential_provider_config",
    "validate_credential_provider_config",
]

CONFIG_GROUP = "kubelet.config.k8s.io"
CONFIG_API_VERSIONS = tuple(f"{CONFIG_GROUP}/{v}" for v in ("v1", "v1beta1", "v1alpha1"))
PLUGIN_GROUP = "credentialprovider.kubelet.k8s.io"
#: The plugin protocol versions a provider's ``apiVersion`` may name (sorted, as Go lists them).
PLUGIN_API_VERSIONS = tuple(sorted(f"{PLUGIN_GROUP}/{v}" for v in ("v1", "v1beta1", "v1alpha1")))
CONFIG_FILE_SUFFIXES = (".json", ".yaml", ".yml")


class CredentialProviderConfigError(ValueError):
    """The credential provider configuration cannot be used; the kubelet does not start (as in Go)."""


# -- durations ------------------------------------------------------------------------------------------

_UNIT_NS = {"ns": 1, "us": 10**3, "µs": 10**3, "μs": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9}
_UNIT_NS["h"] = 3600 * 10**9
_COMPONENT = re.compile(r"([0-9]*)(?:\.([0-9]*))?(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(text: str) -> float:
    """Go's ``time.ParseDuration`` (``1h30m``, ``1.5s``, ``300ms``, ``0``), in seconds."""
    body, sign = text, 1
    if body[:1] in ("+", "-"):
        sign, body = (-1 if body[0] == "-" else 1), body[1:]
    if body == "0":
        return 0.0
    if not body:
        raise ValueError(f"time: invalid duration {go_quote(text)}")
    total, pos = 0, 0
    while pos < len(body):
        match = _COMPONENT.match(body, pos)
        if match is None or not (match[1] or match[2]):
            raise ValueError(f"time: invalid duration {go_quote(text)}")
        unit = _UNIT_NS[match[3]]
        total += int(match[1] or 0) * unit
        if match[2]:
            total += int(match[2]) * unit // 10 ** len(match[2])
        pos = match.end()
    return sign * total / 1e9


# -- the configuration ----------------------------------------------------------------------------------


@attrs.frozen
class ExecEnvVar:
    name: str
    value: str = attrs.field(repr=False)  # may be a credential of the plugin's own


@attrs.frozen
class TokenAttributes:
    """Only recorded so that validation can refuse it."""

    raw: Mapping[str, Any] = attrs.field(repr=False)


@attrs.frozen
class CredentialProvider:
    name: str
    match_images: tuple[str, ...] = ()
    default_cache_duration: float | None = None  # seconds; None when the field is absent
    api_version: str = ""
    args: tuple[str, ...] = ()
    env: tuple[ExecEnvVar, ...] = ()
    token_attributes: TokenAttributes | None = None


@attrs.frozen
class CredentialProviderConfig:
    providers: tuple[CredentialProvider, ...] = ()


def _str(value: Any, path: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise CredentialProviderConfigError(f"{path}: must be a string")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise CredentialProviderConfigError(f"{path}: must be a list")
    return value


def _object(value: Any, path: str, fields: tuple[str, ...] | None) -> dict[str, Any]:
    """An object whose keys are all in ``fields`` (any keys when None); ``path`` "" is the document."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise CredentialProviderConfigError(f"{path or '(root)'}: must be an object")
    for key in value:
        if fields is not None and key not in fields:
            where = f"{path}.{key}" if path else str(key)
            raise CredentialProviderConfigError(f"strict decoding error: unknown field {go_quote(where)}")
    return value


def _strings(value: Any, path: str) -> tuple[str, ...]:
    return tuple(_str(item, f"{path}[{i}]") for i, item in enumerate(_list(value, path)))


_PROVIDER_FIELDS = (
    "name",
    "matchImages",
    "defaultCacheDuration",
    "apiVersion",
    "args",
    "env",
    "tokenAttributes",
)


def _provider(value: Any, path: str) -> CredentialProvider:
    fields = _object(value, path, _PROVIDER_FIELDS)
    duration_text = fields.get("defaultCacheDuration")
    duration: float | None = None
    if duration_text is not None:
        duration_text = _str(duration_text, f"{path}.defaultCacheDuration")
        try:
            duration = parse_go_duration(duration_text)
        except ValueError as err:
            raise CredentialProviderConfigError(f"{path}.defaultCacheDuration: {err}") from None
    env = []
    for i, item in enumerate(_list(fields.get("env"), f"{path}.env")):
        where = f"{path}.env[{i}]"
        entry = _object(item, where, ("name", "value"))
        name, value = _str(entry.get("name"), f"{where}.name"), _str(entry.get("value"), f"{where}.value")
        env.append(ExecEnvVar(name, value))
    token = fields.get("tokenAttributes")
    return CredentialProvider(
        name=_str(fields.get("name"), f"{path}.name"),
        match_images=_strings(fields.get("matchImages"), f"{path}.matchImages"),
        default_cache_duration=duration,
        api_version=_str(fields.get("apiVersion"), f"{path}.apiVersion"),
        args=_strings(fields.get("args"), f"{path}.args"),
        env=tuple(env),
        token_attributes=(
            None if token is None else TokenAttributes(_object(token, f"{path}.tokenAttributes", None))
        ),
    )


def _parse_document(data: bytes) -> Any:
    import yaml  # YAML is a superset of the JSON the file may also be

    try:
        return yaml.safe_load(data)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or "invalid YAML"
        raise CredentialProviderConfigError(f"{problem}{where}") from None


def decode_credential_provider_config(data: bytes) -> CredentialProviderConfig:
    """Decode one file's content strictly (Go: ``decode``)."""
    document = _parse_document(data)
    if not isinstance(document, dict):
        raise CredentialProviderConfigError("the configuration must be an object")
    api_version, kind = document.get("apiVersion"), document.get("kind")
    if not kind:
        raise CredentialProviderConfigError("Object 'Kind' is missing")
    if not api_version:
        raise CredentialProviderConfigError("Object 'apiVersion' is missing")
    if kind != "CredentialProviderConfig":
        raise CredentialProviderConfigError(f"failed to decode {go_quote(str(kind))} (wrong Kind)")
    if api_version not in CONFIG_API_VERSIONS:
        group = str(api_version).partition("/")[0]
        if group != CONFIG_GROUP:
            raise CredentialProviderConfigError(
                f"failed to decode CredentialProviderConfig, unexpected Group: {group}"
            )
        raise CredentialProviderConfigError(f"unsupported apiVersion {go_quote(str(api_version))}")
    fields = _object(document, "", ("apiVersion", "kind", "providers"))
    providers = _list(fields.get("providers"), "providers")
    return CredentialProviderConfig(tuple(_provider(p, f"providers[{i}]") for i, p in enumerate(providers)))


def _config_files(path: str) -> list[str]:
    if not stat.S_ISDIR(os.stat(path).st_mode):
        return [path]
    files = sorted(
        os.path.join(path, name)
        for name in os.listdir(path)
        if os.path.splitext(name)[1] in CONFIG_FILE_SUFFIXES and not os.path.isdir(os.path.join(path, name))
    )
    if not files:
        raise CredentialProviderConfigError(f"no configuration files found in directory {go_quote(path)}")
    return files


def read_credential_provider_config(path: str) -> CredentialProviderConfig:
    """Read and decode ``path`` (a file, or a directory of them). Blocking."""
    if not path:
        raise CredentialProviderConfigError("credential provider config path is empty")
    try:
        files = _config_files(path)
    except OSError as err:
        message = f"unable to access path {go_quote(path)}: {err.strerror}"
        raise CredentialProviderConfigError(message) from None
    providers: list[CredentialProvider] = []
    seen: set[str] = set()
    for file in files:
        try:
            with open(file, "rb") as stream:
                data = stream.read()
        except OSError as err:
            message = f"unable to read file {go_quote(file)}: {err.strerror}"
            raise CredentialProviderConfigError(message) from None
        try:
            config = decode_credential_provider_config(data)
        except CredentialProviderConfigError as err:
            raise CredentialProviderConfigError(f"error decoding config {go_quote(file)}: {err}") from None
        for provider in config.providers:
            if provider.name in seen:
                raise CredentialProviderConfigError(
                    f"duplicate provider name {go_quote(provider.name)} found in configuration file(s)"
                )
            seen.add(provider.name)
            providers.append(provider)
    return CredentialProviderConfig(tuple(providers))


# -- validation -----------------------------------------------------------------------------------------


def _quoted_list(values: tuple[str, ...]) -> str:
    return ", ".join(go_quote(v) for v in values)


def validate_credential_provider_config(config: CredentialProviderConfig) -> list[str]:
    """Every problem, as ``field.path: message`` (Go: ``validateCredentialProviderConfig``)."""
    errors: list[str] = []
    add: Callable[[str], None] = errors.append
    if not config.providers:
        add("providers: Required value: at least 1 item in plugins is required")
    seen: set[str] = set()
    for i, provider in enumerate(config.providers):
        path = f"providers[{i}]"
        name = go_quote(provider.name)
        if "/" in provider.name:
            add(f"{path}.name: Invalid value: {name}: provider name cannot contain '/'")
        if " " in provider.name:
            add(f"{path}.name: Invalid value: {name}: provider name cannot contain spaces")
        if provider.name == ".":
            add(f"{path}.name: Invalid value: {name}: provider name cannot be '.'")
        if provider.name == "..":
            add(f"{path}.name: Invalid value: {name}: provider name cannot be '..'")
        if provider.name in seen:
            add(f"{path}.name: Duplicate value: {name}")
        seen.add(provider.name)
        if not provider.api_version:
            add(f"{path}.apiVersion: Required value")
        elif provider.api_version not in PLUGIN_API_VERSIONS:
            add(
                f"{path}.apiVersion: Unsupported value: {go_quote(provider.api_version)}: "
                f"supported values: {_quoted_list(PLUGIN_API_VERSIONS)}"
            )
        if not provider.match_images:
            add(f"{path}.matchImages: Required value: at least 1 item in matchImages is required")
        for j, image in enumerate(provider.match_images):
            try:
                parse_schemeless_url(image)
            except InvalidURLError as err:
                shown = go_quote(image)
                add(f"{path}.matchImages[{j}]: Invalid value: {shown}: match image is invalid: {err}")
        if provider.default_cache_duration is None:
            add(f"{path}.defaultCacheDuration: Required value")
        elif provider.default_cache_duration < 0:
            shown = go_quote(go_duration(provider.default_cache_duration))
            add(f"{path}.defaultCacheDuration: Invalid value: {shown}: must be greater than or equal to 0")
        if provider.token_attributes is not None:
            add(
                f"{path}.tokenAttributes: Forbidden: tokenAttributes is not supported when "
                "KubeletServiceAccountTokenForCredentialProviders feature gate is disabled"
            )
    return errors


def aggregate(messages: list[str]) -> str:
    """``utilerrors.NewAggregate(...).Error()``: one message as it is, several de-duplicated in brackets."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"
