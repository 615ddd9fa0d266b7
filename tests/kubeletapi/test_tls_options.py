"""``tlsMinVersion`` / ``--tls-min-version`` and ``tlsCipherSuites`` / ``--tls-cipher-suites`` on the
Kubelet API's TLS (Go: ``InitializeTLS`` with ``cliflag.TLSVersion`` and ``cliflag.TLSCipherSuites``): Go's
names, Go's errors for others, and handshakes against a node serving on 127.0.0.1."""

from __future__ import annotations

import logging
import ssl
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import httpx
import pytest
import trio
import trustme

from kubelet_trio.cliflag import CIPHER_SUITES, TLS_VERSIONS
from kubelet_trio.kubelet import KubeletConfig
from kubelet_trio.logs import record_fields
from kubelet_trio.options import OptionsError, component_configs, load_options
from kubelet_trio.server.serve import kubelet_api_ssl_context
from kubelet_trio.testing.node import SimNode, open_sim_node
from kubelet_trio.testing.registry import free_port
from tests.kubeletapi.test_kubelet_api import NODE, server_files

HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def open_tls_node(config: KubeletConfig) -> AbstractAsyncContextManager[SimNode]:
    """A simulated node serving the Kubelet API with ``config``'s address, files and TLS settings."""
    return open_sim_node(
        NODE,
        port=config.port,
        address=config.address,
        root_dir=config.root_dir,
        tls_cert_file=config.tls_cert_file,
        tls_private_key_file=config.tls_private_key_file,
        client_ca_file=config.client_ca_file,
        tls_min_version=config.tls_min_version,
        tls_cipher_suites=config.tls_cipher_suites,
    )


def client_context(
    ca: trustme.CA,
    cert: trustme.LeafCert,
    *,
    maximum: ssl.TLSVersion = ssl.TLSVersion.MAXIMUM_SUPPORTED,
    ciphers: str | None = None,
) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    cert.configure_cert(context)
    context.maximum_version = maximum
    if ciphers is not None:
        context.set_ciphers(ciphers)
    return context


def node_flags(tmp_path: Path, ca: trustme.CA, *extra: str) -> list[str]:
    files = server_files(ca, tmp_path)
    return [
        f"--hostname-override={NODE}",
        f"--port={free_port()}",
        "--address=127.0.0.1",
        f"--root-dir={tmp_path / 'root'}",
        f"--tls-cert-file={files['tls_cert_file']}",
        f"--tls-private-key-file={files['tls_private_key_file']}",
        f"--client-ca-file={files['client_ca_file']}",
        *extra,
    ]


async def healthz(url: str, context: ssl.SSLContext) -> httpx.Response:
    async with httpx.AsyncClient(verify=context, base_url=url, timeout=10) as client:
        return await client.get("/healthz")


async def test_tls_min_version_13_refuses_a_tls_12_client(tmp_path: Path) -> None:
    ca = trustme.CA()
    alice = ca.issue_cert("alice", common_name="alice")
    config_file = tmp_path / "kubelet.yaml"
    config_file.write_text(HEADER + "tlsMinVersion: VersionTLS13\nauthorization: {mode: AlwaysAllow}\n")
    options, _ = load_options(
        ["--config", str(config_file), "--authentication-token-webhook=false", *node_flags(tmp_path, ca)]
    )
    assert options.tls_min_version == "VersionTLS13"
    config = component_configs(options).kubelet
    assert config.tls_min_version == "VersionTLS13"
    with trio.fail_after(30):
        async with open_tls_node(config) as node:
            url = node.kubelet.http_urls["api"]
            with pytest.raises(httpx.ConnectError):  # the handshake fails: no common protocol version
                await healthz(url, client_context(ca, alice, maximum=ssl.TLSVersion.TLSv1_2))
            response = await healthz(url, client_context(ca, alice, maximum=ssl.TLSVersion.TLSv1_3))
            assert (response.status_code, response.text) == (200, "ok")


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")
async def test_the_default_floor_is_tls_12(tmp_path: Path) -> None:
    ca = trustme.CA()
    alice = ca.issue_cert("alice", common_name="alice")
    config = component_configs(load_options(node_flags(tmp_path, ca))[0]).kubelet
    assert config.tls_min_version == ""
    with trio.fail_after(30):
        async with open_tls_node(config) as node:
            url = node.kubelet.http_urls["api"]
            response = await healthz(url, client_context(ca, alice, maximum=ssl.TLSVersion.TLSv1_2))
            assert response.status_code == 200
            with pytest.raises(httpx.ConnectError):
                await healthz(url, client_context(ca, alice, maximum=ssl.TLSVersion.TLSv1_1))


