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

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
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

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "AuthConfig": "kubelet_trio.credentialprovider.auth",
    "DockerConfig": "kubelet_trio.credentialprovider.dockerconfig",
    "DockerConfigError": "kubelet_trio.credentialprovider.dockerconfig",
    "parse_docker_config_json": "kubelet_trio.credentialprovider.dockerconfig",
    "parse_dockercfg": "kubelet_trio.credentialprovider.dockerconfig",
    "BasicDockerKeyring": "kubelet_trio.credentialprovider.keyring",
    "CachingDockerConfigProvider": "kubelet_trio.credentialprovider.keyring",
    "DockerConfigProvider": "kubelet_trio.credentialprovider.keyring",
    "DockerKeyring": "kubelet_trio.credentialprovider.keyring",
    "ProvidersDockerKeyring": "kubelet_trio.credentialprovider.keyring",
    "UnionDockerKeyring": "kubelet_trio.credentialprovider.keyring",
    "registry_key": "kubelet_trio.credentialprovider.keyring",
    "node_keyring": "kubelet_trio.credentialprovider.node",
    "NODE_DOCKER_CONFIG_LIFETIME": "kubelet_trio.credentialprovider.nodeconfig",
    "NodeDockerConfigProvider": "kubelet_trio.credentialprovider.nodeconfig",
    "node_docker_keyring": "kubelet_trio.credentialprovider.nodeconfig",
    "read_docker_config_file": "kubelet_trio.credentialprovider.nodeconfig",
    "PLUGIN_EXEC_TIMEOUT": "kubelet_trio.credentialprovider.plugin",
    "CredentialProviderResponse": "kubelet_trio.credentialprovider.plugin",
    "ExecPlugin": "kubelet_trio.credentialprovider.plugin",
    "ExternalCredentialProviderKeyring": "kubelet_trio.credentialprovider.plugin",
    "PluginError": "kubelet_trio.credentialprovider.plugin",
    "PluginProvider": "kubelet_trio.credentialprovider.plugin",
    "register_credential_provider_plugins": "kubelet_trio.credentialprovider.plugin",
    "CredentialProvider": "kubelet_trio.credentialprovider.pluginconfig",
    "CredentialProviderConfig": "kubelet_trio.credentialprovider.pluginconfig",
    "CredentialProviderConfigError": "kubelet_trio.credentialprovider.pluginconfig",
    "parse_go_duration": "kubelet_trio.credentialprovider.pluginconfig",
    "read_credential_provider_config": "kubelet_trio.credentialprovider.pluginconfig",
    "validate_credential_provider_config": "kubelet_trio.credentialprovider.pluginconfig",
    "PullSecret": "kubelet_trio.credentialprovider.secrets",
    "PullSecretError": "kubelet_trio.credentialprovider.secrets",
    "keyring_from_secrets": "kubelet_trio.credentialprovider.secrets",
    "make_docker_keyring": "kubelet_trio.credentialprovider.secrets",
    "is_default_registry_match": "kubelet_trio.credentialprovider.urls",
    "urls_match_str": "kubelet_trio.credentialprovider.urls",
}

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


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
