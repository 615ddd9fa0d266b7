"""The node's own registry credentials: a docker config file (Go: ``pkg/credentialprovider/config.go``
``ReadDockerConfigFile``, ``provider.go`` ``defaultDockerConfigProvider``).

``config.json`` is looked for first, in the kubelet's root directory (Go's "preferred path", which the
kubelet sets to ``--root-dir``), the working directory, ``$HOME/.docker`` and ``/.docker``; only when
none of those holds a valid one, ``.dockercfg`` in the root directory, the working directory, ``$HOME``
and ``/``. The first file that reads and parses wins (an empty ``{}`` included); one that does not parse
is skipped. No file means no credentials. The result is cached for :data:`NODE_DOCKER_CONFIG_LIFETIME`
seconds, so a new file is picked up within five minutes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

import attrs

from kubelet_trio.credentialprovider.auth import AuthConfig
from kubelet_trio.credentialprovider.dockerconfig import (
    DockerConfig,
    DockerConfigError,
    parse_docker_config_json,
    parse_dockercfg,
)
from kubelet_trio.credentialprovider.keyring import CachingDockerConfigProvider, ProvidersDockerKeyring
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.logs import kv, vlevel

__all__ = [
    "CONFIG_JSON_FILE_NAME",
    "DOCKERCFG_FILE_NAME",
    "NODE_DOCKER_CONFIG_LIFETIME",
    "NodeDockerConfigProvider",
    "docker_config_json_paths",
    "dockercfg_paths",
    "node_docker_keyring",
    "read_docker_config_file",
]

logger = logging.getLogger(__name__)

CONFIG_JSON_FILE_NAME = "config.json"
DOCKERCFG_FILE_NAME = ".dockercfg"
NODE_DOCKER_CONFIG_LIFETIME = 5 * 60.0


def _home() -> str:
    return os.environ.get("HOME", "")


def docker_config_json_paths(root_dir: str, home: str | None = None) -> list[str]:
    """Where ``config.json`` is looked for, in order (``""`` is the working directory)."""
    home = _home() if home is None else home
    return [root_dir, "", os.path.join(home, ".docker"), os.path.join("/", ".docker")]


def dockercfg_paths(root_dir: str, home: str | None = None) -> list[str]:
    """Where ``.dockercfg`` is looked for, in order (``""`` is the working directory)."""
    return [root_dir, "", _home() if home is None else home, "/"]


def _read_first(
    paths: list[str], name: str, parse: Callable[[bytes], dict[str, AuthConfig]]
) -> DockerConfig | None:
    for directory in paths:
        location = os.path.abspath(os.path.join(directory, name))
        logger.log(vlevel(4), "looking for docker config", extra=kv(path=location))
        try:
            with open(location, "rb") as file:
                contents = file.read()
        except FileNotFoundError:
            continue
        except OSError as err:
            logger.log(vlevel(4), "cannot read docker config", extra=kv(path=location, err=str(err)))
            continue
        try:
            config = parse(contents)
        except DockerConfigError as err:
            logger.log(vlevel(4), "cannot parse docker config", extra=kv(path=location, err=str(err)))
            continue
        logger.log(vlevel(4), "found docker config", extra=kv(path=location))
        return config
    return None


def read_docker_config_file(root_dir: str, home: str | None = None) -> DockerConfig | None:
    """The node's docker config, or None when no valid file is found. Blocking."""
    json_paths = docker_config_json_paths(root_dir, home)
    found = _read_first(json_paths, CONFIG_JSON_FILE_NAME, parse_docker_config_json)
    if found is None:
        found = _read_first(dockercfg_paths(root_dir, home), DOCKERCFG_FILE_NAME, parse_dockercfg)
    return found


@attrs.define(eq=False)
class NodeDockerConfigProvider:
    """Reads the node's docker config on every call (wrap it in a cache: :func:`node_docker_keyring`)."""

    root_dir: str
    run_sync: RunSync = run_in_thread
    home: str | None = None

    async def provide(self, image: str) -> DockerConfig:
        config: DockerConfig | None = await self.run_sync(read_docker_config_file, self.root_dir, self.home)
        if config is None:
            logger.log(vlevel(4), "docker config file not found", extra=kv(root_dir=self.root_dir))
            return {}
        return config


def node_docker_keyring(
    root_dir: str, *, run_sync: RunSync = run_in_thread, home: str | None = None
) -> ProvidersDockerKeyring:
    """The node keyring of Go's ``NewDockerKeyring``: the docker config file, cached for 5 minutes."""
    provider = NodeDockerConfigProvider(root_dir, run_sync, home)
    return ProvidersDockerKeyring((CachingDockerConfigProvider(provider, NODE_DOCKER_CONFIG_LIFETIME),))
