"""An HTTPS transport whose client certificate can change under a running API client (Go:
``pkg/kubelet/certificate/transport.go``).

New connections present the newest certificate. On rotation the connections opened with the old one are
closed, as Go's rotating dialer does, so that nothing keeps talking as an identity about to expire:
requests in flight are retried by the API client and watches resume from their resourceVersion.
"""

from __future__ import annotations

import logging

import attrs
import httpx
import trio

from kubelet_trio.certificate.store import CertificatePair
from kubelet_trio.client import KubeConfig, make_ssl_context
from kubelet_trio.logs import kv

__all__ = ["RotatingTransport"]

logger = logging.getLogger(__name__)

#: How long closing the old connections may take before they are abandoned.
CLOSE_GRACE = 5.0


def _transport(config: KubeConfig, pair: CertificatePair) -> httpx.AsyncHTTPTransport:
    context = make_ssl_context(
        attrs.evolve(config, client_cert_data=pair.cert_pem, client_key_data=pair.key_pem)
    )
    return httpx.AsyncHTTPTransport(verify=context, trust_env=False)


@attrs.define(eq=False)
class RotatingTransport(httpx.AsyncBaseTransport):
    """Use as ``open_api_client(config, transport=RotatingTransport.for_pair(config, pair))``."""

    config: KubeConfig
    _inner: httpx.AsyncHTTPTransport
    serial: int  # of the certificate new connections present

    @classmethod
    def for_pair(cls, config: KubeConfig, pair: CertificatePair) -> RotatingTransport:
        return cls(config, _transport(config, pair), pair.leaf.serial_number)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._inner.handle_async_request(request)

    async def rotate(self, pair: CertificatePair) -> None:
        """Present ``pair`` from now on; close the connections made with the previous one."""
        old, self._inner = self._inner, _transport(self.config, pair)
        self.serial = pair.leaf.serial_number
        logger.info(
            "client certificate rotated; reconnecting", extra=kv(serial=f"{pair.leaf.serial_number:x}")
        )
        with trio.move_on_after(CLOSE_GRACE, shield=True):
            await old.aclose()

    async def aclose(self) -> None:
        await self._inner.aclose()
