"""Kubernetes ``$(VAR)`` expansion of a container's command, args and ``subPathExpr`` (Go:
``third_party/forked/golang/expansion``, ``container/helpers.go`` ``ExpandContainerCommandAndArgs`` /
``ExpandContainerCommandOnlyStatic`` / ``ExpandContainerVolumeMounts``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from kubelet_trio.api import Container, EnvVar, VolumeMount
from kubelet_trio.objects import EnvError

__all__ = [
    "expand",
    "expand_command_and_args",
    "expand_command_only_static",
    "expand_subpath_expr",
    "mapping_for",
]

_OPERATOR = "$"


_OPENER = "("


_CLOSER = ")"


def mapping_for(*contexts: Mapping[str, str]) -> Callable[[str], str]:
    """Look a name up in each context in turn; an unknown name stays ``$(NAME)``."""

    def mapping(name: str) -> str:
        for context in contexts:
            if name in context:
                return context[name]
        return f"{_OPERATOR}{_OPENER}{name}{_CLOSER}"

    return mapping


def _read_variable(text: str) -> tuple[str, bool, int]:
    """``(read, is_variable, advance)`` for the text right after a ``$``."""
    first = text[0]
    if first == _OPERATOR:
        return _OPERATOR, False, 1  # "$$" is an escaped "$"
    if first == _OPENER:
        closer = text.find(_CLOSER, 1)
        if closer != -1:
            return text[1:closer], True, closer + 1
        return _OPERATOR + _OPENER, False, 1  # incomplete reference: kept as written
    return _OPERATOR + first, False, 1


def expand(text: str, mapping: Callable[[str], str]) -> str:
    """Kubernetes ``$(VAR)`` expansion: ``$(NAME)`` is replaced through ``mapping``, ``$$`` becomes ``$``,
    anything else is left as written."""
    out: list[str] = []
    checkpoint = 0
    cursor = 0
    while cursor < len(text):
        if text[cursor] == _OPERATOR and cursor + 1 < len(text):
            out.append(text[checkpoint:cursor])
            read, is_variable, advance = _read_variable(text[cursor + 1 :])
            out.append(mapping(read) if is_variable else read)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    return "".join(out) + text[checkpoint:]


def expand_command_and_args(
    container: Container, envs: Sequence[tuple[str, str]]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``ExpandContainerCommandAndArgs`` against the container's final environment."""
    mapping = mapping_for(dict(envs))
    command = tuple(expand(c, mapping) for c in container.command or ())
    args = tuple(expand(a, mapping) for a in container.args or ())
    return command, args


def expand_command_only_static(command: Sequence[str], env: Iterable[EnvVar] | None) -> list[str]:
    """``ExpandContainerCommandOnlyStatic`` (exec probes): only ``env[].value`` is known; variables from
    ``valueFrom`` expand to the empty string."""
    mapping = mapping_for({e.name or "": e.value or "" for e in env or ()})
    return [expand(c, mapping) for c in command]


def expand_subpath_expr(mount: VolumeMount, envs: Sequence[tuple[str, str]]) -> str:
    """``ExpandContainerVolumeMounts``: a reference to an unset or empty variable is an error."""
    values = dict(envs)
    missing: set[str] = set()

    def mapping(name: str) -> str:
        value = values.get(name, "")
        if not value:
            missing.add(name)
        return value

    expanded = expand(mount.sub_path_expr or "", mapping)
    if missing:
        raise EnvError(f"missing value for {', '.join(sorted(missing))}")
    return expanded
