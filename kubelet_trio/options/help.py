"""``kubelet-trio --help`` and ``--version``: derived from the settings table."""

from __future__ import annotations

import textwrap

from kubelet_trio.options import parsers
from kubelet_trio.options.settings import (
    CONFIG_API_VERSION,
    G_CONFIG,
    G_UNENFORCED,
    UNENFORCED,
    KubeletOptions,
    Setting,
    settings_of,
)
from kubelet_trio.subcommands import SUBCOMMANDS

__all__ = ["VERSION_VALUES", "help_text", "version_text"]

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
    if setting.parse is parsers.eviction:
        return f" (default {','.join(f'{k}<{v}' for k, v in value.items())})"
    if isinstance(value, bool):
        return f" (default {str(value).lower()})"
    if setting.parse in (parsers.duration, parsers.positive_duration, parsers.log_monitor_interval):
        from kubelet_trio.clock import go_duration

        return f" (default {go_duration(value)})"
    return f" (default {value})"


_HELP_WIDTH, _HELP_COLUMN = 110, 38


def _help_entry(flags: str, text: str) -> list[str]:
    head = f"  {flags}"
    body = textwrap.wrap(text, _HELP_WIDTH - _HELP_COLUMN, break_on_hyphens=False) or [""]
    if len(head) + 2 > _HELP_COLUMN:
        return [head] + [" " * _HELP_COLUMN + line for line in body]
    return [head.ljust(_HELP_COLUMN) + body[0]] + [" " * _HELP_COLUMN + line for line in body[1:]]


def help_text(options_class: type[KubeletOptions] = KubeletOptions) -> str:
    """``kubelet-trio --help``: the flags by group, then the configuration-file-only keys (the settings
    of ``options_class``)."""
    settings = settings_of(options_class)
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
    with_flags = [s for s in settings if s.flag is not None]  # config-file only ones: listed below
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
    for setting in settings:
        if setting.flag is None:
            lines += _help_entry(f"    {setting.key}", setting.help + _show_default(setting))
    return "\n".join(lines) + "\n"


def version_text(raw: bool) -> str:
    """``--version`` (``Kubernetes v1.36.0+kubelet-trio.X``) or ``--version=raw`` (Go's version record)."""
    from kubelet_trio import version

    return (version.raw_info() if raw else f"Kubernetes {version.KUBELET_VERSION}") + "\n"
