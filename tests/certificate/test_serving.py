"""The serving certificate by CSR (``--rotate-server-certificates``): a self-signed placeholder until the
``kubernetes.io/kubelet-serving`` request is issued, then the issued certificate on new connections of the
running TLS server (real TLS on loopback, fake API server)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
from functools import partial
from pathlib import Path

import trio
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from kubelet_trio.certificate import (
    CertificateTemplate,
    FileStore,
    open_serving_certificate,
    reload_certificate_files,
)
from kubelet_trio.certificate.serving import placeholder_pair
from kubelet_trio.testing.fakeapi import open_fake_api
from kubelet_trio.testing.fakeapi.csr import CSR_RESOURCE, CsrSigner, csr_request

NODE = "edge-1"


async def presented_serial(port: int, trust: bytes) -> int | None:
    """The serial of the certificate the server presents, when it verifies against ``trust``."""
    context = ssl.create_default_context(cadata=trust.decode())
    context.check_hostname = False
    stream = await trio.open_ssl_over_tcp_stream("127.0.0.1", port, ssl_context=context)
    try:
        await stream.do_handshake()
    except trio.BrokenResourceError:  # verification failed
        await trio.aclose_forcefully(stream)
        return None
    der = stream.getpeercert(binary_form=True)
    await stream.aclose()
    return x509.load_der_x509_certificate(der).serial_number if der else None


async def test_the_server_moves_from_a_placeholder_to_the_issued_certificate(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with open_fake_api() as api, api.client() as client, trio.open_nursery() as nursery:
            signer = CsrSigner(api.store, lifetime=3600)

            def addresses() -> tuple[list[str], list[str]]:
                return [NODE], ["127.0.0.1"]

            async with open_serving_certificate(client, NODE, tmp_path / "pki", addresses) as pem:
                context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
                context.load_cert_chain(pem, pem)
                await nursery.start(
                    partial(reload_certificate_files, context, str(pem), str(pem), period=0.2)
                )
                listeners = await nursery.start(
                    partial(trio.serve_ssl_over_tcp, _close, 0, context, host="127.0.0.1")
                )
                port = listeners[0].transport_listener.socket.getsockname()[1]
                placeholder = x509.load_pem_x509_certificates(pem.read_bytes())[0]
                assert placeholder.issuer == placeholder.subject  # self-signed until issued
                assert await presented_serial(port, signer.ca_pem) is None  # not trusted by the cluster CA

                while not api.store.list(CSR_RESOURCE, None)["items"]:
                    await api.store.changed.wait_transition()
                (csr,) = api.store.list(CSR_RESOURCE, None)["items"]
                assert csr["spec"]["signerName"] == "kubernetes.io/kubelet-serving"
                assert csr["spec"]["usages"] == ["digital signature", "key encipherment", "server auth"]
                san = csr_request(csr).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
                assert san.get_values_for_type(x509.DNSName) == [NODE]
                assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
                issued = x509.load_pem_x509_certificate(signer.sign(csr["metadata"]["name"]))
                assert (
                    ExtendedKeyUsageOID.SERVER_AUTH
                    in issued.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
                )

                serial = None
                while serial is None:  # the file is checked every RELOAD_PERIOD
                    await trio.sleep(0.2)
                    serial = await presented_serial(port, signer.ca_pem)
                assert serial == issued.serial_number  # served without a restart
            nursery.cancel_scope.cancel()


async def _close(stream: trio.SSLStream[trio.SocketStream]) -> None:
    try:
        await stream.do_handshake()
    except (trio.BrokenResourceError, ssl.SSLError):
        return
    await stream.aclose()


def test_a_second_pair_in_the_same_second_never_rewrites_the_file_a_reader_has_open(
    tmp_path: Path,
) -> None:
    """The placeholder and the issued pair are often stored within one second (one dated name): the
    issued one is renamed into place, so a server loading the placeholder reads all of it."""
    store = FileStore("kubelet-server", tmp_path)
    template = CertificateTemplate.for_node(NODE, ips=["127.0.0.1"])
    now = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    first = store.update(*placeholder_pair(template, now), now=now)
    with store.current_path.open("rb", buffering=0) as loading:
        head = loading.read(100)
        second = store.update(*placeholder_pair(template, now), now=now)
        rest = loading.read()
    assert head + rest == first.cert_pem + first.key_pem
    current = store.current()
    assert current is not None and current.leaf.serial_number == second.leaf.serial_number
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "kubelet-server-2026-01-02-03-04-05.pem",
        "kubelet-server-current.pem",
    ]
    assert (tmp_path / "kubelet-server-2026-01-02-03-04-05.pem").stat().st_mode & 0o777 == 0o600


def test_a_pair_is_read_from_one_issue_while_the_store_rotates(tmp_path: Path) -> None:
    """The certificate and the key of ``-current.pem`` are read from the file opened when loading began: a
    rotation in the same second (the dated file replaced) between OpenSSL's two reads would otherwise pair
    one issue's certificate with the next one's key (KEY_VALUES_MISMATCH) and stop the node's start."""
    from kubelet_trio.certificate.reload import load_pair

    store = FileStore("kubelet-server", tmp_path)
    template = CertificateTemplate(NODE, (), ("127.0.0.1",))
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    store.update(*placeholder_pair(template, now), now=now)

    class RotatingBetweenReads:
        """Reads the certificate and the key as OpenSSL does, one open each, with a rotation between."""

        def load_cert_chain(self, cert_file: str, key_file: str) -> None:
            cert = Path(cert_file).read_bytes()
            store.update(*placeholder_pair(template, now), now=now)
            key = Path(key_file).read_bytes()
            end = b"-----END CERTIFICATE-----\n"
            joined = tmp_path / "as-read.pem"
            joined.write_bytes(cert[: cert.rindex(end) + len(end)] + key[key.rindex(end) + len(end) :])
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(str(joined))

    load_pair(RotatingBetweenReads(), str(store.current_path), str(store.current_path))  # type: ignore[arg-type]
