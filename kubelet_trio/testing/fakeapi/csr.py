"""CertificateSigningRequests in the fake API server, and a test CA that plays the controller manager.

The store keeps ``certificates.k8s.io/v1`` CSRs (cluster-scoped) with the API server's checks at creation
(``spec.request`` a PEM certificate request, ``signerName`` and ``usages`` present) and the ``approval``
subresource (only ``status.conditions`` change). :class:`CsrSigner` approves and signs them as the
controller manager's csrapproving and csrsigning controllers would, with a throw-away CA and a lifetime
the test picks (short, to see rotation); :meth:`CsrSigner.run` does it for every new request.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
from collections.abc import Callable

import attrs
import trio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kubelet_trio.api.timefmt import rfc3339
from kubelet_trio.testing.fakeapi.store import FakeApiError, FakeStore, Obj

__all__ = [
    "CSR_RESOURCE",
    "CsrSigner",
    "approve_csr",
    "check_csr_create",
    "csr_request",
]

CSR_RESOURCE = "certificatesigningrequests"


def check_csr_create(obj: Obj) -> None:
    """The API server's validation of a new CSR (the parts a kubelet can get wrong)."""
    name = obj["metadata"].get("name", "")
    spec = obj.get("spec") or {}

    def invalid(detail: str) -> FakeApiError:
        return FakeApiError(
            422, "Invalid", f'CertificateSigningRequest.certificates.k8s.io "{name}" is invalid: {detail}'
        )

    try:
        x509.load_pem_x509_csr(base64.b64decode(spec.get("request") or ""))
    except ValueError as err:
        raise invalid(f"spec.request: Invalid value: []byte{{...}}: {err}") from None
    if not spec.get("signerName"):
        raise invalid("spec.signerName: Required value")
    if not spec.get("usages"):
        raise invalid("spec.usages: Required value")
    obj["status"] = {}


def approve_csr(current: Obj, wanted: Obj) -> Obj:
    """``PUT .../approval``: the conditions of ``wanted`` replace the current ones, nothing else changes."""
    result = copy.deepcopy(current)
    conditions = (wanted.get("status") or {}).get("conditions") or []
    result.setdefault("status", {})["conditions"] = copy.deepcopy(conditions)
    return result


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


_CA_KEY_USAGE = x509.KeyUsage(
    digital_signature=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=True,
    crl_sign=True,
    encipher_only=False,
    decipher_only=False,
)


@attrs.define(eq=False)
class CsrSigner:
    """A CA that signs CSRs in ``store``; ``lifetime`` seconds per certificate (``notBefore`` = now)."""

    store: FakeStore
    lifetime: float = 3600.0
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
    signer_names: tuple[str, ...] = (
        "kubernetes.io/kube-apiserver-client-kubelet",
        "kubernetes.io/kubelet-serving",
    )
    key: ec.EllipticCurvePrivateKey = attrs.Factory(lambda: ec.generate_private_key(ec.SECP256R1()))
    ca: x509.Certificate = attrs.field(init=False)
    #: Names of the requests signed so far, in order.
    signed: list[str] = attrs.Factory(list)

    def __attrs_post_init__(self) -> None:
        start = self.now() - dt.timedelta(days=1)
        self.ca = (
            x509.CertificateBuilder()
            .subject_name(_name("kubelet-trio test CA"))
            .issuer_name(_name("kubelet-trio test CA"))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + dt.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            # what strict X.509 verification (Python 3.13+'s default) asks of a CA
            .add_extension(_CA_KEY_USAGE, critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
            .sign(self.key, hashes.SHA256())
        )

    @property
    def ca_pem(self) -> bytes:
        return self.ca.public_bytes(serialization.Encoding.PEM)

    def _condition(self, kind: str, reason: str, message: str) -> Obj:
        stamp = rfc3339(self.now())
        return {
            "type": kind,
            "status": "True",
            "reason": reason,
            "message": message,
            "lastUpdateTime": stamp,
            "lastTransitionTime": stamp,
        }

    def approve(self, name: str) -> None:
        csr = self.store.get(CSR_RESOURCE, None, name)
        conditions = (csr.get("status") or {}).get("conditions") or []
        conditions.append(
            self._condition("Approved", "AutoApproved", "approved by the kubelet-trio test signer")
        )
        self.store.replace(
            CSR_RESOURCE, None, name, {**csr, "status": {"conditions": conditions}}, "approval"
        )

    def deny(self, name: str, reason: str = "Denied", message: str = "denied by the test") -> None:
        csr = self.store.get(CSR_RESOURCE, None, name)
        self.store.replace(
            CSR_RESOURCE,
            None,
            name,
            {**csr, "status": {"conditions": [self._condition("Denied", reason, message)]}},
            "approval",
        )

    def certificate_for(self, csr: Obj, lifetime: float | None = None) -> bytes:
        """A certificate for the request in ``csr`` (its subject, SANs and usages), signed by the CA."""
        request = x509.load_pem_x509_csr(base64.b64decode(csr["spec"]["request"]))
        usages = set(csr["spec"].get("usages") or ())
        seconds = csr["spec"].get("expirationSeconds") or lifetime or self.lifetime
        start = self.now()
        builder = (
            x509.CertificateBuilder()
            .subject_name(request.subject)
            .issuer_name(self.ca.subject)
            .public_key(request.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + dt.timedelta(seconds=min(seconds, lifetime or self.lifetime)))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
        )
        ext = [ExtendedKeyUsageOID.CLIENT_AUTH] * ("client auth" in usages)
        ext += [ExtendedKeyUsageOID.SERVER_AUTH] * ("server auth" in usages)
        if ext:
            builder = builder.add_extension(x509.ExtendedKeyUsage(ext), critical=False)
        try:
            san = request.extensions.get_extension_for_class(x509.SubjectAlternativeName)
            builder = builder.add_extension(san.value, critical=False)
        except x509.ExtensionNotFound:
            pass
        cert = builder.sign(self.key, hashes.SHA256())
        return cert.public_bytes(serialization.Encoding.PEM)

    def sign(self, name: str, lifetime: float | None = None) -> bytes:
        """Approve (when not yet) and issue ``name``; the certificate PEM."""
        csr = self.store.get(CSR_RESOURCE, None, name)
        conditions = (csr.get("status") or {}).get("conditions") or []
        if not any(c.get("type") == "Approved" for c in conditions):
            self.approve(name)
            csr = self.store.get(CSR_RESOURCE, None, name)
        pem = self.certificate_for(csr, lifetime)
        status = {**(csr.get("status") or {}), "certificate": base64.b64encode(pem).decode()}
        self.store.replace(CSR_RESOURCE, None, name, {**csr, "status": status}, "status")
        self.signed.append(name)
        return pem

    def pending(self) -> list[str]:
        """Requests for our signers with neither a certificate nor a Denied/Failed condition."""
        names = []
        for csr in self.store.list(CSR_RESOURCE, None)["items"]:
            status = csr.get("status") or {}
            done = status.get("certificate") or any(
                c.get("type") in ("Denied", "Failed") for c in status.get("conditions") or ()
            )
            if not done and csr["spec"].get("signerName") in self.signer_names:
                names.append(csr["metadata"]["name"])
        return names

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Approve and sign every request as it arrives (the controller manager's job)."""
        task_status.started()
        while True:
            for name in self.pending():
                self.sign(name)
            await self.store.changed.wait_transition()


def csr_request(csr: Obj) -> x509.CertificateSigningRequest:
    return x509.load_pem_x509_csr(base64.b64decode(csr["spec"]["request"]))
