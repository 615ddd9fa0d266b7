"""Registry URL matching (Go: ``pkg/credentialprovider/keyring.go`` ``ParseSchemelessURL``, ``SplitURL``,
``URLsMatch``, ``isDefaultRegistryMatch``).

Both a keyring key and an image repository are read as URLs without a scheme (``https://`` is put in
front to parse them, as Go does). A glob matches a target when

- the ports are equal (both absent, or the same digits),
- the host names have the same number of dot-separated labels and each glob label matches its target
  label with Go's ``filepath.Match`` (``*`` any run of characters within the label, ``?`` one
  character, ``[a-z]``/``[^a-z]`` classes, ``\\`` escapes; a malformed glob matches nothing), and
- the glob's path is a *string* prefix of the target's path (``reg.io/foo`` matches ``reg.io/foobar``).

So ``*.reg.io`` matches ``a.reg.io/x`` but neither ``reg.io/x`` nor ``a.b.reg.io/x``.
"""

from __future__ import annotations

import functools
import re

import attrs

__all__ = [
    "DEFAULT_REGISTRY_HOST",
    "InvalidURLError",
    "SchemelessURL",
    "glob_match",
    "is_default_registry_match",
    "parse_schemeless_url",
    "parse_url",
    "split_url",
    "urls_match",
    "urls_match_str",
]

#: Credentials under this host are used for Docker Hub images no other key matched.
DEFAULT_REGISTRY_HOST = "index.docker.io"

_SCHEMES = ("https://", "http://")
# Characters Go's url.Parse refuses in a host (``shouldEscape`` in host mode, ASCII only).
_HOST_OK = re.compile(r"[A-Za-z0-9\-_.~!$&'()*+,;=:\[\]<>\"\x80-\U0010ffff]*")
_PORT = re.compile(r"[0-9]*")
_USERINFO_OK = re.compile(r"[A-Za-z0-9\-_.~!$&'()*+,;=:%@\x80-\U0010ffff]*")
_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


class InvalidURLError(ValueError):
    """The text does not parse as Go's ``url.Parse`` would parse it."""


@attrs.frozen
class SchemelessURL:
    """The parts of a registry URL the keyring uses: ``host`` (with any ``:port``) and ``path``."""

    host: str
    path: str


def _unescape_path(path: str) -> str:
    if _ESCAPE.search(path):
        raise InvalidURLError("invalid URL escape in path")
    if "%" not in path:
        return path
    raw = re.sub(rb"%([0-9A-Fa-f]{2})", lambda m: bytes([int(m[1], 16)]), path.encode())
    return raw.decode("utf-8", errors="replace")


def _check_host(host: str) -> None:
    if host.startswith("["):
        close = host.find("]")
        if close < 0:
            raise InvalidURLError("missing ']' in host")
        rest = host[close + 1 :]
        if rest and not (rest.startswith(":") and _PORT.fullmatch(rest[1:])):
            raise InvalidURLError("invalid port after host")
        return
    name, colon, port = host.rpartition(":")
    if colon and not _PORT.fullmatch(port):
        raise InvalidURLError("invalid port after host")
    if "%" in host or not _HOST_OK.fullmatch(name if colon else host):
        raise InvalidURLError("invalid character in host name")


def parse_url(raw: str) -> SchemelessURL:
    """Go's ``url.Parse`` of ``http(s)://...``, reduced to host and (unescaped) path."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
        raise InvalidURLError("invalid control character in URL")
    for scheme in _SCHEMES:
        if raw.startswith(scheme):
            rest = raw[len(scheme) :]
            break
    else:
        raise InvalidURLError("missing http(s) scheme")
    rest = rest.partition("#")[0].partition("?")[0]
    authority, slash, path = rest.partition("/")
    userinfo, at, host = authority.rpartition("@")
    if at and not _USERINFO_OK.fullmatch(userinfo):
        raise InvalidURLError("invalid userinfo")
    host = host if at else authority
    _check_host(host)
    return SchemelessURL(host, _unescape_path(slash + path))


def parse_schemeless_url(text: str) -> SchemelessURL:
    """Go's ``ParseSchemelessURL``: parse ``https://`` + text."""
    return parse_url("https://" + text)


