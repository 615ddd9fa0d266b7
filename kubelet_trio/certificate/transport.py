"""A running API client's client certificate, renewed without a restart (Go:
``pkg/kubelet/certificate/transport.go``).

New connections present the newest certificate. On rotation the connections opened with the old one are
closed, as Go's rotating dialer does, so that nothing keeps talking as an identity about to expire:
requests in flight are retried by the API client and watches resume from their resourceVersion.
"""

from __future__ import annotations

import logging
import ssl

import attrs

from kubelet_trio.certificate.store import CertificatePair
from kubelet_trio.client import ApiClient, KubeConfig, make_ssl_context
from kubelet_trio.logs import kv

__all__ = ["ClientCertificateRotation", "tls_context_for"]

logger = logging.getLogger(__name__)


def tls_context_for(config: KubeConfig, pair: CertificatePair) -> ssl.SSLContext:
    """``config``'s TLS settings, presenting ``pair``."""
    return make_ssl_context(
        attrs.evolve(config, client_cert_data=pair.cert_pem, client_key_data=pair.key_pem)
    )


@attrs.define(eq=False)
class ClientCertificateRotation:
    """Hands a certificate manager's renewed pair to a running client (add :meth:`rotate` as a listener)."""

    config: KubeConfig
    client: ApiClient
    serial: int  # of the certificate new connections present

    async def rotate(self, pair: CertificatePair) -> None:
        """Present ``pair`` from now on; close the connections made with the previous one."""
        await self.client.use_tls_context(tls_context_for(self.config, pair))
        self.serial = pair.leaf.serial_number
        logger.info(
            "client certificate rotated; reconnecting", extra=kv(serial=f"{pair.leaf.serial_number:x}")
        )
