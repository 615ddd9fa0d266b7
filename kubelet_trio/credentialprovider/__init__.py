"""Registry credentials for image pulls (Go: ``pkg/credentialprovider``).

- :mod:`~.auth`: :class:`AuthConfig`, one credential, never printed;
- :mod:`~.dockerconfig`: ``.dockercfg`` / ``config.json`` parsing;
- :mod:`~.urls`: registry key and image matching (host globs, port, path prefix);
- :mod:`~.keyring`: :class:`BasicDockerKeyring`, unions, providers and their cache;
- :mod:`~.secrets`: a pod's image pull secrets as a keyring;
- :mod:`~.nodeconfig`: the node's docker config file;
- :mod:`~.pluginconfig`, :mod:`~.plugin`: exec credential provider plugins;
- :mod:`~.node`: the node keyring (docker config file, then plugins).

The image manager (:mod:`kubelet_trio.kuberuntime.images`) looks up
``make_docker_keyring(pull_secrets, node_keyring(...))`` for the image's repository and tries each
credential in turn.
"""

from __future__ import annotations

from kubelet_trio.credentialprovider.auth import AuthConfig
from kubelet_trio.credentialprovider.dockerconfig import (
    DockerConfig,
    DockerConfigError,
    parse_docker_config_json,
    parse_dockercfg,
)
from kubelet_trio.credentialprovider.keyring import (
    BasicDockerKeyring,
    CachingDockerConfigProvider,
    DockerConfigProvider,
    DockerKeyring,
    ProvidersDockerKeyring,
    UnionDockerKeyring,
    registry_key,
)
from kubelet_trio.credentialprovider.node import node_keyring
from kubelet_trio.credentialprovider.nodeconfig import (
    NODE_DOCKER_CONFIG_LIFETIME,
    NodeDockerConfigProvider,
    node_docker_keyring,
    read_docker_config_file,
)
from kubelet_trio.credentialprovider.plugin import (
    PLUGIN_EXEC_TIMEOUT,
    CredentialProviderResponse,
    ExecPlugin,
    ExternalCredentialProviderKeyring,
    PluginError,
    PluginProvider,
    register_credential_provider_plugins,
)
from kubelet_trio.credentialprovider.pluginconfig import (
    CredentialProvider,
    CredentialProviderConfig,
    CredentialProviderConfigError,
    parse_go_duration,
    read_credential_provider_config,
    validate_credential_provider_config,
)
from kubelet_trio.credentialprovider.secrets import (
    PullSecret,
    PullSecretError,
    keyring_from_secrets,
    make_docker_keyring,
)
from kubelet_trio.credentialprovider.urls import is_default_registry_match, urls_match_str

__all__ = [
    "NODE_DOCKER_CONFIG_LIFETIME",
    "PLUGIN_EXEC_TIMEOUT",
    "AuthConfig",
    "BasicDockerKeyring",
    "CachingDockerConfigProvider",
    "CredentialProvider",
    "CredentialProviderConfig",
    "CredentialProviderConfigError",
    "CredentialProviderResponse",
    "DockerConfig",
    "DockerConfigError",
    "DockerConfigProvider",
    "DockerKeyring",
    "ExecPlugin",
    "ExternalCredentialProviderKeyring",
    "NodeDockerConfigProvider",
    "PluginError",
    "PluginProvider",
    "ProvidersDockerKeyring",
    "PullSecret",
    "PullSecretError",
    "UnionDockerKeyring",
    "is_default_registry_match",
    "keyring_from_secrets",
    "make_docker_keyring",
    "node_docker_keyring",
    "node_keyring",
    "parse_docker_config_json",
    "parse_dockercfg",
    "parse_go_duration",
    "read_credential_provider_config",
    "read_docker_config_file",
    "register_credential_provider_plugins",
    "registry_key",
    "urls_match_str",
    "validate_credential_provider_config",
]
