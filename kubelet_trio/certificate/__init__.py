"""The kubelet's certificates: TLS bootstrap, CSRs, rotation (Go: ``pkg/kubelet/certificate`` and
client-go ``util/certificate``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
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
    from kubelet_trio.certificate.reload import reload_certificate_files
    from kubelet_trio.certificate.serving import open_serving_certificate
    from kubelet_trio.certificate.store import CertificatePair, FileStore, StoreError
    from kubelet_trio.certificate.transport import ClientCertificateRotation, tls_context_for

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "CLIENT_PREFIX": "kubelet_trio.certificate.bootstrap",
    "BootstrapError": "kubelet_trio.certificate.bootstrap",
    "kubeconfig_still_valid": "kubelet_trio.certificate.bootstrap",
    "load_client_cert": "kubelet_trio.certificate.bootstrap",
    "CLIENT_USAGES": "kubelet_trio.certificate.csr",
    "CSR_PATH": "kubelet_trio.certificate.csr",
    "KUBELET_CLIENT_SIGNER": "kubelet_trio.certificate.csr",
    "KUBELET_SERVING_SIGNER": "kubelet_trio.certificate.csr",
    "SERVING_USAGES": "kubelet_trio.certificate.csr",
    "CertificateRequestError": "kubelet_trio.certificate.csr",
    "CertificateTemplate": "kubelet_trio.certificate.csr",
    "make_csr": "kubelet_trio.certificate.csr",
    "request_certificate": "kubelet_trio.certificate.csr",
    "wait_for_certificate": "kubelet_trio.certificate.csr",
    "SERVER_PREFIX": "kubelet_trio.certificate.kubelet",
    "NodeCertificates": "kubelet_trio.certificate.kubelet",
    "client_certificate_manager": "kubelet_trio.certificate.kubelet",
    "open_node_api_client": "kubelet_trio.certificate.kubelet",
    "serving_certificate_manager": "kubelet_trio.certificate.kubelet",
    "CertificateManager": "kubelet_trio.certificate.manager",
    "RotationBackoff": "kubelet_trio.certificate.manager",
    "rotation_deadline": "kubelet_trio.certificate.manager",
    "open_serving_certificate": "kubelet_trio.certificate.serving",
    "reload_certificate_files": "kubelet_trio.certificate.reload",
    "CertificatePair": "kubelet_trio.certificate.store",
    "FileStore": "kubelet_trio.certificate.store",
    "StoreError": "kubelet_trio.certificate.store",
    "ClientCertificateRotation": "kubelet_trio.certificate.transport",
    "tls_context_for": "kubelet_trio.certificate.transport",
}

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


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
