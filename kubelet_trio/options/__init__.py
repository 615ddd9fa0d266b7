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
