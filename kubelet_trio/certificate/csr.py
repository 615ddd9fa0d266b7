"""Certificate signing requests through the API (Go: client-go ``util/certificate/csr``).

:func:`request_certificate` creates a ``certificates.k8s.io/v1`` CertificateSigningRequest (reusing one of
the same name when it was made for the same key, as after a restart); :func:`wait_for_certificate` lists
and then watches that one object (by ``metadata.name`` field selector) until it is approved and carries a
certificate, and fails when it is denied, failed or deleted. Keys are ECDSA P-256, as the Go kubelet makes.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import logging
from collections.abc import Sequence
from typing import Any

import attrs
import trio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kubelet_trio.client import (
    AlreadyExists,
    ApiClient,
    ApiUnavailable,
    Gone,
    ServerError,
    StatusError,
    TooManyRequests,
)
from kubelet_trio.logs import kv

__all__ = [
    "CLIENT_USAGES",
    "CSR_PATH",
    "KUBELET_CLIENT_SIGNER",
    "KUBELET_SERVING_SIGNER",
    "SERVING_USAGES",
    "CertificateRequestError",
    "CertificateTemplate",
    "digested_name",
    "generate_key",
    "make_csr",
    "request_certificate",
    "wait_for_certificate",
]

logger = logging.getLogger(__name__)

CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
KUBELET_CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING_SIGNER = "kubernetes.io/kubelet-serving"
#: The usages the signers' validation expects of a kubelet (Go: ``kubelet.go``; key encipherment is
#: still required by 1.24-era API servers for client certificates, whatever the key type).
CLIENT_USAGES = ("digital signature", "key encipherment", "client auth")
SERVING_USAGES = ("digital signature", "key encipherment", "server auth")
#: Seconds between watch attempts when the API server is unreachable.
WATCH_RETRY = 1.0


class CertificateRequestError(Exception):
    """The request could not be made, or was denied, failed or deleted; the message says which."""


@attrs.frozen
class CertificateTemplate:
    """What a requested certificate names: ``CN=system:node:<name>, O=system:nodes`` and, for serving
    certificates, the node's host names and IPs as subject alternative names."""

    common_name: str
    organizations: tuple[str, ...] = ("system:nodes",)
    dns_names: tuple[str, ...] = ()
    ip_addresses: tuple[str, ...] = ()

    @classmethod
    def for_node(
        cls, node_name: str, *, dns_names: Sequence[str] = (), ips: Sequence[str] = ()
    ) -> CertificateTemplate:
        return cls(
            f"system:node:{node_name}",
            ("system:nodes",),
            tuple(sorted(set(dns_names))),
            tuple(sorted(set(ips))),
        )

    def satisfied_by(self, cert: x509.Certificate) -> bool:
        """The certificate names everything asked for (extra names are fine), as Go's check."""
        cns = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
        orgs = {a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)}
        try:
            san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            dns = set(san.get_values_for_type(x509.DNSName))
            ips = {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}
        except x509.ExtensionNotFound:
            dns, ips = set(), set()
        return (
            cns == [self.common_name]
            and set(self.organizations) <= orgs
            and set(self.dns_names) <= dns
            and set(self.ip_addresses) <= ips
        )


def generate_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    """``EC PRIVATE KEY`` PEM, as Go's ``keyutil.MarshalPrivateKeyToPEM`` writes an ECDSA key."""
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def make_csr(key: ec.EllipticCurvePrivateKey, template: CertificateTemplate) -> bytes:
    """A PEM ``CERTIFICATE REQUEST`` for ``template``, signed by ``key``."""
    names = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in template.organizations]
    names.append(x509.NameAttribute(NameOID.COMMON_NAME, template.common_name))
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(names))
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in template.dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in template.ip_addresses]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def digested_name(
    key: ec.EllipticCurvePrivateKey, template: CertificateTemplate, usages: Sequence[str]
) -> str:
    """``node-csr-<digest>``: the same key, subject and usages give the same name, so a bootstrap that is
    restarted while it waits finds its own request again (Go: ``digestedName``)."""
    public = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    digest = hashlib.sha512(public)
    for part in (template.common_name, *template.organizations, *usages):
        digest.update(b"|" + part.encode())
    return "node-csr-" + base64.urlsafe_b64encode(digest.digest()[:32]).decode().rstrip("=")