def split_url(url: SchemelessURL) -> tuple[list[str], str]:
    """Go's ``SplitURL``: the host's dot-separated labels and the port (``""`` when there is none or the
    host does not split like ``net.SplitHostPort``)."""
    host, port = url.host, ""
    if url.host.startswith("["):
        close = url.host.find("]")
        if close >= 0 and url.host[close + 1 : close + 2] == ":":
            host, port = url.host[1:close], url.host[close + 2 :]
    else:
        name, colon, maybe_port = url.host.rpartition(":")
        if colon and ":" not in name:
            host, port = name, maybe_port
    return host.split("."), port


@functools.lru_cache(maxsize=512)
def _glob_regex(pattern: str) -> re.Pattern[str] | None:
    """Go's ``filepath.Match`` pattern as a regular expression; None for a malformed pattern."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "\\":
            if i + 1 >= n:
                return None
            out.append(re.escape(pattern[i + 1]))
            i += 2
        elif char == "[":
            parsed = _glob_class(pattern, i + 1)
            if parsed is None:
                return None
            regex, i = parsed
            out.append(regex)
        else:
            out.append(re.escape(char))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def _class_char(pattern: str, i: int) -> tuple[str, int] | None:
    """Go's ``getEsc``: one (possibly escaped) character of a class; None when malformed."""
    if i >= len(pattern) or pattern[i] in "-]":
        return None
    if pattern[i] == "\\":
        i += 1
        if i >= len(pattern):
            return None
    if i + 1 >= len(pattern):  # the class must go on (to its closing bracket)
        return None
    return pattern[i], i + 1


def _glob_class(pattern: str, i: int) -> tuple[str, int] | None:
    negated = i < len(pattern) and pattern[i] == "^"
    if negated:
        i += 1
    ranges: list[str] = []
    count = 0
    while True:
        if i < len(pattern) and pattern[i] == "]" and count > 0:
            i += 1
            break
        got = _class_char(pattern, i)
        if got is None:
            return None
        low, i = got
        high = low
        if pattern[i] == "-":
            got = _class_char(pattern, i + 1)
            if got is None:
                return None
            high, i = got
        if low <= high:
            ranges.append(f"{re.escape(low)}-{re.escape(high)}")
        count += 1
    if not ranges:
        return ("[\\s\\S]" if negated else "(?!)"), i
    return f"[{'^' if negated else ''}{''.join(ranges)}]", i


def glob_match(pattern: str, name: str) -> bool:
    """Go's ``filepath.Match(pattern, name)``, a malformed pattern counting as no match."""
    regex = _glob_regex(pattern)
    return regex is not None and regex.fullmatch(name) is not None


def urls_match(glob: SchemelessURL, target: SchemelessURL) -> bool:
    """Go's ``URLsMatch``."""
    glob_labels, glob_port = split_url(glob)
    target_labels, target_port = split_url(target)
    if glob_port != target_port or len(glob_labels) != len(target_labels):
        return False
    if not target.path.startswith(glob.path):
        return False
    return all(glob_match(g, t) for g, t in zip(glob_labels, target_labels, strict=True))


def urls_match_str(glob: str, target: str) -> bool:
    """Go's ``URLsMatchStr``: both sides parsed without a scheme; a parse error is no match."""
    try:
        return urls_match(parse_schemeless_url(glob), parse_schemeless_url(target))
    except InvalidURLError:
        return False


def is_default_registry_match(image: str) -> bool:
    """Go's ``isDefaultRegistryMatch``: the image's repository would be pulled from Docker Hub."""
    first, slash, _ = image.partition("/")
    if not first:
        return False
    if not slash or first in ("docker.io", DEFAULT_REGISTRY_HOST):
        return True
    return "." not in first and ":" not in first