async def test_cipher_suites_limit_tls_12(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kubelet_trio.server.serve")
    ca = trustme.CA()  # ECDSA keys: the ECDHE_ECDSA suites
    alice = ca.issue_cert("alice", common_name="alice")
    suites = "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_RSA_WITH_AES_128_GCM_SHA256"
    config = component_configs(
        load_options(node_flags(tmp_path, ca, f"--tls-cipher-suites={suites}"))[0]
    ).kubelet
    assert config.tls_cipher_suites == (
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        "TLS_RSA_WITH_AES_128_GCM_SHA256",
    )
    with trio.fail_after(30):
        async with open_tls_node(config) as node:
            url = node.kubelet.http_urls["api"]
            tls12 = ssl.TLSVersion.TLSv1_2
            allowed = client_context(ca, alice, maximum=tls12, ciphers="ECDHE-ECDSA-AES256-GCM-SHA384")
            assert (await healthz(url, allowed)).status_code == 200
            other = client_context(ca, alice, maximum=tls12, ciphers="ECDHE-ECDSA-AES128-GCM-SHA256")
            with pytest.raises(httpx.ConnectError):
                await healthz(url, other)
            # TLS 1.3 suites are not configurable: a TLS 1.3 client gets in with its own
            assert (await healthz(url, client_context(ca, alice))).status_code == 200
    insecure = [r for r in caplog.records if r.getMessage() == "Use of insecure cipher detected."]
    assert [record_fields(r)["cipher"] for r in insecure] == ["TLS_RSA_WITH_AES_128_GCM_SHA256"]


def test_only_tls_13_suites_leave_tls_12_without_any(tmp_path: Path) -> None:
    ca = trustme.CA()
    files = server_files(ca, tmp_path)
    pair = (files["tls_cert_file"], files["tls_private_key_file"], files["client_ca_file"])
    context = kubelet_api_ssl_context(*pair, "VersionTLS12", ("TLS_AES_128_GCM_SHA256",))
    assert context.minimum_version == ssl.TLSVersion.TLSv1_3
    assert kubelet_api_ssl_context(*pair).minimum_version == ssl.TLSVersion.TLSv1_2
    with pytest.warns(DeprecationWarning, match="TLSv1 is deprecated"):  # Python's, not ours: Go allows it
        assert kubelet_api_ssl_context(*pair, "VersionTLS10").minimum_version == ssl.TLSVersion.TLSv1


def test_every_go_name_has_an_openssl_spelling() -> None:
    assert set(TLS_VERSIONS) == {"VersionTLS10", "VersionTLS11", "VersionTLS12", "VersionTLS13"}
    assert all(hasattr(ssl.TLSVersion, member) for member in TLS_VERSIONS.values())
    missing = []
    for suite in CIPHER_SUITES.values():
        if suite.tls13:
            continue
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.set_ciphers(f"{suite.openssl}:@SECLEVEL=0")
        except ssl.SSLError:  # not built into this OpenSSL
            missing.append(suite.name)
            continue
        legacy = [c["name"] for c in context.get_ciphers() if c["protocol"] != "TLSv1.3"]
        assert legacy == [suite.openssl], suite.name
    # OpenSSL 3 builds leave out RC4 and 3DES, which Go lists as insecure; nothing else may be missing
    assert all(CIPHER_SUITES[name].insecure for name in missing), missing


@pytest.mark.parametrize(
    ("argv", "body", "message"),
    [
        (
            ["--tls-min-version=VersionTLS14"],
            "tlsMinVersion: VersionTLS14\n",
            'unknown tls version "VersionTLS14"',
        ),
        (
            ["--tls-min-version=TLS1.3"],
            "tlsMinVersion: TLS1.3\n",
            'unknown tls version "TLS1.3"',
        ),
        (
            ["--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,ECDHE-RSA-AES128-GCM-SHA256"],
            "tlsCipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, ECDHE-RSA-AES128-GCM-SHA256]\n",
            "Cipher suite ECDHE-RSA-AES128-GCM-SHA256 not supported or doesn't exist",
        ),
    ],
)
def test_unknown_names_are_go_errors_naming_the_setting(
    tmp_path: Path, argv: list[str], body: str, message: str
) -> None:
    flag = argv[0].split("=", 1)[0]
    with pytest.raises(OptionsError) as caught:
        load_options(argv)
    assert str(caught.value) == f"invalid value {argv[0].split('=', 1)[1]!r} for {flag}: {message}"
    config = tmp_path / "kubelet.yaml"
    config.write_text(HEADER + body)
    with pytest.raises(OptionsError) as caught:
        load_options(["--config", str(config)])
    key = body.split(":", 1)[0]
    assert str(caught.value).startswith(f"--config {config}: invalid value for {key}: ")
    assert str(caught.value).endswith(f": {message}")


async def test_tls_13_with_cipher_suites_gets_go_s_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Accepted, as Go accepts it, with Go's warning when the Kubelet API starts."""
    caplog.set_level(logging.INFO, logger="kubelet_trio.server.serve")
    ca = trustme.CA()
    suites = "--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
    flags = node_flags(tmp_path, ca, "--tls-min-version=VersionTLS13", suites)
    config = component_configs(load_options(flags)[0]).kubelet
    with trio.fail_after(30):
        async with open_tls_node(config):
            pass
    messages = [r.getMessage() for r in caplog.records]
    assert "Warning: TLS 1.3 cipher suites are not configurable, ignoring --tls-cipher-suites" in messages
