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

The TLS names of ``--tls-min-version`` and ``--tls-cipher-suites`` (Go: ``cliflag.TLSVersion`` and
``cliflag.TLSCipherSuites``, ``ciphersuites_flag.go``) are here too: Go's ``crypto/tls`` names, each with
its OpenSSL spelling, and Go's errors for a name that is not one of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import attrs

__all__ = [
    "CIPHER_SUITES",
    "GO_BOOL_VALUES",
    "TLS_VERSIONS",
    "CipherSuite",
    "FlagError",
    "FlagSpec",
    "ParsedFlags",
    "normalize",
    "parse_flags",
    "parse_go_bool",
    "tls_cipher_suites",
    "tls_version",
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


# -- TLS names (Go: component-base/cli/flag/ciphersuites_flag.go) ----------------------------------------

#: ``--tls-min-version`` values: Go's ``crypto/tls`` constant names -> the ``ssl.TLSVersion`` member.
TLS_VERSIONS: Mapping[str, str] = {
    "VersionTLS10": "TLSv1",
    "VersionTLS11": "TLSv1_1",
    "VersionTLS12": "TLSv1_2",
    "VersionTLS13": "TLSv1_3",
}


def tls_version(name: str) -> str:
    """The ``ssl.TLSVersion`` member name of a Go TLS version name; Go's error for any other name
    (``""`` is not a name: the caller's default applies)."""
    try:
        return TLS_VERSIONS[name]
    except KeyError:
        raise ValueError(f'unknown tls version "{name}"') from None


@attrs.frozen
class CipherSuite:
    """One of Go's cipher suites: its IANA name (as Go spells it), its OpenSSL name, whether it is a TLS
    1.3 suite (those are not configurable, in Go as in OpenSSL's cipher list) and whether Go lists it
    among ``tls.InsecureCipherSuites()``."""

    name: str
    openssl: str
    tls13: bool = False
    insecure: bool = False


def _suites(*suites: CipherSuite) -> dict[str, CipherSuite]:
    return {suite.name: suite for suite in suites}


#: What ``cliflag.TLSCipherSuites`` accepts: ``tls.CipherSuites()``, ``tls.InsecureCipherSuites()`` (newest
#: Go: RSA key exchange, RC4, 3DES and the CBC-SHA256 suites) and the two legacy ChaCha20 names.
CIPHER_SUITES: Mapping[str, CipherSuite] = _suites(
    CipherSuite("TLS_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256", tls13=True),
    CipherSuite("TLS_AES_256_GCM_SHA384", "TLS_AES_256_GCM_SHA384", tls13=True),
    CipherSuite("TLS_CHACHA20_POLY1305_SHA256", "TLS_CHACHA20_POLY1305_SHA256", tls13=True),
    CipherSuite("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA-AES128-SHA"),
    CipherSuite("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA-AES256-SHA"),
    CipherSuite("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA-AES128-SHA"),
    CipherSuite("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA-AES256-SHA"),
    CipherSuite("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256"),
    CipherSuite("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384"),
    CipherSuite("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256"),
    CipherSuite("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384"),
    CipherSuite("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305"),
    CipherSuite("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"),
    CipherSuite("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "ECDHE-RSA-CHACHA20-POLY1305"),
    CipherSuite("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", "ECDHE-ECDSA-CHACHA20-POLY1305"),
    CipherSuite("TLS_RSA_WITH_RC4_128_SHA", "RC4-SHA", insecure=True),
    CipherSuite("TLS_RSA_WITH_3DES_EDE_CBC_SHA", "DES-CBC3-SHA", insecure=True),
    CipherSuite("TLS_RSA_WITH_AES_128_CBC_SHA", "AES128-SHA", insecure=True),
    CipherSuite("TLS_RSA_WITH_AES_256_CBC_SHA", "AES256-SHA", insecure=True),
    CipherSuite("TLS_RSA_WITH_AES_128_CBC_SHA256", "AES128-SHA256", insecure=True),
    CipherSuite("TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128-GCM-SHA256", insecure=True),
    CipherSuite("TLS_RSA_WITH_AES_256_GCM_SHA384", "AES256-GCM-SHA384", insecure=True),
    CipherSuite("TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", "ECDHE-ECDSA-RC4-SHA", insecure=True),
    CipherSuite("TLS_ECDHE_RSA_WITH_RC4_128_SHA", "ECDHE-RSA-RC4-SHA", insecure=True),
    CipherSuite("TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", "ECDHE-RSA-DES-CBC3-SHA", insecure=True),
    CipherSuite("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "ECDHE-ECDSA-AES128-SHA256", insecure=True),
    CipherSuite("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "ECDHE-RSA-AES128-SHA256", insecure=True),
)


def tls_cipher_suites(names: Sequence[str]) -> tuple[CipherSuite, ...]:
    """The suites of ``names``, in order; Go's error names the first one that is not a suite."""
    suites = []
    for name in names:
        suite = CIPHER_SUITES.get(name)
        if suite is None:
            raise ValueError(f"Cipher suite {name} not supported or doesn't exist")
        suites.append(suite)
    return tuple(suites)
