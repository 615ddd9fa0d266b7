"""The kubelet's certificates, wired (Go: ``pkg/kubelet/certificate/kubelet.go`` and the client setup of
``cmd/kubelet/app/server.go``).

:func:`open_node_api_client` is the daemon's API client in API server mode: TLS bootstrap first when a
bootstrap kubeconfig is given, then a client on ``--kubeconfig``; with ``--rotate-certificates`` (and a
client certificate to rotate) the client's certificate is renewed in the background by a
:class:`CertificateManager` and handed to the running client (:class:`ClientCertificateRotation`) — no
restart.
:func:`client_certificate_manager` and :func:`serving_certificate_manager` build the two managers.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import trio

from kubelet_trio.certificate.bootstrap import CLIENT_PREFIX, OpenClient, load_client_cert
from kubelet_trio.certificate.csr import (
    CLIENT_USAGES,
    KUBELET_CLIENT_SIGNER,
    KUBELET_SERVING_SIGNER,
    SERVING_USAGES,
    CertificateTemplate,
)
from kubelet_trio.certificate.manager import CertificateManager
from kubelet_trio.certificate.store import CertificatePair, FileStore, StoreError
from kubelet_trio.certificate.transport import ClientCertificateRotation, tls_context_for
from kubelet_trio.client import ApiClient, KubeConfig, KubeConfigError, load_kubeconfig, open_api_client
from kubelet_trio.client.ratelimit import DEFAULT_BURST, DEFAULT_QPS
from kubelet_trio.clock import WallClock
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.logs import kv

if TYPE_CHECKING:
    from kubelet_trio.certificate.manager import CertificateMetrics

__all__ = [
    "SERVER_PREFIX",
    "NodeCertificates",
    "client_certificate_manager",
    "open_node_api_client",
    "serving_certificate_manager",
]

logger = logging.getLogger(__name__)

SERVER_PREFIX = "kubelet-server"


class NodeCertificates(Protocol):
    """What :func:`open_node_api_client` reads of the settings (``options.CertificateSettings`` has it)."""

    @property
    def kubeconfig(self) -> str: ...
    @property
    def bootstrap_kubeconfig(self) -> str: ...
    @property
    def cert_dir(self) -> str: ...
    @property
    def rotate_certificates(self) -> bool: ...
    @property
    def node_name(self) -> str: ...


def client_certificate_manager(
    node_name: str,
    cert_dir: str | Path,
    client: Callable[[], ApiClient],
    *,
    clock: WallClock | None = None,
) -> CertificateManager:
    """Renews ``kubelet-client-current.pem`` (``CN=system:node:<name>``) with the client it renews."""
    template = CertificateTemplate.for_node(node_name)
    return CertificateManager(
        CLIENT_PREFIX,
        FileStore(CLIENT_PREFIX, Path(cert_dir)),
        lambda: template,
        KUBELET_CLIENT_SIGNER,
        CLIENT_USAGES,
        client,
        clock=clock or WallClock(),
    )


def serving_certificate_manager(
    node_name: str,
    cert_dir: str | Path,
    client: Callable[[], ApiClient],
    addresses: Callable[[], tuple[Sequence[str], Sequence[str]]],
    *,
    clock: WallClock | None = None,
) -> CertificateManager:
    """Keeps ``kubelet-server-current.pem`` (``kubernetes.io/kubelet-serving``) naming the node's current
    host names and IPs (``addresses()`` gives both); a new address triggers a new request."""

    def template() -> CertificateTemplate:
        dns, ips = addresses()
        return CertificateTemplate.for_node(node_name, dns_names=dns, ips=ips)

    return CertificateManager(
        "kubelet-serving",
        FileStore(SERVER_PREFIX, Path(cert_dir)),
        template,
        KUBELET_SERVING_SIGNER,
        SERVING_USAGES,
        client,
        clock=clock or WallClock(),
    )


def _initial_pair(config: KubeConfig, store: FileStore) -> CertificatePair | None:
    """The newer of the kubeconfig's certificate and the store's current one. Blocking."""
    candidates: list[CertificatePair] = []
    if config.client_cert_data and config.client_key_data:
        try:
            candidates.append(
                CertificatePair.parse(config.client_cert_data, config.client_key_data, "kubeconfig")
            )
        except StoreError as err:
            logger.warning("kubeconfig client certificate unusable", extra=kv(error=err))
    try:
        if (stored := store.current()) is not None:
            candidates.append(stored)
    except StoreError as err:
        logger.warning("stored client certificate unusable", extra=kv(error=err))
    return max(candidates, key=lambda p: p.not_after, default=None)


@contextlib.asynccontextmanager
async def open_node_api_client(
    settings: NodeCertificates,
    *,
    qps: float = DEFAULT_QPS,
    burst: int = DEFAULT_BURST,
    clock: WallClock | None = None,
    open_bootstrap_client: OpenClient | None = None,
    run_sync: RunSync = run_in_thread,
    metrics: CertificateMetrics | None = None,
) -> AsyncIterator[ApiClient]:
    """The node's API client for the block; bootstrap and rotation as the settings ask. An unusable
    kubeconfig or a failed bootstrap is a RuntimeError naming the file (the CLI's one-line report).
    With rotation on, ``metrics`` gets the client certificate's TTL and renewal errors."""
    wall = clock or WallClock()
    if settings.bootstrap_kubeconfig:
        await load_client_cert(
            settings.kubeconfig,
            settings.bootstrap_kubeconfig,
            settings.cert_dir,
            settings.node_name,
            now=wall.now,
            open_client=open_bootstrap_client,
            run_sync=run_sync,
        )
    try:
        config = load_kubeconfig(settings.kubeconfig)
    except KubeConfigError as err:
        raise RuntimeError(f"--kubeconfig: {err}") from None
    client_box: list[ApiClient] = []  # the client the manager renews with, once open
    manager = None
    pair = None
    if settings.rotate_certificates and config.uses_tls:
        manager = client_certificate_manager(
            settings.node_name, settings.cert_dir, lambda: client_box[0], clock=wall
        )
        manager.run_sync = run_sync
        pair = await run_sync(_initial_pair, config, manager.store)
    if manager is None or pair is None:
        if settings.rotate_certificates:
            logger.warning("certificate rotation needs a client certificate over https; not rotating")
        async with open_api_client(config, qps=qps, burst=burst) as client:
            yield client
        return
    manager.current.value = pair
    if metrics is not None:
        metrics.track_certificates(client=manager)
    context = tls_context_for(config, pair)
    async with open_api_client(config, tls_context=context, qps=qps, burst=burst) as client:
        client_box.append(client)
        manager.listeners.append(ClientCertificateRotation(config, client, pair.leaf.serial_number).rotate)
        async with trio.open_nursery() as nursery:
            await nursery.start(manager.run)
            logger.info(
                "client certificate rotation enabled",
                extra=kv(expiration=pair.not_after.astimezone(dt.UTC).isoformat()),
            )
            yield client
            nursery.cancel_scope.cancel()
