"""The Kubelet API's serving certificate (Go: ``cmd/kubelet/app/server.go`` ``InitializeTLS``).

With ``--tls-cert-file``/``--tls-private-key-file`` the kubelet serves that pair; without them it
generates a self-signed pair once under ``<root-dir>/pki/kubelet.crt|key`` (kept across restarts), named
for the node: CN ``<node>@<unix time>``, SANs the node name and every node IP (and ``localhost`` and
127.0.0.1, as the Go kubelet's ``GenerateSelfSignedCertKey`` adds).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence

__all__ = ["self_signed_pair", "serving_pair"]

VALIDITY = datetime.timedelta(days=365)


def self_signed_pair(
    host: str, ips: Sequence[str], *, now: datetime.datetime | None = None
) -> tuple[bytes, bytes]:
    """``(cert PEM, key PEM)``: a self-signed serving certificate for ``host`` and ``ips``."""
    # cryptography's extension stays resident once loaded: only a node that makes its pair loads it
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = now or datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}@{int(now.timestamp())}")])
    addresses = list(dict.fromkeys([*ips, "127.0.0.1"]))
    dns_names = list(dict.fromkeys([host, "localhost"]))
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in addresses]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def serving_pair(
    cert_file: str, key_file: str, root_dir: str, host: str, ips: Sequence[str]
) -> tuple[str, str]:
    """The ``(cert, key)`` paths to serve: the configured pair, else the generated one (made once).
    Blocking file I/O: call through ``run_sync``."""
    if cert_file and key_file:
        return cert_file, key_file
    pki = os.path.join(root_dir, "pki")
    cert_path, key_path = os.path.join(pki, "kubelet.crt"), os.path.join(pki, "kubelet.key")
    if os.path.exists(cert_path) and os.path.exists(key_path):
        return cert_path, key_path
    os.makedirs(pki, mode=0o755, exist_ok=True)
    cert_pem, key_pem = self_signed_pair(host, ips)
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(key_pem)
    with open(cert_path, "wb") as out:
        out.write(cert_pem)
    return cert_path, key_path
