"""Docker config parsing (Go: ``pkg/credentialprovider/config.go``).

Two shapes carry registry credentials:

- ``.dockercfg`` (legacy, and the ``kubernetes.io/dockercfg`` secret's ``.dockercfg`` key): the map of
  registry key to entry itself;
- ``config.json`` (and the ``kubernetes.io/dockerconfigjson`` secret's ``.dockerconfigjson`` key):
  ``{"auths": {...}}``; other top-level keys (``HttpHeaders``, ``credsStore``, ...) are ignored, and no
  ``auths`` at all is a valid, empty config.

An entry has ``username``, ``password``, ``email`` and ``auth`` (base64 of ``user:password``, which
replaces ``username``/``password`` when set; padded or unpadded), matched case-insensitively as Go's
``encoding/json`` does, other keys ignored. Beyond Go, ``identitytoken`` and ``registrytoken`` are kept
(Go drops them). A ``null`` entry or field is empty. Anything else of the wrong type fails the whole
config with a :class:`DockerConfigError` that names the field path, never a value.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from kubelet_trio.credentialprovider.auth import AuthConfig

__all__ = [
    "DockerConfig",
    "DockerConfigError",
    "decode_auth_field",
    "go_json_path",
    "parse_docker_config_json",
    "parse_dockercfg",
]

DockerConfig = Mapping[str, AuthConfig]
"""Registry key (as written: scheme, path and all) → credential; the keyring normalises the keys."""

_ENTRY_FIELDS = ("username", "password", "email", "auth", "identitytoken", "registrytoken")


class DockerConfigError(ValueError):
    """A docker config does not parse; the message names where, never what was there."""


def go_json_path(*parts: str) -> str:
    """``auths["reg.io"].password``-style path of a field, for messages."""
    out = ""
    for part in parts:
        if part.startswith("["):
            out += part
        else:
            out += f".{part}" if out else part
    return out


def _key(key: str) -> str:
    return "[" + json.dumps(key, ensure_ascii=False) + "]"


def decode_auth_field(field: str) -> tuple[str, str]:
    """Go's ``decodeDockerConfigFieldAuth``: base64 (padded when it ends in ``=``, else unpadded) of
    ``user:password``, split at the first colon. Raises ValueError with a value-free message."""
    text = field.replace("\r", "").replace("\n", "")  # Go's decoder skips CR and LF, nothing else
    if field.strip().endswith("="):
        padded = text
    else:
        if "=" in text or len(text) % 4 == 1:
            raise ValueError("illegal base64 data")
        padded = text + "=" * (-len(text) % 4)
    try:
        decoded = base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("illegal base64 data") from None
    user, colon, password = decoded.decode("utf-8", errors="replace").partition(":")
    if not colon:
        raise ValueError("unable to parse auth field, must be formatted as base64(username:password)")
    return user, password


def _entry(value: Any, path: str) -> AuthConfig:
    if value is None:
        return AuthConfig()
    if not isinstance(value, dict):
        raise DockerConfigError(f"{path}: must be an object")
    fields: dict[str, str] = {}
    for name, field in value.items():
        known = name.lower()
        if known not in _ENTRY_FIELDS:
            continue
        if field is None:  # Go: null leaves the field as it was
            continue
        if not isinstance(field, str):
            raise DockerConfigError(f"{go_json_path(path, name)}: must be a string")
        fields[known] = field
    username, password = fields.get("username", ""), fields.get("password", "")
    if fields.get("auth"):
        try:
            username, password = decode_auth_field(fields["auth"])
        except ValueError as err:
            raise DockerConfigError(f"{go_json_path(path, 'auth')}: {err}") from None
    return AuthConfig(
        username=username,
        password=password,
        identity_token=fields.get("identitytoken", ""),
        registry_token=fields.get("registrytoken", ""),
    )


def _entries(value: Any, path: str) -> dict[str, AuthConfig]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DockerConfigError(f"{path or '(root)'}: must be an object")
    return {key: _entry(entry, go_json_path(path, _key(key))) for key, entry in value.items()}


def _load(data: bytes | str) -> Any:
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        # the position only: json's message never quotes the document
        raise DockerConfigError(f"invalid JSON: {err.msg} at line {err.lineno} column {err.colno}") from None


def parse_dockercfg(data: bytes | str) -> dict[str, AuthConfig]:
    """A legacy ``.dockercfg`` document: the registry map itself."""
    return _entries(_load(data), "")


def parse_docker_config_json(data: bytes | str) -> dict[str, AuthConfig]:
    """A ``config.json`` / ``.dockerconfigjson`` document: its ``auths`` map."""
    document = _load(data)
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise DockerConfigError("(root): must be an object")
    auths: Any = None
    for key, value in document.items():
        if key.lower() == "auths":
            auths = value
    return _entries(auths, "auths")
