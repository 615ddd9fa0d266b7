"""TLS bootstrap: from bootstrap credentials to a client certificate and kubeconfig of the node's own (Go:
``pkg/kubelet/certificate/bootstrap``).

When ``--kubeconfig`` does not hold a usable client certificate (missing, unreadable, no certificate, or
one that has expired), the kubelet connects with ``--bootstrap-kubeconfig`` (typically a bootstrap token
in ``system:bootstrappers``), requests a ``kubernetes.io/kube-apiserver-client-kubelet`` certificate for
``CN=system:node:<name>, O=system:nodes``, waits for it to be approved and signed, stores it under
``--cert-dir`` (``kubelet-client-current.pem``) and writes ``--kubeconfig`` pointing at that file. The key
waits in ``kubelet-client.key.tmp`` meanwhile, so a kubelet restarted before approval asks again with the
same key and finds its own request (same digested name).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
from collections.abc import Callable
from pathlib import Path

import trio
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from kubelet_trio.certificate.csr import (
    CLIENT_USAGES,
    KUBELET_CLIENT_SIGNER,
    CertificateRequestError,
    CertificateTemplate,
    digested_name,
    generate_key,
    key_pem,
    make_csr,
    request_certificate,
    wait_for_certificate,
)
from kubelet_trio.certificate.store import FileStore, StoreError
from kubelet_trio.client import ApiClient, ApiClientError, KubeConfigError, load_kubeconfig, open_api_client
from kubelet_trio.client.kubeconfig import KubeConfig, write_client_cert_kubeconfig
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.logs import kv

__all__ = [
    "BOOTSTRAP_WAIT_TIMEOUT",
    "CLIENT_PREFIX",
    "BootstrapError",
    "kubeconfig_still_valid",
    "load_client_cert",
]

logger = logging.getLogger(__name__)

CLIENT_PREFIX = "kubelet-client"
TMP_KEY = "kubelet-client.key.tmp"
#: How long the bootstrap waits for its certificate (Go: one hour).
BOOTSTRAP_WAIT_TIMEOUT = 3600.0
#: How long the bootstrap waits for the API server to answer /healthz before trying anyway (Go: 1 min).
SERVER_WAIT = 60.0
SERVER_POLL = 2.0

#: Opens an API client for a kubeconfig (tests pass one onto the fake API server).
OpenClient = Callable[[KubeConfig], contextlib.AbstractAsyncContextManager[ApiClient]]


class BootstrapError(RuntimeError):
    """The bootstrap cannot proceed; the message names the file or the request."""


def kubeconfig_still_valid(path: str, now: dt.datetime) -> bool:
    """The kubeconfig exists, loads, and its client certificates have not expired (Go:
    ``isClientConfigStillValid``). Blocking."""
    if not os.path.exists(path):
        return False
    try:
        config = load_kubeconfig(path)
    except KubeConfigError as err:
        logger.warning("existing kubeconfig unusable; bootstrapping", extra=kv(path=path, error=err))
        return False
    if not config.client_cert_data:
        logger.warning("existing kubeconfig has no client certificate; bootstrapping", extra=kv(path=path))
        return False
    try:
        certs = x509.load_pem_x509_certificates(config.client_cert_data)
    except ValueError as err:
        logger.warning(
            "existing client certificate unreadable; bootstrapping", extra=kv(path=path, error=err)
        )
        return False
    expired = [c for c in certs if now > c.not_valid_after_utc]
    if expired:
        logger.warning(
            "existing client certificate expired; bootstrapping",
            extra=kv(path=path, not_after=expired[0].not_valid_after_utc.isoformat()),
        )
        return False
    return True


def _load_or_generate_key(store: FileStore, now: dt.datetime) -> ec.EllipticCurvePrivateKey:
    """The current pair's key when it loads and has not expired (an expired one's request, if still
    there, would only give the expired certificate back), else the pending bootstrap key, else a new one
    (saved 0600)."""
    try:
        pair = store.current()
    except StoreError:
        pair = None
    if pair is not None and now < pair.not_after:
        key = serialization.load_pem_private_key(pair.key_pem, password=None)
        if isinstance(key, ec.EllipticCurvePrivateKey):
            return key
    tmp = store.directory / TMP_KEY
    if tmp.exists():
        try:
            key = serialization.load_pem_private_key(tmp.read_bytes(), password=None)
            if isinstance(key, ec.EllipticCurvePrivateKey):
                return key
        except ValueError:
            logger.warning("pending bootstrap key unreadable; making a new one", extra=kv(path=str(tmp)))
    new = generate_key()
    store.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(key_pem(new))
    return new


async def _wait_for_server(client: ApiClient) -> None:
    with trio.move_on_after(SERVER_WAIT):
        while True:
            try:
                await client.get_text("/healthz")
                return
            except ApiClientError as err:
                logger.info("waiting for the API server", extra=kv(error=err))
            await trio.sleep(SERVER_POLL)
    logger.warning("API server not answering /healthz; requesting the certificate anyway")


async def load_client_cert(
    kubeconfig_path: str,
    bootstrap_path: str,
    cert_dir: str,
    node_name: str,
    *,
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    open_client: OpenClient | None = None,
    run_sync: RunSync = run_in_thread,
) -> bool:
    """Bootstrap when ``kubeconfig_path`` is not valid (Go: ``LoadClientCert``). True when a new
    certificate was obtained. ``open_client`` replaces :func:`open_api_client` (tests)."""
    if await run_sync(kubeconfig_still_valid, kubeconfig_path, now()):
        logger.info("kubeconfig exists and is valid, skipping bootstrap", extra=kv(path=kubeconfig_path))
        return False
    try:
        bootstrap = load_kubeconfig(bootstrap_path)
    except KubeConfigError as err:
        raise BootstrapError(f"--bootstrap-kubeconfig: {err}") from None
    logger.info(
        "using the bootstrap kubeconfig to request a client certificate",
        extra=kv(path=bootstrap_path, server=bootstrap.server),
    )
    store = FileStore(CLIENT_PREFIX, Path(cert_dir))
    key = await run_sync(_load_or_generate_key, store, now())
    template = CertificateTemplate.for_node(node_name)
    opener: OpenClient = open_client or (lambda config: open_api_client(config))
    async with opener(bootstrap) as client:
        await _wait_for_server(client)
        try:
            name, uid = await request_certificate(
                client,
                make_csr(key, template),
                signer_name=KUBELET_CLIENT_SIGNER,
                usages=CLIENT_USAGES,
                name=digested_name(key, template, CLIENT_USAGES),
            )
            logger.info("waiting for the client certificate to be issued", extra=kv(csr=name))
            with trio.fail_after(BOOTSTRAP_WAIT_TIMEOUT):
                cert_pem = await wait_for_certificate(client, name, uid)
        except trio.TooSlowError:
            raise BootstrapError(
                f"the client certificate was not issued within {BOOTSTRAP_WAIT_TIMEOUT:g}s"
            ) from None
        except (ApiClientError, CertificateRequestError) as err:
            raise BootstrapError(f"bootstrap with {bootstrap_path}: {err}") from None
    issued_at = now()

    def save() -> None:
        store.update(cert_pem, key_pem(key), now=issued_at)
        (store.directory / TMP_KEY).unlink(missing_ok=True)
        write_client_cert_kubeconfig(bootstrap, kubeconfig_path, str(store.current_path.absolute()))

    try:
        await run_sync(save)
    except StoreError as err:
        raise BootstrapError(str(err)) from None
    logger.info(
        "client certificate issued; kubeconfig written", extra=kv(csr=name, kubeconfig=kubeconfig_path)
    )
    return True
