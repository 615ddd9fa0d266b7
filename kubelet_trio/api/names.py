"""Name and value syntax checks (``apimachinery/pkg/util/validation``). Each returns a list of problem
descriptions, empty when the value is fine, worded like the API server's."""

from __future__ import annotations

import re

__all__ = [
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_iana_svc_name",
    "is_label_value",
    "is_qualified_name",
]

_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_LABEL_RE = re.compile(f"^{_LABEL_FMT}$")
_SUBDOMAIN_FMT = f"{_LABEL_FMT}(\\.{_LABEL_FMT})*"
_SUBDOMAIN_RE = re.compile(f"^{_SUBDOMAIN_FMT}$")
_QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME_RE = re.compile(f"^{_QNAME_FMT}$")
_LABEL_VALUE_RE = re.compile(f"^({_QNAME_FMT})?$")
_SVC_NAME_CHARS = re.compile("^[-a-z0-9]+$")
_HAS_LETTER = re.compile("[a-z]")


def is_dns1123_label(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _LABEL_RE.fullmatch(value):
        errs.append(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
            "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
            f"used for validation is '{_LABEL_FMT}')"
        )
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if len(value) > 253:
        errs.append("must be no more than 253 characters")
    if not _SUBDOMAIN_RE.fullmatch(value):
        errs.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
            "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
            f"for validation is '{_SUBDOMAIN_FMT}')"
        )
    return errs


def is_iana_svc_name(value: str) -> list[str]:
    """A port name: at most 15 characters of ``[-a-z0-9]`` with a letter, no leading/trailing/double '-'."""
    errs = []
    if len(value) > 15:
        errs.append("must be no more than 15 characters")
    if not _SVC_NAME_CHARS.fullmatch(value):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if "--" in value:
        errs.append("must not contain consecutive hyphens")
    if not _HAS_LETTER.search(value):
        errs.append("must contain at least one letter (a-z)")
    if value.startswith("-") or value.endswith("-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def is_qualified_name(value: str) -> list[str]:
    """A label or annotation key: ``[prefix/]name`` with a DNS subdomain prefix."""
    parts = value.split("/")
    if len(parts) == 1:
        prefix, name = "", parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ["prefix part must be non-empty"]
    else:
        return [
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character, with an optional DNS subdomain prefix and '/'"
        ]
    errs = [f"prefix part {msg}" for msg in is_dns1123_subdomain(prefix)] if prefix else []
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if name and not _QNAME_RE.fullmatch(name):
        errs.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            f"with an alphanumeric character (regex used for validation is '{_QNAME_FMT}')"
        )
    return errs


def is_label_value(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
            f"'.', and must start and end with an alphanumeric character (regex used for validation is "
            f"'({_QNAME_FMT})?')"
        )
    return errs
