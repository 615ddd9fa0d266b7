"""Keyrings: which credentials to try for an image (Go: ``pkg/credentialprovider/keyring.go``,
``provider.go``).

A keyring's :meth:`~DockerKeyring.lookup` takes the image's *repository* as Go's
``parsers.ParseImageName`` gives it (``docker.io/library/busybox``: domain and path, no tag or digest)
and returns every matching credential, most specific first; an empty list means "pull anonymously".

:class:`BasicDockerKeyring` (Go's ``BasicDockerKeyring``):

- a key is normalised when added: ``https://``/``http://`` is dropped, a path ``/v1/...`` or
  ``/v2/...`` loses its version prefix and a bare ``/`` path is dropped (``https://index.docker.io/v1/``
  → ``index.docker.io``; ``reg.io:5000/team`` stays);
- keys are kept de-duplicated in *reverse lexicographic* order, so ``quay.io/team`` is tried before
  ``quay.io``; each key matches per :func:`~kubelet_trio.credentialprovider.urls.urls_match` and the
  credentials of every matching key are returned, key by key, each key's in the order they were added;
- when no key matched and the repository is a Docker Hub one, the credentials under
  ``index.docker.io`` are returned (``docker.io`` and ``index.docker.io`` are the same registry).

:class:`UnionDockerKeyring` concatenates its keyrings' answers in order (pod secrets, then the node's
docker config, then the credential provider plugins). :class:`ProvidersDockerKeyring` asks
:class:`DockerConfigProvider` s per lookup; :class:`CachingDockerConfigProvider` keeps a provider's
answer for a while (Trio time).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

import attrs
import trio

from kubelet_trio.credentialprovider.auth import AuthConfig
from kubelet_trio.credentialprovider.dockerconfig import DockerConfig
from kubelet_trio.credentialprovider.urls import (
    DEFAULT_REGISTRY_HOST,
    InvalidURLError,
    is_default_registry_match,
    parse_url,
    urls_match_str,
)
from kubelet_trio.logs import kv, vlevel

__all__ = [
    "BasicDockerKeyring",
    "CachingDockerConfigProvider",
    "DockerConfigProvider",
    "DockerKeyring",
    "ProvidersDockerKeyring",
    "UnionDockerKeyring",
    "registry_key",
]

logger = logging.getLogger(__name__)


class DockerKeyring(Protocol):
    """Credentials for an image repository, most specific first (Go: ``DockerKeyring``)."""

    async def lookup(self, image: str) -> list[AuthConfig]: ...


class DockerConfigProvider(Protocol):
    """A source of a docker config, asked per image (Go: ``DockerConfigProvider``)."""

    async def provide(self, image: str) -> DockerConfig: ...


def registry_key(location: str) -> str:
    """The index key of a docker config key (Go: ``BasicDockerKeyring.Add``). Raises
    :class:`~kubelet_trio.credentialprovider.urls.InvalidURLError` for a key Go's ``url.Parse`` refuses."""
    value = location if location.startswith(("https://", "http://")) else "https://" + location
    parsed = parse_url(value)
    path = parsed.path
    if path.startswith(("/v2/", "/v1/")):
        path = path[3:]
    return parsed.host + path if path and path != "/" else parsed.host


@attrs.define(eq=False)
class BasicDockerKeyring:
    """Credentials indexed by normalised registry key; :meth:`find` is the synchronous lookup."""

    _index: list[str] = attrs.field(factory=list, init=False)
    _creds: dict[str, list[AuthConfig]] = attrs.field(factory=dict, init=False, repr=False)

    @classmethod
    def of(cls, *configs: DockerConfig) -> BasicDockerKeyring:
        keyring = cls()
        for config in configs:
            keyring.add(config)
        return keyring

    def add(self, config: DockerConfig) -> None:
        for location, creds in config.items():
            try:
                key = registry_key(location)
            except InvalidURLError as err:
                logger.error("entry in dockercfg invalid, ignoring", extra=kv(entry=location, err=str(err)))
                continue
            self._creds.setdefault(key, []).append(creds)
        self._index = sorted(self._creds, reverse=True)

    def __bool__(self) -> bool:
        return bool(self._creds)

    @property
    def keys(self) -> tuple[str, ...]:
        """The index, in matching order."""
        return tuple(self._index)

    def find(self, image: str) -> list[AuthConfig]:
        found = [creds for key in self._index if urls_match_str(key, image) for creds in self._creds[key]]
        if found:
            return found
        if is_default_registry_match(image):
            return list(self._creds.get(DEFAULT_REGISTRY_HOST, ()))
        return []

    async def lookup(self, image: str) -> list[AuthConfig]:
        return self.find(image)


@attrs.frozen
class UnionDockerKeyring:
    """Every keyring's credentials, keyring by keyring (Go: ``UnionDockerKeyring``)."""

    keyrings: Sequence[DockerKeyring | None]

    async def lookup(self, image: str) -> list[AuthConfig]:
        found: list[AuthConfig] = []
        for keyring in self.keyrings:
            if keyring is not None:
                found.extend(await keyring.lookup(image))
        return found


@attrs.frozen
class ProvidersDockerKeyring:
    """A fresh :class:`BasicDockerKeyring` of the providers' configs at each lookup (Go:
    ``providersDockerKeyring``)."""

    providers: Sequence[DockerConfigProvider]

    async def lookup(self, image: str) -> list[AuthConfig]:
        keyring = BasicDockerKeyring()
        for provider in self.providers:
            keyring.add(await provider.provide(image))
        return keyring.find(image)


@attrs.define(eq=False)
class CachingDockerConfigProvider:
    """Keep ``provider``'s config for ``lifetime`` seconds of Trio time (Go:
    ``CachingDockerConfigProvider``; the node's docker config file is read at most every 5 minutes)."""

    provider: DockerConfigProvider
    lifetime: float
    _cached: DockerConfig = attrs.field(factory=dict, init=False, repr=False)
    _expires_at: float = attrs.field(default=float("-inf"), init=False)
    _lock: trio.Lock = attrs.field(factory=trio.Lock, init=False, repr=False)

    async def provide(self, image: str) -> DockerConfig:
        async with self._lock:
            if trio.current_time() < self._expires_at:
                return self._cached
            logger.log(vlevel(2), "refreshing docker config cache", extra=kv(lifetime=self.lifetime))
            self._cached = await self.provider.provide(image)
            self._expires_at = trio.current_time() + self.lifetime
            return self._cached
