"""Certificate/key pairs on disk (Go: client-go ``util/certificate.FileStore``).

Each issued pair is written once, certificate then key in one PEM file readable by root only
(``<prefix>-2006-01-02-15-04-05.pem``, mode 0600), and ``<prefix>-current.pem`` is a symlink to the newest:
a kubeconfig names the link. Both the file and the link are replaced atomically (written aside, renamed
over), so a reader loading the pair never sees half of one. Older pairs are kept, as Go keeps them.
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
from pathlib import Path

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

__all__ = ["CertificatePair", "FileStore", "StoreError"]

CURRENT = "current"


class StoreError(Exception):
    """A pair that does not load or does not match; the message names the file."""


@attrs.frozen
class CertificatePair:
    """A certificate (with its chain) and its private key, as PEM, with the parsed leaf."""

    cert_pem: bytes
    key_pem: bytes
    leaf: x509.Certificate

    @property
    def not_before(self) -> dt.datetime:
        return self.leaf.not_valid_before_utc

    @property
    def not_after(self) -> dt.datetime:
        return self.leaf.not_valid_after_utc

    @classmethod
    def parse(cls, cert_pem: bytes, key_pem: bytes, source: str) -> CertificatePair:
        try:
            certs = x509.load_pem_x509_certificates(cert_pem)
        except ValueError as err:
            raise StoreError(f"{source}: no valid certificate: {err}") from None
        try:
            key = serialization.load_pem_private_key(key_pem, password=None)
        except (ValueError, TypeError) as err:
            raise StoreError(f"{source}: no valid private key: {err}") from None
        if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
            raise StoreError(f"{source}: unsupported private key type {type(key).__name__}")
        public = serialization.PublicFormat.SubjectPublicKeyInfo
        if key.public_key().public_bytes(serialization.Encoding.DER, public) != certs[
            0
        ].public_key().public_bytes(serialization.Encoding.DER, public):
            raise StoreError(f"{source}: the private key does not match the certificate")
        return cls(cert_pem, key_pem, certs[0])


def _split_pem(data: bytes) -> tuple[bytes, bytes]:
    """(certificate blocks, key block) of a combined PEM file."""
    certs: list[bytes] = []
    keys: list[bytes] = []
    block: list[bytes] = []
    for line in data.splitlines(keepends=True):
        if line.startswith(b"-----BEGIN "):
            block = [line]
            continue
        if block:
            block.append(line)
            if line.startswith(b"-----END "):
                text = b"".join(block)
                (certs if b"CERTIFICATE" in block[0] else keys).append(text)
                block = []
    return b"".join(certs), b"".join(keys[:1])


@attrs.define(eq=False)
class FileStore:
    """Pairs named ``<prefix>-*.pem`` in ``directory`` (Go's ``kubelet-client`` / ``kubelet-server``)."""

    prefix: str
    directory: Path

    @property
    def current_path(self) -> Path:
        return self.directory / f"{self.prefix}-{CURRENT}.pem"

    def current(self) -> CertificatePair | None:
        """The current pair, None when there is none yet. Blocking."""
        path = self.current_path
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as err:
            raise StoreError(f"cannot read {path}: {err}") from None
        cert, key = _split_pem(data)
        return CertificatePair.parse(cert, key, str(path))

    def update(self, cert_pem: bytes, key_pem: bytes, *, now: dt.datetime | None = None) -> CertificatePair:
        """Write a new dated pair (0600) and point the current link at it. Blocking."""
        pair = CertificatePair.parse(cert_pem, key_pem, f"new {self.prefix} certificate")
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%d-%H-%M-%S")
        path = self.directory / f"{self.prefix}-{stamp}.pem"
        # written aside and renamed into place: two pairs in one second share a name, and the current
        # link may already name it while a server is loading it
        fd, staged = tempfile.mkstemp(prefix=f".{path.name}.", dir=self.directory)  # mode 0600
        with os.fdopen(fd, "wb") as out:
            out.write(cert_pem if cert_pem.endswith(b"\n") else cert_pem + b"\n")
            out.write(key_pem)
        os.replace(staged, path)
        updated = self.directory / f"{self.prefix}-{CURRENT}.pem.updated"
        updated.unlink(missing_ok=True)
        updated.symlink_to(path.resolve())
        updated.replace(self.current_path)
        return pair
