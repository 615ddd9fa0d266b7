"""``/configz``: the effective ``KubeletConfiguration``, as the Go kubelet serves it.

Go (``cmd/kubelet/app/server.go`` ``setConfigz``) converts its internal configuration to
``kubelet.config.k8s.io/v1beta1`` and serves ``{"kubeletconfig": {...}}`` with no ``kind`` or
``apiVersion`` (tools add them back to reuse the answer as a ``--config`` file). Here the configuration is
built from the settings of the options' class (:func:`kubelet_trio.options.settings.settings_of`): every
setting with a configuration key, nested where the key is dotted (``authentication.webhook.cacheTTL``),
in the file's own spelling; an unset optional setting (``maxParallelImagePulls``) is left out, as Go
omits a nil pointer. Each value's spelling is checked against the setting's own file parser, so the
answer read back through ``--config`` gives the same options: durations as Go durations (``2m0s``),
quantities and maps as written, lists as lists.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubelet_trio.clock import go_duration
from kubelet_trio.options.settings import (
    CONFIG_API_VERSION,
    CONFIG_KIND,
    KubeletOptions,
    Setting,
    settings_of,
)

__all__ = ["configz_body", "kubelet_configuration"]


def _candidates(value: Any) -> list[Any]:
    """Spellings of a typed value in the file, most specific first."""
    if isinstance(value, bool):
        return [value]
    if isinstance(value, float):
        return [go_duration(value), int(value) if value.is_integer() else value, value]
    if isinstance(value, tuple | list):
        items = [dict(v) if isinstance(v, Mapping) else v for v in value]
        return [items]
    if isinstance(value, Mapping):
        plain = {k: (list(v) if isinstance(v, tuple | list) else v) for k, v in value.items()}
        durations = {k: go_duration(v) if isinstance(v, float) else v for k, v in plain.items()}
        return [durations, plain]
    return [value]


def _encode(setting: Setting, value: Any) -> Any:
    """The first spelling that the setting's file parser reads back as ``value``."""
    parse: Callable[[Any, bool], Any] = setting.parse
    for candidate in _candidates(value):
        try:
            if parse(candidate, True) == value:
                return candidate
        except ValueError:
            continue
    raise ValueError(f"configz: no file spelling of {setting.key} reads back as {value!r}")


def kubelet_configuration(options: KubeletOptions, *, with_type: bool = False) -> dict[str, Any]:
    """The ``KubeletConfiguration`` of ``options`` (``with_type``: with ``kind`` and ``apiVersion``, a
    valid ``--config`` file)."""
    config: dict[str, Any] = {}
    if with_type:
        config = {"kind": CONFIG_KIND, "apiVersion": CONFIG_API_VERSION}
    for setting in settings_of(type(options)):
        if not setting.key:
            continue
        value = getattr(options, setting.dest)
        if value is None:  # unset (Go: a nil pointer, omitted)
            continue
        *parents, leaf = setting.key.split(".")
        node = config
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = _encode(setting, value)
    return config


def configz_body(options: KubeletOptions) -> dict[str, Any]:
    """``/configz``'s answer."""
    return {"kubeletconfig": kubelet_configuration(options)}
