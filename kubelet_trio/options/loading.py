"""Loading the settings: flags over ``--config`` over the built-in defaults → one :class:`KubeletOptions`.

Go: ``cmd/kubelet/app/options`` and ``pkg/kubelet/apis/config/v1beta1``. Flags carry the Go kubelet's
names where the concept exists; the file (``--config``, ``apiVersion: kubelet.config.k8s.io/v1beta1``,
``kind: KubeletConfiguration``) uses the upstream keys. Precedence: built-in defaults < file < flags.

- Durations are Go duration strings (``2m``, ``1m30s``, ``500ms``); flags also take plain seconds.
- A ``--config`` file is defaulted as Go defaults ``kubelet.config.k8s.io/v1beta1``: keys it leaves out
  take the v1beta1 default, which for the Kubelet API's authorization and webhook authentication differs
  from the flags' own (``Setting.file_default``; see :mod:`kubelet_trio.defaults`); ``serializeImagePulls``
  left out of a file that sets ``maxParallelImagePulls`` above 1 is false, as Go defaults it.
- Unknown keys in the file are reported as one warning naming them; they do not stop the kubelet.
- Security-relevant upstream settings this kubelet does not enforce (:data:`UNENFORCED`:
  ``protectKernelDefaults``, ``seccompDefault``, ...) are accepted the same
  way as a flag and as a key: a value that asks for the protection gets a warning of its own, one per
  setting, naming it as not enforced; a value that asks for nothing (``protectKernelDefaults: false``)
  is accepted silently.
- An invalid value (file or flag) is an :class:`OptionsError` naming the key or flag and the value; the
  CLI prints it and exits with status 2. Checks across settings are :mod:`~kubelet_trio.options.validation`'s.
- Relative ``staticPodPath``/``podLogsDir`` in the file are relative to the file's directory (as
  upstream resolves them).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from kubelet_trio.cliflag import GO_BOOL_VALUES, FlagError, FlagSpec, parse_flags
from kubelet_trio.options import parsers
from kubelet_trio.options.errors import IGNORED_KEYS, NOT_ENFORCED, OptionsError, OptionsWarning
from kubelet_trio.options.help import VERSION_VALUES, help_text, version_text
from kubelet_trio.options.settings import (
    CONFIG_API_VERSION,
    CONFIG_KIND,
    UNENFORCED,
    KubeletOptions,
    Setting,
    settings_of,
)
from kubelet_trio.options.validation import validate
from kubelet_trio.upstream_flags import unsupported_message

__all__ = ["ZERO_MEANS_DEFAULT", "ConfigFile", "load_options", "read_config_file"]

_UNENFORCED_BY_KEY = {u.key: u for u in UNENFORCED}
_UNENFORCED_BY_FLAG = {u.flag.removeprefix("--"): u for u in UNENFORCED}


@attrs.frozen
class _Lookups:
    """The settings of one options class by field, by configuration key and by flag."""

    settings: tuple[Setting, ...]
    by_dest: dict[str, Setting]
    by_key: dict[str, Setting]
    by_flag: dict[str, Setting]  # without the dashes, aliases included
    flags: dict[str, FlagSpec]  # the command line's flags: the settings', --config..., the unenforced


def _lookups(options_class: type[KubeletOptions]) -> _Lookups:
    if (known := _LOOKUPS.get(options_class)) is not None:
        return known
    settings = settings_of(options_class)
    specs = {
        "config": FlagSpec("config"),
        "config-dir": FlagSpec("config-dir"),
        "version": FlagSpec("version", no_value="true"),
    }
    for setting in settings:
        for flag in setting.flags:
            name = flag.removeprefix("--")
            specs[name] = FlagSpec(name, setting.boolean, setting.repeatable, setting.shorthand)
    for unenforced in UNENFORCED:
        name = unenforced.flag.removeprefix("--")
        specs[name] = FlagSpec(name, unenforced.boolean, repeatable=unenforced.parse is parsers.strings)
    lookups = _LOOKUPS[options_class] = _Lookups(
        settings=settings,
        by_dest={s.dest: s for s in settings},
        by_key={s.key: s for s in settings if s.key},
        by_flag={flag.removeprefix("--"): s for s in settings for flag in s.flags},
        flags=specs,
    )
    return lookups


_LOOKUPS: dict[type[KubeletOptions], _Lookups] = {}


# -- the file -------------------------------------------------------------------------------------------


def _flatten(data: Mapping[str, Any], keys: Mapping[str, Setting], prefix: str = "") -> dict[str, Any]:
    """Nested mappings → dotted keys, but only where we know nested ``keys`` (``logging.*``)."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and any(k.startswith(dotted + ".") for k in keys):
            flat.update(_flatten(value, keys, dotted + "."))
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


