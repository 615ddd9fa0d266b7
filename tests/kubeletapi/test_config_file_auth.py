"""A ``--config`` file is defaulted as Go's v1beta1 KubeletConfiguration: without an ``authorization:``
section the Kubelet API authorizes with SubjectAccessReview (``Webhook``) and checks tokens with TokenReview,
not ``AlwaysAllow``. In API mode a client certificate the API server does not authorize gets 403; with no
API server to ask (standalone), the kubelet refuses to start with Go's error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trustme

from kubelet_trio.kubelet import KubeletConfig
from kubelet_trio.options import component_configs, load_options
from kubelet_trio.server.auth import NO_CLIENT_FOR_AUTHENTICATION, NO_CLIENT_FOR_AUTHORIZATION
from kubelet_trio.testing.fakeapi.server import open_fake_api
from kubelet_trio.testing.node import open_sim_node
from kubelet_trio.testing.registry import free_port
from tests.apiserver.harness import open_api_node
from tests.kubeletapi.test_kubelet_api import NODE, server_files, tls_client

HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
#: The KubeletConfig fields of the Kubelet API, copied from the daemon's configuration into a test node.
API_FIELDS = (
    "port",
    "address",
    "tls_cert_file",
    "tls_private_key_file",
    "client_ca_file",
    "anonymous_auth",
    "authentication_token_webhook",
    "authorization_mode",
    "authentication_cache_ttl",
    "authorized_cache_ttl",
    "unauthorized_cache_ttl",
)


def client_ca_only_config(tmp_path: Path, ca: trustme.CA) -> tuple[Path, dict[str, str]]:
    """A configuration file whose only setting is ``authentication.x509.clientCAFile``."""
    files = server_files(ca, tmp_path)
    config = tmp_path / "kubelet.yaml"
    config.write_text(HEADER + f"authentication:\n  x509:\n    clientCAFile: {files['client_ca_file']}\n")
    return config, files


def kubelet_api_config(config_file: Path, files: dict[str, str], *flags: str) -> KubeletConfig:
    options, _ = load_options(
        [
            "--config",
            str(config_file),
            f"--hostname-override={NODE}",
            f"--port={free_port()}",
            "--address=127.0.0.1",
            f"--tls-cert-file={files['tls_cert_file']}",
            f"--tls-private-key-file={files['tls_private_key_file']}",
            *flags,
        ]
    )
    return component_configs(options).kubelet


def api_fields(config: KubeletConfig) -> dict[str, Any]:
    return {name: getattr(config, name) for name in API_FIELDS}


def test_the_file_alone_turns_on_webhook_authorization_and_authentication(tmp_path: Path) -> None:
    config_file, files = client_ca_only_config(tmp_path, trustme.CA())
    config = kubelet_api_config(config_file, files)
    assert config.client_ca_file == files["client_ca_file"]
    assert (config.authorization_mode, config.authentication_token_webhook, config.anonymous_auth) == (
        "Webhook",
        True,
        False,
    )
    assert (config.authorized_cache_ttl, config.unauthorized_cache_ttl, config.authentication_cache_ttl) == (
        300,
        30,
        120,
    )
    # without a file the flags keep their own defaults
    flags_only = component_configs(load_options([])[0]).kubelet
    assert (flags_only.authorization_mode, flags_only.authentication_token_webhook) == ("AlwaysAllow", False)


async def test_api_mode_asks_the_api_server_and_a_denied_certificate_gets_403(tmp_path: Path) -> None:
    ca = trustme.CA()
    alice = ca.issue_cert("alice", common_name="alice", organization_name="ops")
    bob = ca.issue_cert("bob", common_name="bob")
    config_file, files = client_ca_only_config(tmp_path, ca)
    config = kubelet_api_config(config_file, files)
    with trio.fail_after(30):
        async with open_fake_api() as api:
            api.app.allowed.add(("bob", "create", "nodes/proxy"))
            async with open_api_node(api, NODE, node_ips=("127.0.0.1",), **api_fields(config)) as node:
                url = node.kubelet.http_urls["api"]
                async with tls_client(ca, alice, base_url=url) as client:
                    denied = await client.post("/run/default/web/app", params={"cmd": "reboot"})
                assert (denied.status_code, denied.text) == (
                    403,
                    "Forbidden (user=alice, verb=create, resource=nodes, subresource(s)=[proxy])\n",
                )
                (review,) = [
                    r.body
                    for r in api.app.requests_for(
                        "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews"
                    )
                    if r.body["spec"]["user"] == "alice"
                ]
                assert review["spec"]["groups"] == ["ops", "system:authenticated"]
                assert review["spec"]["resourceAttributes"]["verb"] == "create"
                assert review["spec"]["resourceAttributes"]["subresource"] == "proxy"
                async with tls_client(ca, bob, base_url=url) as client:
                    allowed = await client.post("/run/default/web/app", params={"cmd": "true"})
                assert (allowed.status_code, allowed.text) == (
                    404,
                    "pod does not exist\n",
                )  # authorized; no pod


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubelet_trio", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_standalone_the_same_file_refuses_to_start(tmp_path: Path) -> None:
    config_file, files = client_ca_only_config(tmp_path, trustme.CA())
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    common = [
        "--pod-manifest-path", str(manifests), "--runtime", "sim", "--root-dir", str(tmp_path / "root"),
        "--pod-logs-dir", str(tmp_path / "logs"), "--healthz-port", "0", "--port", str(free_port()),
        "--tls-cert-file", files["tls_cert_file"], "--tls-private-key-file", files["tls_private_key_file"],
    ]  # fmt: skip
    refused = run_cli("--config", str(config_file), *common)
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert refused.stderr.startswith(
        "kubelet-trio: failed to run Kubelet: no client provided, cannot use webhook authentication ("
    )
    assert refused.stderr.count("\n") == 1 and "--kubeconfig" in refused.stderr
    # authentication is checked first, as Go builds the authenticator first; then authorization
    without_authn = tmp_path / "no-authn.yaml"
    without_authn.write_text(config_file.read_text() + "  webhook:\n    enabled: false\n")
    refused = run_cli("--config", str(without_authn), *common)
    assert refused.returncode == 2
    assert refused.stderr.startswith(
        "kubelet-trio: failed to run Kubelet: no client provided, cannot use webhook authorization ("
    )
    # the same with flags only
    flags = run_cli(*common, "--authorization-mode", "Webhook")
    assert flags.returncode == 2 and NO_CLIENT_FOR_AUTHORIZATION in flags.stderr


async def test_an_embedded_node_with_a_webhook_and_no_client_does_not_serve(tmp_path: Path) -> None:
    with pytest.RaisesGroup(
        pytest.RaisesExc(RuntimeError, match=f"^failed to run Kubelet: {NO_CLIENT_FOR_AUTHENTICATION}$"),
        flatten_subgroups=True,
    ):
        with trio.fail_after(30):
            async with open_sim_node(
                NODE,
                port=free_port(),
                address="127.0.0.1",
                root_dir=str(tmp_path / "root"),
                authentication_token_webhook=True,
            ):
                pass  # pragma: no cover - the node fails while it starts
