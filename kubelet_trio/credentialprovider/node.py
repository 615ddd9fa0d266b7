"""The node's keyring: what every pull may use beyond the pod's own secrets (Go: the image manager's
``UnionDockerKeyring{nodeKeyring, externalCredentialProviderKeyring}``).

Its answer comes after the pod's pull secrets
(:func:`~kubelet_trio.credentialprovider.secrets.make_docker_keyring`): first the node's docker config
file, then the credential provider plugins.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kubelet_trio.credentialprovider.keyring import DockerKeyring, UnionDockerKeyring
from kubelet_trio.credentialprovider.nodeconfig import node_docker_keyring
from kubelet_trio.fsio import RunSync, run_in_thread

if TYPE_CHECKING:
    from kubelet_trio.credentialprovider.plugin import PluginProvider

__all__ = ["node_keyring"]


def node_keyring(
    root_dir: str,
    plugins: Sequence[PluginProvider] = (),
    *,
    run_sync: RunSync = run_in_thread,
    home: str | None = None,
) -> UnionDockerKeyring:
    """The docker config found from ``root_dir`` (the kubelet's ``--root-dir``), then ``plugins`` (from
    :func:`~kubelet_trio.credentialprovider.plugin.register_credential_provider_plugins`). Without
    plugins, the plugin machinery is not loaded."""
    keyrings: list[DockerKeyring] = [node_docker_keyring(root_dir, run_sync=run_sync, home=home)]
    if plugins:
        from kubelet_trio.credentialprovider.plugin import ExternalCredentialProviderKeyring

        keyrings.append(ExternalCredentialProviderKeyring(plugins))
    return UnionDockerKeyring(tuple(keyrings))
