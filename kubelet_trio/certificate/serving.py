"""The Kubelet API's serving certificate from the cluster (``serverTLSBootstrap`` /
``--rotate-server-certificates``; Go: ``NewKubeletServerCertificateManager``).

The certificate is requested with a ``kubernetes.io/kubelet-serving`` CSR naming the node's host names
and IPs; such requests are not approved automatically by the controller manager (an operator or an
approver must check the addresses), so until one is issued the server presents a self-signed placeholder
from the same store, which the manager replaces at once. The server follows the store's current file
(:mod:`kubelet_trio.certificate.reload`): a new pair is served on new connections without a restart.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from kubelet_trio.certificate.csr import CertificateTemplate, generate_key, key_pem
from kubelet_trio.certificate.kubelet import serving_certificate_manager
from kubelet_trio.certificate.store import FileStore, StoreError
from kubelet_trio.client import ApiClient
from kubelet_trio.clock import WallClock
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.logs import kv

if TYPE_CHECKING:
    from kubelet_trio.certificate.manager import CertificateMetrics

__all__ = ["open_serving_certificate", "placeholder_pair"]

logger = logging.getLogger(__name__)

#: How often the served certificate file is checked for a new pair.
PLACEHOLDER_LIFETIME = dt.timedelta(days=1)


def placeholder_pair(template: CertificateTemplate, now: dt.datetime) -> tuple[bytes, bytes]:
    """A self-signed certificate for ``template`` (PEM certificate, PEM key)."""
    from cryptography import x509  # loaded to sign, not by a node that only serves given files
    from cryptography.hazmat.primitives import hashes, serialization

    key = generate_key()
    subject = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, template.common_name)])
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in template.dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in template.ip_addresses]
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + PLACEHOLDER_LIFETIME)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
    return cert, key_pem(key)


def _ensure_pair(store: FileStore, template: CertificateTemplate, now: dt.datetime) -> None:
    try:
        if store.current() is not None:
            return
    except StoreError as err:
        logger.warning("stored serving certificate unusable; replacing it", extra=kv(error=err))
    cert, key = placeholder_pair(template, now)
    store.update(cert, key, now=now)


@contextlib.asynccontextmanager
async def open_serving_certificate(
    client: ApiClient,
    node_name: str,
    cert_dir: str | Path,
    addresses: Callable[[], tuple[Sequence[str], Sequence[str]]],
    *,
    clock: WallClock | None = None,
    run_sync: RunSync = run_in_thread,
    metrics: CertificateMetrics | None = None,
) -> AsyncIterator[Path]:
    """Keep ``<cert_dir>/kubelet-server-current.pem`` issued by the cluster for the block; yields that
    path (certificate and key in one file, for ``tlsCertFile`` and ``tlsPrivateKeyFile``). ``metrics``
    gets the serving certificate's TTL and renewal errors."""
    wall = clock or WallClock()
    manager = serving_certificate_manager(node_name, cert_dir, lambda: client, addresses, clock=wall)
    manager.run_sync = run_sync
    if metrics is not None:
        metrics.track_certificates(server=manager)
    await run_sync(_ensure_pair, manager.store, manager.template(), wall.now())
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        yield manager.store.current_path
        nursery.cancel_scope.cancel()
