"""A pod's image pull secrets as a keyring (Go: ``pkg/credentialprovider/secrets/secrets.go``
``MakeDockerKeyring``).

A secret contributes its ``.dockerconfigjson`` key when non-empty, else its ``.dockercfg`` key when
non-empty; any other secret contributes nothing. Go also requires the secret's ``type`` to be
``kubernetes.io/dockerconfigjson`` / ``kubernetes.io/dockercfg`` respectively: a secret object with a
non-empty ``type`` attribute (:class:`kubelet_trio.objects.Secret` carries the API object's) is held to
that, one without is judged by its keys alone. One secret
that does not parse fails the whole lookup (:class:`PullSecretError`, naming the secret and the field
path, never a value), as in Go.

The pod's secrets come first, before the node's keyring: :func:`make_docker_keyring`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from kubelet_trio.credentialprovider.dockerconfig import (
    DockerConfigError,
    parse_docker_config_json,
    parse_dockercfg,
)
from kubelet_trio.credentialprovider.keyring import BasicDockerKeyring, DockerKeyring, UnionDockerKeyring

__all__ = [
    "DOCKERCFG_KEY",
    "DOCKER_CONFIG_JSON_KEY",
    "SECRET_TYPE_DOCKERCFG",
    "SECRET_TYPE_DOCKER_CONFIG_JSON",
    "PullSecret",
    "PullSecretError",
    "keyring_from_secrets",
    "make_docker_keyring",
]

DOCKER_CONFIG_JSON_KEY = ".dockerconfigjson"
DOCKERCFG_KEY = ".dockercfg"
SECRET_TYPE_DOCKER_CONFIG_JSON = "kubernetes.io/dockerconfigjson"
SECRET_TYPE_DOCKERCFG = "kubernetes.io/dockercfg"


class PullSecret(Protocol):
    """What is read of a secret (:class:`kubelet_trio.objects.Secret` is one)."""

    @property
    def namespace(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def data(self) -> Mapping[str, bytes]: ...


class PullSecretError(DockerConfigError):
    """An image pull secret's docker config does not parse."""


def _of_type(secret: PullSecret, wanted: str) -> bool:
    secret_type = getattr(secret, "type", None)  # absent or empty: not known, judged by the keys
    return not secret_type or secret_type == wanted


def keyring_from_secrets(secrets: Iterable[PullSecret]) -> BasicDockerKeyring | None:
    """The keyring of the secrets' docker configs, or None when none of them has one."""
    keyring = BasicDockerKeyring()
    found = 0
    for secret in secrets:
        if secret.data.get(DOCKER_CONFIG_JSON_KEY) and _of_type(secret, SECRET_TYPE_DOCKER_CONFIG_JSON):
            key, parse = DOCKER_CONFIG_JSON_KEY, parse_docker_config_json
        elif secret.data.get(DOCKERCFG_KEY) and _of_type(secret, SECRET_TYPE_DOCKERCFG):
            key, parse = DOCKERCFG_KEY, parse_dockercfg
        else:
            continue
        try:
            config = parse(secret.data[key])
        except DockerConfigError as err:
            where = f"{secret.namespace}/{secret.name}"
            raise PullSecretError(f'image pull secret "{where}": {key}: {err}') from None
        keyring.add(config)
        found += 1
    return keyring if found else None


def make_docker_keyring(secrets: Iterable[PullSecret], default: DockerKeyring | None) -> DockerKeyring | None:
    """The pod's secrets first, then ``default`` (Go: ``MakeDockerKeyring``). Raises
    :class:`PullSecretError`."""
    from_secrets = keyring_from_secrets(secrets)
    if from_secrets is None:
        return default
    return UnionDockerKeyring((from_secrets, default))
