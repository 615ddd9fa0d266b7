"""The kubelet's certificates: TLS bootstrap, CSRs, rotation (Go: ``pkg/kubelet/certificate`` and
client-go ``util/certificate``)."""

from __future__ import annotations

from kubelet_trio.certificate.bootstrap import (
    CLIENT_PREFIX,
    BootstrapError,
    kubeconfig_still_valid,
    load_client_cert,
)
from kubelet_trio.certificate.csr import (
    CLIENT_USAGES,
    CSR_PATH,
    KUBELET_CLIENT_SIGNER,
    KUBELET_SERVING_SIGNER,
    SERVING_USAGES,
    CertificateRequestError,
    CertificateTemplate,
    make_csr,
    request_certificate,
    wait_for_certificate,
)
from kubelet_trio.certificate.kubelet import (
    SERVER_PREFIX,
    NodeCertificates,
    client_certificate_manager,
    open_node_api_client,
    serving_certificate_manager,
)
from kubelet_trio.certificate.manager import CertificateManager, RotationBackoff, rotation_deadline
from kubelet_trio.certificate.serving import open_serving_certificate, reload_certificate_files
from kubelet_trio.certificate.store import CertificatePair, FileStore, StoreError
from kubelet_trio.certificate.transport import ClientCertificateRotation, tls_context_for

__all__ = [
    "CLIENT_PREFIX",
    "CLIENT_USAGES",
    "CSR_PATH",
    "KUBELET_CLIENT_SIGNER",
    "KUBELET_SERVING_SIGNER",
    "SERVER_PREFIX",
    "SERVING_USAGES",
    "BootstrapError",
    "CertificateManager",
    "CertificatePair",
    "CertificateRequestError",
    "CertificateTemplate",
    "ClientCertificateRotation",
    "FileStore",
    "NodeCertificates",
    "RotationBackoff",
    "StoreError",
    "client_certificate_manager",
    "kubeconfig_still_valid",
    "load_client_cert",
    "make_csr",
    "open_node_api_client",
    "open_serving_certificate",
    "reload_certificate_files",
    "request_certificate",
    "rotation_deadline",
    "serving_certificate_manager",
    "tls_context_for",
    "wait_for_certificate",
]