def _csr_public_key(request_pem: bytes) -> bytes:
    csr = x509.load_pem_x509_csr(request_pem)
    return csr.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


async def request_certificate(
    client: ApiClient,
    csr_pem: bytes,
    *,
    signer_name: str,
    usages: Sequence[str],
    name: str = "",
    expiration_seconds: int | None = None,
) -> tuple[str, str]:
    """Create the CSR; its (name, uid). With ``name``, an existing CSR of that name for the same public key
    is reused; for another key it is an error."""
    spec: dict[str, Any] = {
        "request": base64.b64encode(csr_pem).decode(),
        "signerName": signer_name,
        "usages": list(usages),
    }
    if expiration_seconds is not None:
        spec["expirationSeconds"] = expiration_seconds
    metadata = {"name": name} if name else {"generateName": "csr-"}
    body = {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": metadata,
        "spec": spec,
    }
    try:
        created = await client.create(CSR_PATH, body)
    except AlreadyExists:
        if not name:
            raise
        existing = await client.get(f"{CSR_PATH}/{name}")
        theirs = base64.b64decode(existing["spec"]["request"])
        if _csr_public_key(theirs) != _csr_public_key(csr_pem):
            raise CertificateRequestError(
                f"certificate signing request {name} exists for another key"
            ) from None
        logger.info("reusing the existing certificate signing request", extra=kv(csr=name))
        return name, str(existing["metadata"]["uid"])
    except StatusError as err:
        raise CertificateRequestError(f"cannot create certificate signing request: {err}") from None
    meta = created["metadata"]
    logger.info("certificate signing request created", extra=kv(csr=meta["name"], signer=signer_name))
    return str(meta["name"]), str(meta["uid"])


def _issued(csr: dict[str, Any], name: str, uid: str) -> bytes | None:
    """The certificate when issued; None while pending; raises when denied or failed."""
    if csr["metadata"].get("uid") != uid:
        raise CertificateRequestError(f"certificate signing request {name} changed UIDs")
    status = csr.get("status") or {}
    approved = False
    for condition in status.get("conditions") or ():
        kind = condition.get("type")
        if kind in ("Denied", "Failed"):
            verb = "denied" if kind == "Denied" else "failed"
            raise CertificateRequestError(
                f"certificate signing request {name} is {verb}, reason: {condition.get('reason', '')},"
                f" message: {condition.get('message', '')}"
            )
        approved = approved or kind == "Approved"
    if approved and status.get("certificate"):
        return base64.b64decode(status["certificate"])
    return None


async def wait_for_certificate(client: ApiClient, name: str, uid: str) -> bytes:
    """The PEM certificate once ``name`` is approved and issued. Watches resume from the last
    resourceVersion seen; the caller bounds the wait (Go: one hour)."""
    selector = {"fieldSelector": f"metadata.name={name}"}
    rv = ""
    while True:
        try:
            if not rv:
                listed = await client.get(CSR_PATH, selector)
                for item in listed.get("items") or ():
                    if (cert := _issued(item, name, uid)) is not None:
                        return cert
                if not listed.get("items"):
                    raise CertificateRequestError(f"certificate signing request {name} was deleted")
                rv = listed["metadata"]["resourceVersion"]
            async with client.open_watch(CSR_PATH, {**selector, "resourceVersion": rv}) as events:
                async for event in events:
                    if event.type == "ERROR":
                        if isinstance(event.error(), Gone):
                            rv = ""
                        break
                    if event.type == "DELETED":
                        raise CertificateRequestError(f"certificate signing request {name} was deleted")
                    rv = str(event.object.get("metadata", {}).get("resourceVersion") or rv)
                    if event.type in ("ADDED", "MODIFIED") and (cert := _issued(event.object, name, uid)):
                        return cert
        except Gone:
            rv = ""
        except (ApiUnavailable, ServerError, TooManyRequests) as err:
            logger.info("waiting for the certificate: API server unavailable", extra=kv(csr=name, error=err))
        await trio.sleep(WATCH_RETRY)
