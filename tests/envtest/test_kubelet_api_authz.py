"""The Kubelet API of a node configured by a file with only ``authentication.x509.clientCAFile``, against a
real kube-apiserver that authorizes with RBAC: the file's v1beta1 defaults make the kubelet ask the API
server (SubjectAccessReview), which denies a client certificate nobody granted ``nodes/proxy`` (403) and
allows one bound to a role that grants it. Needs the envtest binaries (see conftest.py); the cluster is
this module's own, as the session's authorizes everything (AlwaysAllow)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trustme

from kubelet_trio.apimode import open_kubeconfig_client
from kubelet_trio.testing.envtest import EnvtestCluster, assets, skip_reason, start_envtest
from tests.apiserver.harness import open_api_node
from tests.kubeletapi.test_config_file_auth import api_fields, client_ca_only_config, kubelet_api_config
from tests.kubeletapi.test_kubelet_api import NODE, tls_client

RBAC = "/apis/rbac.authorization.k8s.io/v1"


@pytest.fixture(scope="module")
def rbac_envtest() -> Iterator[EnvtestCluster]:
    """An envtest cluster authorizing with RBAC only."""
    directory = assets()
    if directory is None:
        pytest.skip(skip_reason("envtest"))
    with start_envtest(directory, authorization_mode="RBAC") as cluster:
        yield cluster


async def test_a_certificate_the_api_server_does_not_authorize_gets_403(
    rbac_envtest: EnvtestCluster, tmp_path: Path
) -> None:
    ca = trustme.CA()
    alice = ca.issue_cert("alice", common_name="alice")
    bob = ca.issue_cert("bob", common_name="bob")
    config_file, files = client_ca_only_config(tmp_path, ca)
    config = kubelet_api_config(config_file, files)
    assert config.authorization_mode == "Webhook"  # from the file's defaults, not from a flag
    with trio.fail_after(120):
        async with open_kubeconfig_client(str(rbac_envtest.kubeconfig)) as client:
            await client.create(
                f"{RBAC}/clusterroles",
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRole",
                    "metadata": {"name": "kubelet-api-run"},
                    "rules": [{"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["create"]}],
                },
            )
            await client.create(
                f"{RBAC}/clusterrolebindings",
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": "bob-runs"},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": "kubelet-api-run",
                    },
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}],
                },
            )
            async with open_api_node(
                None, NODE, client=client, node_ips=("127.0.0.1",), **api_fields(config)
            ) as node:
                url = node.kubelet.http_urls["api"]
                async with tls_client(ca, alice, base_url=url) as kubelet_api:
                    denied = await kubelet_api.post("/run/default/web/app", params={"cmd": "reboot"})
                assert (denied.status_code, denied.text) == (
                    403,
                    "Forbidden (user=alice, verb=create, resource=nodes, subresource(s)=[proxy])\n",
                )
                async with tls_client(ca, bob, base_url=url) as kubelet_api:
                    allowed = await kubelet_api.post("/run/default/web/app", params={"cmd": "true"})
                assert (allowed.status_code, allowed.text) == (404, "pod does not exist\n")
