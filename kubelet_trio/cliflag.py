"""Command-line parsing with the rules of Go's pflag, which the Go kubelet uses (``spf13/pflag`` with
``component-base/cli/flag.WordSepNormalizeFunc``), so command lines written for it mean the same here.

- Long flags only by their full name (no abbreviations); ``_`` in a name reads as ``-``.
- ``--flag=value`` or ``--flag value``; the next argument is taken as the value even when it starts
  with ``-``.
- A boolean flag alone means true and takes a value only after ``=`` (``--flag=false``); the next
  argument is never its value.
- One-letter shorthands: ``-v 4``, ``-v=4`` and ``-v4``.
- ``--`` ends the flags; ``-h``/``--help`` asks for help.
- A flag given twice: the last value wins, except for repeatable flags (lists and maps), which collect
  (the caller applies that rule to the ordered values).

Parsing is separate from meaning: the result is the raw strings per flag, which the caller converts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import attrs

__all__ = [
    "GO_BOOL_VALUES",
    "FlagError",
    "FlagSpec",
    "ParsedFlags",
    "normalize",
    "parse_flags",
    "parse_go_bool",
]

#: strconv.ParseBool's accepted spellings.
GO_BOOL_VALUES: Mapping[str, bool] = {
    **dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
    **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False),
}


class FlagError(ValueError):
    """A command line pflag would refuse; the message says why, naming the argument."""


def parse_go_bool(text: str) -> bool:
    """Go's ``strconv.ParseBool``."""
    try:
        return GO_BOOL_VALUES[text]
    except KeyError:
        raise ValueError("expected true or false") from None


@attrs.frozen
class FlagSpec:
    """One flag: its long name (no dashes), and how it takes values."""

    name: str
    boolean: bool = False  # pflag's NoOptDefVal "true": alone means true, a value only after "="
    repeatable: bool = False  # for the caller: values collect rather than replace
    shorthand: str = ""
    no_value: str | None = None  # the value when given alone (booleans: "true")

    @property
    def implicit(self) -> str | None:
        return "true" if self.boolean else self.no_value


@attrs.frozen
class ParsedFlags:
    items: list[tuple[str, str]]  # (flag name, value) in the order given; a later one wins or adds
    help: bool = False

    def values(self, name: str) -> list[str]:
        return [value for flag, value in self.items if flag == name]


def normalize(name: str) -> str:
    """``WordSepNormalizeFunc``: ``pod_manifest_path`` is ``pod-manifest-path``."""
    return name.replace("_", "-")


def parse_flags(
    args: Sequence[str],
    flags: Mapping[str, FlagSpec],
    *,
    unknown: Callable[[str], str | None] = lambda name: None,
) -> ParsedFlags:
    """Parse ``args`` against ``flags`` (by long name). ``unknown(name)`` may give the message for a flag
    that is not defined (else "unknown flag"). Positional arguments are refused, as the Go kubelet does.
    """
    shorthands = {spec.shorthand: spec for spec in flags.values() if spec.shorthand}
    items: list[tuple[str, str]] = []
    wants_help = False
    previous_bool = ""

    def record(spec: FlagSpec, value: str) -> None:
        items.append((spec.name, value))

    pending = list(args)
    while pending:
        arg = pending.pop(0)
        if arg == "--":
            if pending:
                raise FlagError(f"unknown command {pending[0]!r}")
            break
        if not arg.startswith("-") or arg == "-":
            hint = (
                f" ({previous_bool} is a boolean flag: write {previous_bool}={arg})" if previous_bool else ""
            )
            raise FlagError(f"unknown command {arg!r}{hint}")
        previous_bool = ""
        if arg.startswith("--"):
            name, has_value, value = arg[2:].partition("=")
            if not name or name.startswith(("-", "=")):
                raise FlagError(f"bad flag syntax: {arg}")
            name = normalize(name)
            spec = flags.get(name)
            if spec is None:
                if name == "help":
                    wants_help = True
                    continue
                raise FlagError(unknown(name) or f"unknown flag: --{name}")
            shown = f"--{name}"
        else:
            letter, rest = arg[1], arg[2:]
            spec = shorthands.get(letter)
            if spec is None:
                if letter == "h":
                    wants_help = True
                    continue
                raise FlagError(f"unknown shorthand flag: {letter!r} in {arg}")
            has_value, value = ("=", rest[1:]) if rest.startswith("=") else ("=" if rest else "", rest)
            shown = f"-{letter}"
        if has_value:
            record(spec, value)
        elif spec.implicit is not None:
            record(spec, spec.implicit)
            previous_bool = shown if spec.boolean else ""
        elif pending:
            record(spec, pending.pop(0))
        else:
            raise FlagError(f"flag needs an argument: {shown}")
    return ParsedFlags(items, wants_help)
