"""TLS bootstrap against the fake API server (MockClock): the CSR the node sends, the files it writes,
denial, a restart while waiting, and when no bootstrap is needed."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kubelet_trio.certificate import (
    BootstrapError,
    CertificateTemplate,
    FileStore,
    kubeconfig_still_valid,
    load_client_cert,
)
from kubelet_trio.certificate.bootstrap import SERVER_POLL, OpenClient
from kubelet_trio.client import ApiClient, KubeConfig, load_kubeconfig
from kubelet_trio.clock import WallClock
from kubelet_trio.fsio import run_inline
from kubelet_trio.testing.fakeapi import FakeApi, open_fake_api, write_kubeconfig
from kubelet_trio.testing.fakeapi.csr import CSR_RESOURCE, CsrSigner, csr_request

NODE = "edge-1"


def read_text(path: str) -> str:
    with open(path) as f:
        return f.read()


@contextlib.asynccontextmanager
async def fake_cluster(clock: WallClock) -> AsyncIterator[tuple[FakeApi, CsrSigner]]:
    async with open_fake_api(now=clock.now) as api:
        yield api, CsrSigner(api.store, lifetime=3600, now=clock.now)


def bootstrap_files(tmp_path: Path) -> tuple[str, str, str]:
    """(kubeconfig path to write, bootstrap kubeconfig, cert dir)."""
    boot = write_kubeconfig(
        tmp_path / "bootstrap.kubeconfig", "http://fake-apiserver", token="abcdef.0123456789abcdef"
    )
    return str(tmp_path / "kubelet.kubeconfig"), str(boot), str(tmp_path / "pki")


def opener(api: FakeApi) -> OpenClient:
    def open_client(config: KubeConfig) -> contextlib.AbstractAsyncContextManager[ApiClient]:
        assert config.token == "abcdef.0123456789abcdef"  # the bootstrap credentials are used
        return api.client()

    return open_client


async def bootstrap_node(
    api: FakeApi, signer: CsrSigner, clock: WallClock, tmp_path: Path
) -> tuple[bool, float]:
    """Bootstrap NODE from :func:`bootstrap_files` with the signer running: (issued, seconds it took)."""
    kubeconfig, boot, cert_dir = bootstrap_files(tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(signer.run)
        started = trio.current_time()
        issued = await load_client_cert(
            kubeconfig, boot, cert_dir, NODE, now=clock.now, open_client=opener(api), run_sync=run_inline
        )
        nursery.cancel_scope.cancel()
    return issued, trio.current_time() - started


async def test_bootstrap_requests_a_node_client_certificate_and_writes_a_kubeconfig(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    clock = WallClock()
    kubeconfig, _, cert_dir = bootstrap_files(tmp_path)
    async with fake_cluster(clock) as (api, signer):
        issued, took = await bootstrap_node(api, signer, clock, tmp_path)
    assert took == 0  # a healthy API server ("ok" in plain text) is not waited for
    assert issued is True
    (csr,) = api.store.list(CSR_RESOURCE, None)["items"]
    assert csr["metadata"]["name"].startswith("node-csr-")
    assert csr["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet"
    assert csr["spec"]["usages"] == ["digital signature", "key encipherment", "client auth"]
    assert "expirationSeconds" not in csr["spec"]
    request = csr_request(csr)
    assert request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "system:node:edge-1"
    assert [a.value for a in request.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "system:nodes"
    ]
    key = request.public_key()
    assert isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1"
    # the pair: a dated file, owner-only, behind the current link
    current = Path(cert_dir) / "kubelet-client-current.pem"
    assert current.is_symlink()
    target = current.resolve()
    assert target.name.startswith("kubelet-client-20") and target.name.endswith(".pem")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert not (Path(cert_dir) / "kubelet-client.key.tmp").exists()
    pair = FileStore("kubelet-client", Path(cert_dir)).current()
    assert pair is not None and pair.leaf.public_key() == key
    assert signer.ca.subject == pair.leaf.issuer
    # the kubeconfig: the bootstrap's server, the pair's file for certificate and key, owner-only
    assert stat.S_IMODE(os.stat(kubeconfig).st_mode) == 0o600
    doc = yaml.safe_load(read_text(kubeconfig))
    assert doc["current-context"] == "default-context"
    assert doc["users"] == [
        {"name": "default-auth", "user": {"client-certificate": str(current), "client-key": str(current)}}
    ]
    loaded = load_kubeconfig(kubeconfig)
    assert loaded.server == "http://fake-apiserver" and loaded.token is None
    assert (
        x509.load_pem_x509_certificate(loaded.client_cert_data or b"").serial_number
        == pair.leaf.serial_number
    )


async def test_an_api_server_not_yet_healthy_is_asked_again_every_2_seconds(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    clock = WallClock()
    async with fake_cluster(clock) as (api, signer):
        api.app.inject("GET", "^/healthz$", 403, times=2)  # e.g. RBAC not yet in place for the token
        issued, took = await bootstrap_node(api, signer, clock, tmp_path)
    assert issued is True
    assert took == pytest.approx(2 * SERVER_POLL)
    assert len(api.app.requests_for("GET", "^/healthz$")) == 3
    assert len(api.store.list(CSR_RESOURCE, None)["items"]) == 1


async def test_a_denied_request_fails_with_the_reason(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    clock = WallClock()
    kubeconfig, boot, cert_dir = bootstrap_files(tmp_path)
    async with fake_cluster(clock) as (api, signer):

        async def deny_when_created() -> None:
            while not api.store.list(CSR_RESOURCE, None)["items"]:
                await api.store.changed.wait_transition()
            signer.deny(
                api.store.list(CSR_RESOURCE, None)["items"][0]["metadata"]["name"], "NotMyNode", "who are you"
            )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(deny_when_created)
            with pytest.raises(BootstrapError, match=r"is denied, reason: NotMyNode, message: who are you"):
                await load_client_cert(
                    kubeconfig,
                    boot,
                    cert_dir,
                    NODE,
                    now=clock.now,
                    open_client=opener(api),
                    run_sync=run_inline,
                )
    assert not Path(kubeconfig).exists()  # noqa: ASYNC240 - a check after the run
    assert (Path(cert_dir) / "kubelet-client.key.tmp").exists()  # kept for the next attempt


async def test_a_restart_while_waiting_finds_its_own_request(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    clock = WallClock()
    kubeconfig, boot, cert_dir = bootstrap_files(tmp_path)
    async with fake_cluster(clock) as (api, signer):
        with trio.move_on_after(30):  # nobody approves: the first kubelet gives up (is restarted)
            await load_client_cert(
                kubeconfig, boot, cert_dir, NODE, now=clock.now, open_client=opener(api), run_sync=run_inline
            )
        (first,) = api.store.list(CSR_RESOURCE, None)["items"]
        async with trio.open_nursery() as nursery:
            await nursery.start(signer.run)
            await load_client_cert(
                kubeconfig, boot, cert_dir, NODE, now=clock.now, open_client=opener(api), run_sync=run_inline
            )
            nursery.cancel_scope.cancel()
        assert [c["metadata"]["uid"] for c in api.store.list(CSR_RESOURCE, None)["items"]] == [
            first["metadata"]["uid"]
        ]
    assert load_kubeconfig(kubeconfig).client_cert_data


async def test_a_valid_kubeconfig_needs_no_bootstrap_and_an_expired_one_does(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    clock = WallClock()
    kubeconfig, boot, cert_dir = bootstrap_files(tmp_path)
    async with fake_cluster(clock) as (api, signer), trio.open_nursery() as nursery:
        signer.lifetime = 600
        await nursery.start(signer.run)
        args = (kubeconfig, boot, cert_dir, NODE)

        async def bootstrap() -> bool:
            return await load_client_cert(*args, now=clock.now, open_client=opener(api), run_sync=run_inline)

        assert await bootstrap() is True
        assert await bootstrap() is False
        assert len(signer.signed) == 1
        await trio.sleep(601)  # the certificate expires
        assert not kubeconfig_still_valid(kubeconfig, clock.now())
        assert await bootstrap() is True
        assert len(signer.signed) == 2
        nursery.cancel_scope.cancel()


def test_kubeconfig_without_a_client_certificate_is_not_valid(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "token.kubeconfig", "https://127.0.0.1:6443", token="t")
    assert kubeconfig_still_valid(str(path), dt.datetime.now(dt.UTC)) is False
    assert kubeconfig_still_valid(str(tmp_path / "missing"), dt.datetime.now(dt.UTC)) is False


async def test_a_bad_bootstrap_kubeconfig_is_named(tmp_path: Path) -> None:
    (tmp_path / "boot").write_text("clusters: [")
    with pytest.raises(BootstrapError, match=r"--bootstrap-kubeconfig: .*boot: not valid YAML"):
        await load_client_cert(str(tmp_path / "kc"), str(tmp_path / "boot"), str(tmp_path / "pki"), NODE)


def test_serving_template_names_the_addresses() -> None:
    template = CertificateTemplate.for_node("n", dns_names=["n.local", "n.local"], ips=["10.0.0.2"])
    assert template == CertificateTemplate("system:node:n", ("system:nodes",), ("n.local",), ("10.0.0.2",))
