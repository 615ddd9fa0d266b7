"""The kubelet's settings: command-line flags and the ``KubeletConfiguration`` file → one validated
:class:`KubeletOptions`, and the component configurations derived from it.

- :mod:`~kubelet_trio.options.parsers`: the value parsers (durations, quantities, lists, maps, ...);
- :mod:`~kubelet_trio.options.settings`: the settings table (each setting declared once, with keywords);
- :mod:`~kubelet_trio.options.loading`: flags, the file, drop-ins and precedence (:func:`load_options`);
- :mod:`~kubelet_trio.options.validation`: checks across settings;
- :mod:`~kubelet_trio.options.help`: ``--help`` and ``--version``;
- :mod:`~kubelet_trio.options.component`: :func:`component_configs`, called once per process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.options.component import (
        AllocatableSettings,
        ApiClientSettings,
        CertificateSettings,
        ComponentConfigs,
        CredentialProviderSettings,
        RuntimeSettings,
        SourceSettings,
        component_configs,
    )
    from kubelet_trio.options.errors import IGNORED_KEYS, NOT_ENFORCED, OptionsError, OptionsWarning
    from kubelet_trio.options.help import help_text, version_text
    from kubelet_trio.options.loading import load_options, read_config_file
    from kubelet_trio.options.parsers import parse_duration
    from kubelet_trio.options.settings import (
        CONFIG_API_VERSION,
        CONFIG_KIND,
        SETTINGS,
        UNENFORCED,
        KubeletOptions,
        Setting,
        Unenforced,
    )

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "AllocatableSettings": "kubelet_trio.options.component",
    "ApiClientSettings": "kubelet_trio.options.component",
    "CertificateSettings": "kubelet_trio.options.component",
    "ComponentConfigs": "kubelet_trio.options.component",
    "CredentialProviderSettings": "kubelet_trio.options.component",
    "RuntimeSettings": "kubelet_trio.options.component",
    "SourceSettings": "kubelet_trio.options.component",
    "component_configs": "kubelet_trio.options.component",
    "IGNORED_KEYS": "kubelet_trio.options.errors",
    "NOT_ENFORCED": "kubelet_trio.options.errors",
    "OptionsError": "kubelet_trio.options.errors",
    "OptionsWarning": "kubelet_trio.options.errors",
    "help_text": "kubelet_trio.options.help",
    "version_text": "kubelet_trio.options.help",
    "load_options": "kubelet_trio.options.loading",
    "read_config_file": "kubelet_trio.options.loading",
    "parse_duration": "kubelet_trio.options.parsers",
    "CONFIG_API_VERSION": "kubelet_trio.options.settings",
    "CONFIG_KIND": "kubelet_trio.options.settings",
    "SETTINGS": "kubelet_trio.options.settings",
    "UNENFORCED": "kubelet_trio.options.settings",
    "KubeletOptions": "kubelet_trio.options.settings",
    "Setting": "kubelet_trio.options.settings",
    "Unenforced": "kubelet_trio.options.settings",
}

__all__ = [
    "CONFIG_API_VERSION",
    "CONFIG_KIND",
    "IGNORED_KEYS",
    "NOT_ENFORCED",
    "SETTINGS",
    "UNENFORCED",
    "AllocatableSettings",
    "ApiClientSettings",
    "CertificateSettings",
    "ComponentConfigs",
    "CredentialProviderSettings",
    "KubeletOptions",
    "OptionsError",
    "OptionsWarning",
    "RuntimeSettings",
    "Setting",
    "SourceSettings",
    "Unenforced",
    "component_configs",
    "help_text",
    "load_options",
    "parse_duration",
    "read_config_file",
    "version_text",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