def read_config_file(
    path: str, label: str = "--config", options_class: type[KubeletOptions] = KubeletOptions
) -> ConfigFile:
    """The settings (of ``options_class``) in a KubeletConfiguration file; ``label`` names it in messages."""
    by_key = _lookups(options_class).by_key
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise OptionsError(f"cannot read {label} {path}: {err.strerror or err}") from None
    import yaml  # only a node given a config file reads YAML here

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
    for key, raw in _flatten(body, by_key).items():
        setting = by_key.get(key)
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
        "registryBurst",
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


def load_options(
    argv: Sequence[str], options_class: type[KubeletOptions] = KubeletOptions
) -> tuple[KubeletOptions, list[OptionsWarning]]:
    """Parse flags (pflag rules, see :mod:`kubelet_trio.cliflag`), the ``--config`` file and the
    ``--config-dir`` drop-ins into an ``options_class`` (its settings: see
    :func:`~kubelet_trio.options.settings.settings_of`); returns the options and warnings to log.

    A ``--config`` file brings Go's v1beta1 defaults for what it leaves out (``Setting.file_default``);
    drop-ins alone do not, as in Go (they are merged without defaulting).

    Raises :class:`OptionsError` for invalid flags or values (an upstream kubelet flag not implemented here
    is named as such); ``--help`` and ``--version`` print to stdout and raise ``SystemExit(0)``.
    """
    lookups = _lookups(options_class)
    try:
        parsed = parse_flags(argv, lookups.flags, unknown=unsupported_message)
    except FlagError as err:
        raise OptionsError(str(err)) from None
    if parsed.help:
        sys.stdout.write(help_text(options_class))
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
        config_file = read_config_file(path, label, options_class)
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
        setting = lookups.by_flag.get(name)
        if setting is None:  # --config, --config-dir, --version
            continue
        raws, _ = given.get(setting.dest, ([], ""))
        given[setting.dest] = ([*raws, raw] if setting.repeatable else [raw], f"--{name}")
    for dest, (raws, flag) in given.items():
        values[dest] = _flag_values(lookups.by_dest[dest], raws, flag)
    for name, raws in unenforced_flags.items():
        spec = _UNENFORCED_BY_FLAG[name]
        flag_value: Any = raws if spec.parse is parsers.strings else raws[-1]
        try:
            unenforced[spec.key] = (spec.parse(flag_value, False), spec.flag)
        except ValueError as err:
            raise OptionsError(f"invalid value {','.join(raws)!r} for {spec.flag}: {err}") from None
    warnings += _not_enforced(unenforced)
    # a --config file is defaulted as v1beta1, where that differs from the flags' legacy defaults
    file_defaults = {s.dest: s.file_default for s in lookups.settings if s.file_default is not None}
    explicit = frozenset(values)
    if "serialize_image_pulls" not in values and (values.get("max_parallel_image_pulls") or 0) > 1:
        values["serialize_image_pulls"] = False  # Go defaults it from the file's maxParallelImagePulls
    try:
        options = options_class(
            config=config_path,
            explicit=explicit,
            **((file_defaults if config_path else {}) | values),
        )
    except TypeError as err:  # pragma: no cover - the settings and the options class disagree
        raise OptionsError(str(err)) from None
    validate(options)
    return options, warnings
