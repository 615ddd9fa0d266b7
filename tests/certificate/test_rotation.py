"""Client certificate rotation: the jittered 70-90 % schedule and the retry backoff (MockClock, fake API
server), and the running API client presenting the new certificate without a restart (real TLS)."""

from __future__ import annotations

import base64
import datetime as dt
import random
import ssl
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing
import trustme
from cryptography import x509

from kubelet_trio.certificate import (
    CLIENT_USAGES,
    KUBELET_CLIENT_SIGNER,
    CertificatePair,
    CertificateTemplate,
    FileStore,
    RotationBackoff,
    client_certificate_manager,
    open_node_api_client,
    rotation_deadline,
)
from kubelet_trio.certificate.csr import generate_key, key_pem, make_csr
from kubelet_trio.client.kubeconfig import KubeConfig, write_client_cert_kubeconfig
from kubelet_trio.clock import WallClock
from kubelet_trio.fsio import run_inline
from kubelet_trio.httpserver.http11 import HttpServer
from kubelet_trio.testing.fakeapi import FakeApiApp, open_fake_api
from kubelet_trio.testing.fakeapi.csr import CSR_RESOURCE, CsrSigner

NODE = "edge-1"
LIFETIME = 1000.0


def issue_pair(signer: CsrSigner, store: FileStore, lifetime: float) -> CertificatePair:
    """A client pair for NODE signed by ``signer``'s CA, stored as the current one."""
    key = generate_key()
    request = base64.b64encode(make_csr(key, CertificateTemplate.for_node(NODE))).decode()
    csr = {"spec": {"request": request, "usages": list(CLIENT_USAGES), "signerName": KUBELET_CLIENT_SIGNER}}
    cert = signer.certificate_for(csr, lifetime)
    return store.update(cert, key_pem(key), now=signer.now())


def expected_trio_time(clock: WallClock, when: dt.datetime) -> float:
    return clock.to_trio(round(when.timestamp() * 1e9))


