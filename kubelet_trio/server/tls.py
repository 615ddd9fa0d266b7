"""The Kubelet API's serving certificate (Go: ``cmd/kubelet/app/server.go`` ``InitializeTLS``).

With ``--tls-cert-file``/``--tls-private-key-file`` the kubelet serves that pair; without them it
generates a self-signed pair once under ``<root-dir>/pki/kubelet.crt|key`` (kept across restarts), named
for the node: CN ``<node>@<unix time>``, SANs the node name and every node IP (and ``localhost`` and
127.0.0.1, as the Go kubelet's ``GenerateSelfSignedCertKey`` adds).

The pair is made by a short-lived child (``python -m kubelet_trio.server.tls``): cryptography's extension
(~9 MB) stays resident in a process once loaded, and the node needs it only this once.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import subprocess
import sys
from collections.abc import Sequence

__all__ = ["self_signed_pair", "serving_pair", "write_self_signed_pair"]

VALIDITY = datetime.timedelta(days=365)
#: seconds the child making the pair may take (it starts an interpreter and makes one EC key)
GENERATE_TIMEOUT = 60.0


def self_signed_pair(
    host: str, ips: Sequence[str], *, now: datetime.datetime | None = None
) -> tuple[bytes, bytes]:
    """``(cert PEM, key PEM)``: a self-signed serving certificate for ``host`` and ``ips``."""
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


def write_self_signed_pair(cert_path: str, key_path: str, host: str, ips: Sequence[str]) -> None:
    """Make the pair in this process and write it: the key 0600, then the certificate (whose presence
    :func:`serving_pair` takes for a complete pair)."""
    os.makedirs(os.path.dirname(cert_path), mode=0o755, exist_ok=True)
    cert_pem, key_pem = self_signed_pair(host, ips)
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(key_pem)
    with open(cert_path, "wb") as out:
        out.write(cert_pem)


def _write_in_child(cert_path: str, key_path: str, host: str, ips: Sequence[str]) -> None:
    argv = [sys.executable, "-m", __name__, cert_path, key_path, host, *ips]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=GENERATE_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise RuntimeError(f"making the self-signed serving certificate {cert_path}: {err}") from None
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines() or [f"exit {done.returncode}"]
        raise RuntimeError(f"making the self-signed serving certificate {cert_path}: {lines[-1][:500]}")


def serving_pair(
    cert_file: str, key_file: str, root_dir: str, host: str, ips: Sequence[str]
) -> tuple[str, str]:
    """The ``(cert, key)`` paths to serve: the configured pair, else the generated one (made once, by a
    child process when this one runs a Python that can start one). Blocking: call through ``run_sync``."""
    if cert_file and key_file:
        return cert_file, key_file
    pki = os.path.join(root_dir, "pki")
    cert_path, key_path = os.path.join(pki, "kubelet.crt"), os.path.join(pki, "kubelet.key")
    if os.path.exists(cert_path) and os.path.exists(key_path):
        return cert_path, key_path
    if sys.executable:
        _write_in_child(cert_path, key_path, host, ips)
    else:  # an embedding interpreter with no executable to start
        write_self_signed_pair(cert_path, key_path, host, ips)
    return cert_path, key_path


if __name__ == "__main__":
    write_self_signed_pair(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