async def test_rotation_at_a_jittered_70_to_90_percent_of_the_lifetime(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, api.client() as client, trio.open_nursery() as nursery:
        signer = CsrSigner(api.store, lifetime=LIFETIME, now=clock.now)
        manager = client_certificate_manager(NODE, tmp_path / "pki", lambda: client, clock=clock)
        manager.rng, manager.run_sync = random.Random(7), run_inline
        first = issue_pair(signer, manager.store, LIFETIME)
        rotated: list[tuple[float, CertificatePair]] = []

        async def record(pair: CertificatePair) -> None:
            rotated.append((trio.current_time(), pair))

        manager.listeners.append(record)
        await nursery.start(signer.run)
        await nursery.start(manager.run)
        while len(rotated) < 2:
            await manager.current.wait_transition()
        nursery.cancel_scope.cancel()
    jitter = random.Random(7)
    deadline = rotation_deadline(first, jitter)
    assert rotated[0][0] == pytest.approx(expected_trio_time(clock, deadline), abs=1e-5)
    fraction = (deadline - first.not_before) / (first.not_after - first.not_before)
    assert 0.7 <= fraction < 0.9
    second = rotated[0][1]
    assert second.leaf.serial_number != first.leaf.serial_number
    assert rotated[1][0] == pytest.approx(
        expected_trio_time(clock, rotation_deadline(second, jitter)), abs=1e-5
    )
    # every rotation is a new key and a new CSR, each kept as a dated file behind the current link
    csrs = api.store.list(CSR_RESOURCE, None)["items"]
    assert len(csrs) == 2 and all(c["metadata"]["name"].startswith("csr-") for c in csrs)
    assert rotated[1][1].leaf.public_key() != second.leaf.public_key()
    assert (
        (tmp_path / "pki" / "kubelet-client-current.pem")
        .resolve()
        .read_bytes()
        .startswith(rotated[1][1].cert_pem)
    )


async def test_failed_rotations_back_off_2_4_8_seconds_with_jitter(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    clock = WallClock()
    async with open_fake_api(now=clock.now) as api, api.client() as client, trio.open_nursery() as nursery:
        signer = CsrSigner(api.store, lifetime=LIFETIME, now=clock.now)
        manager = client_certificate_manager(NODE, tmp_path / "pki", lambda: client, clock=clock)
        manager.rng, manager.run_sync = random.Random(3), run_inline
        first = issue_pair(signer, manager.store, LIFETIME)
        api.app.inject("POST", r"/certificatesigningrequests$", 403, times=3, message="not yet")
        await nursery.start(signer.run)
        await nursery.start(manager.run)
        await manager.current.wait_transition()
        done = trio.current_time()
        nursery.cancel_scope.cancel()
    jitter = random.Random(3)
    start = expected_trio_time(clock, rotation_deadline(first, jitter))
    backoff = RotationBackoff()
    delays = [backoff.delay(n, jitter) for n in range(3)]
    assert [round(d) for d in delays] == [2, 4, 8]
    assert done == pytest.approx(start + sum(delays), abs=1e-5)
    assert len(api.app.requests_for("POST", r"/certificatesigningrequests$")) == 4


def test_backoff_settles_at_32_seconds() -> None:
    backoff = RotationBackoff()
    rng = random.Random(1)
    assert [backoff.delay(n, rng) for n in (5, 6, 50)] == [32.0, 32.0, 32.0]


# -- a running client presents the new certificate (real TLS on loopback) ---------------------------------


async def test_the_running_client_presents_the_rotated_certificate(tmp_path: Path) -> None:
    """The API server requires client certificates from the signer's CA and records the one each
    connection presented; the first certificate lives 4 s, so rotation comes within 2.8-3.6 s."""
    server_ca = trustme.CA()
    with trio.fail_after(60):
        async with open_fake_api() as api, trio.open_nursery() as nursery:
            signer = CsrSigner(api.store, lifetime=4.0)
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            server_ca.issue_cert("127.0.0.1").configure_cert(context)
            context.load_verify_locations(cadata=signer.ca_pem.decode())
            context.verify_mode = ssl.CERT_REQUIRED
            presented: list[int] = []

            def connected(stream: trio.abc.Stream, client: tuple[str, int] | None) -> None:
                assert isinstance(stream, trio.SSLStream)
                der = stream.getpeercert(binary_form=True)
                assert der is not None
                presented.append(x509.load_der_x509_certificate(der).serial_number)

            url = await serve_tls(nursery, api.app, context, connected)
            cert_dir = tmp_path / "pki"
            first = issue_pair(signer, FileStore("kubelet-client", cert_dir), 4.0)
            signer.lifetime = 3600.0  # the rotated certificate is long-lived: one rotation
            kubeconfig = tmp_path / "kubelet.kubeconfig"
            write_client_cert_kubeconfig(
                KubeConfig(server=url, ca_data=server_ca.cert_pem.bytes()),
                kubeconfig,
                str(cert_dir / "kubelet-client-current.pem"),
            )
            await nursery.start(signer.run)
            settings = Settings(str(kubeconfig), str(cert_dir))
            async with open_node_api_client(settings) as client:
                await client.get("/api/v1/namespaces/default/pods")
                assert presented == [first.leaf.serial_number]
                api.store.create("configmaps", "default", {"metadata": {"name": "marker"}})
                params = {"resourceVersion": "0"}  # the marker comes first: the stream is open
                async with client.open_watch("/api/v1/namespaces/default/configmaps", params) as events:
                    assert (await events.receive()).type == "ADDED"  # the watch is up
                    while not signer.signed:
                        await api.store.changed.wait_transition()
                    # the watch opened with the old certificate is closed on rotation ...
                    async for event in events:
                        assert event.type == "ERROR"
                        break
                await client.get("/api/v1/namespaces/default/pods")
            nursery.cancel_scope.cancel()
    new = FileStore("kubelet-client", cert_dir).current()
    assert new is not None and new.leaf.serial_number != first.leaf.serial_number
    # ... and every connection after it presents the new certificate
    assert presented[0] == first.leaf.serial_number
    assert presented[-1] == new.leaf.serial_number
    assert presented.index(new.leaf.serial_number) >= 1


class Settings:
    def __init__(self, kubeconfig: str, cert_dir: str) -> None:
        self.kubeconfig, self.cert_dir = kubeconfig, cert_dir
        self.bootstrap_kubeconfig, self.rotate_certificates, self.node_name = "", True, NODE


async def serve_tls(
    nursery: trio.Nursery,
    app: FakeApiApp,
    context: ssl.SSLContext,
    connected: Callable[[trio.abc.Stream, tuple[str, int] | None], None],
) -> str:
    sock = trio.socket.socket()
    await sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    listener = trio.SSLListener(trio.SocketListener(sock), context, https_compatible=True)
    await nursery.start(HttpServer(app, scheme="https", on_connect=connected).run, [listener])
    return f"https://127.0.0.1:{sock.getsockname()[1]}"
