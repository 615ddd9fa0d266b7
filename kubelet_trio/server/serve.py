"""Serving the kubelet's ASGI apps (:mod:`kubelet_trio.httpserver.http11`), inside the Kubelet's nursery.

:func:`serve_kubelet_http` starts the healthz server, the read-only server and the Kubelet API over
TLS with authentication and authorization (:mod:`kubelet_trio.server.auth`), each only when its port is
not 0, and reports the URLs they listen on. Like the Go kubelet, a healthz server that cannot bind logs
the error and tries again every ``HEALTHZ_RETRY`` seconds without stopping the node, while a read-only
server or Kubelet API that cannot bind is fatal. Cancelling the nursery stops them all at once.

Each server's app and its dependencies are imported when that server starts: the healthz server loads
only its handlers; TLS, authentication and the certificate code (cryptography) load with the Kubelet API.
"""

from __future__ import annotations

import logging
import socket
import ssl
from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from kubelet_trio.httpserver.http11 import HttpServer
from kubelet_trio.logs import kv
from kubelet_trio.server.healthz import healthz_app

if TYPE_CHECKING:
    from kubelet_trio.boundary import BoundaryErrors
    from kubelet_trio.server.host import HostInterface

__all__ = ["HEALTHZ_RETRY", "bind_address", "serve_app", "serve_kubelet_http", "serve_tls_app"]

logger = logging.getLogger(__name__)

HEALTHZ_RETRY = 5.0
BACKLOG = 128


def bind_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _bound_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port``, closed again if binding fails."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def _listener(host: str, port: int) -> trio.SocketListener:
    sock = _bound_socket(host, port)
    sock.listen(BACKLOG)
    return trio.SocketListener(trio.socket.from_stdlib_socket(sock))


async def serve_app(
    app: Any,
    host: str,
    port: int,
    *,
    errors: BoundaryErrors | None = None,
    task_status: trio.TaskStatus[str],
) -> None:
    """Serve ``app`` on ``host:port`` until cancelled; reports the URL once listening. Connections
    closed because serving them failed are counted in ``errors``."""
    listener = _listener(host, port)
    url = "http://" + bind_address(*listener.socket.getsockname()[:2])
    async with trio.open_nursery() as nursery:
        await nursery.start(HttpServer(app, errors=errors).run, [listener])
        task_status.started(url)


async def serve_tls_app(
    app: Any,
    host: str,
    port: int,
    ssl_context: ssl.SSLContext,
    peer_certs: dict[tuple[str, int], bytes],
    *,
    errors: BoundaryErrors | None = None,
    task_status: trio.TaskStatus[str],
) -> None:
    """Serve ``app`` over TLS on ``host:port`` until cancelled (reports the URL once listening),
    recording each connection's verified client certificate in ``peer_certs`` (by client address)
    while it is open, and counting failed connections in ``errors``."""

    def connected(stream: trio.abc.Stream, client: tuple[str, int] | None) -> None:
        assert isinstance(stream, trio.SSLStream)
        der = stream.getpeercert(binary_form=True)
        if der and client is not None:
            peer_certs[client] = der

    def closed(client: tuple[str, int] | None) -> None:
        if client is not None:
            peer_certs.pop(client, None)

    listener = _listener(host, port)
    url = "https://" + bind_address(*listener.socket.getsockname()[:2])
    server = HttpServer(app, scheme="https", errors=errors, on_connect=connected, on_close=closed)
    tls = trio.SSLListener(listener, ssl_context, https_compatible=True)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run, [tls])
        task_status.started(url)


def kubelet_api_ssl_context(
    cert_file: str,
    key_file: str,
    client_ca_file: str,
    min_version: str = "",
    cipher_suites: Sequence[str] = (),
) -> ssl.SSLContext:
    """The Kubelet API's TLS context (Go: ``InitializeTLS``): the serving pair, client certificates
    verified when sent, ``min_version`` (Go's name, ``tlsMinVersion``; "": TLS 1.2) and the TLS 1.0-1.2
    ``cipher_suites`` (Go's names, ``tlsCipherSuites``; (): OpenSSL's defaults). TLS 1.3 suites are not
    configurable, as in Go: naming only TLS 1.3 suites leaves TLS 1.2 without any, so TLS 1.3 is the
    floor. Blocking file I/O: call through ``run_sync``."""
    from kubelet_trio.certificate.reload import load_pair
    from kubelet_trio.cliflag import tls_cipher_suites, tls_version

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = (
        ssl.TLSVersion[tls_version(min_version)] if min_version else ssl.TLSVersion.TLSv1_2
    )
    suites = tls_cipher_suites(cipher_suites)
    if suites:
        legacy = [suite.openssl for suite in suites if not suite.tls13]
        if legacy:
            try:
                context.set_ciphers(":".join(legacy))
            except ssl.SSLError:
                names = ", ".join(suite.name for suite in suites if not suite.tls13)
                raise RuntimeError(
                    f"tlsCipherSuites: none of {names} is available in {ssl.OPENSSL_VERSION}"
                ) from None
        else:
            context.minimum_version = max(context.minimum_version, ssl.TLSVersion.TLSv1_3)
    context.set_alpn_protocols(["http/1.1"])
    load_pair(context, cert_file, key_file)
    if client_ca_file:
        context.load_verify_locations(client_ca_file)
        context.verify_mode = ssl.CERT_OPTIONAL  # a certificate is verified when sent, tokens otherwise
    return context


async def _serve_kubelet_api(
    kubelet: HostInterface, configz: Mapping[str, Any] | None, *, task_status: trio.TaskStatus[str]
) -> None:
    from kubelet_trio.certificate.reload import reload_certificate_files
    from kubelet_trio.cliflag import tls_cipher_suites
    from kubelet_trio.server.app import kubelet_api_app
    from kubelet_trio.server.auth import AuthConfig, AuthenticatedApp, KubeletAuth, webhook_client_error
    from kubelet_trio.server.tls import serving_pair

    config = kubelet.kubelet_config()
    missing = webhook_client_error(config.authentication_token_webhook, config.authorization_mode)
    if missing is not None and kubelet.auth_client() is None:
        raise RuntimeError(f"failed to run Kubelet: {missing}")
    for suite in tls_cipher_suites(config.tls_cipher_suites):
        if suite.insecure:
            logger.info("Use of insecure cipher detected.", extra=kv(cipher=suite.name))
    if config.tls_min_version == "VersionTLS13" and config.tls_cipher_suites:
        logger.info("Warning: TLS 1.3 cipher suites are not configurable, ignoring --tls-cipher-suites")
    cert_file, key_file = await kubelet.run_blocking(
        serving_pair,
        config.tls_cert_file,
        config.tls_private_key_file,
        config.root_dir,
        config.node_name,
        config.node_ips,
    )
    context = await kubelet.run_blocking(
        kubelet_api_ssl_context,
        cert_file,
        key_file,
        config.client_ca_file,
        config.tls_min_version,
        config.tls_cipher_suites,
    )
    auth = KubeletAuth(
        AuthConfig(
            node_name=config.node_name,
            anonymous=config.anonymous_auth,
            webhook=config.authentication_token_webhook,
            authorization_mode=config.authorization_mode,
            token_cache_ttl=config.authentication_cache_ttl,
            authorized_ttl=config.authorized_cache_ttl,
            unauthorized_ttl=config.unauthorized_cache_ttl,
        ),
        client=kubelet.auth_client,
    )
    peer_certs: dict[tuple[str, int], bytes] = {}
    app = AuthenticatedApp(kubelet_api_app(kubelet, configz=configz), auth, peer_certs)
    async with trio.open_nursery() as nursery:
        if config.tls_cert_file:  # a renewed pair (by hand or by --rotate-server-certificates) is served
            await nursery.start(
                partial(reload_certificate_files, context, cert_file, key_file, run_sync=kubelet.run_blocking)
            )
        serve = partial(serve_tls_app, errors=kubelet.boundary_errors())
        url = await nursery.start(serve, app, config.address, config.port, context, peer_certs)
        logger.info("kubelet API listening", extra=kv(url=url))
        task_status.started(url)


async def _serve_healthz(kubelet: HostInterface, *, task_status: trio.TaskStatus[str | None]) -> None:
    config = kubelet.kubelet_config()
    host, port = config.healthz_bind_address, config.healthz_port
    reported = False
    while True:
        try:
            async with trio.open_nursery() as nursery:
                serve = partial(serve_app, errors=kubelet.boundary_errors())
                url = await nursery.start(serve, healthz_app(kubelet), host, port)
                logger.info("healthz server listening", extra=kv(url=url))
                if not reported:
                    reported = True
                    task_status.started(url)
        except* OSError as group:
            logger.error(
                "failed to start healthz server, retrying",
                extra=kv(delay=HEALTHZ_RETRY, address=bind_address(host, port), error=group.exceptions[0]),
            )
        if not reported:
            reported = True
            task_status.started(None)
        await trio.sleep(HEALTHZ_RETRY)


async def serve_kubelet_http(
    kubelet: HostInterface,
    *,
    configz: Mapping[str, Any] | None = None,
    task_status: trio.TaskStatus[dict[str, str]],
) -> None:
    """Run the enabled servers until cancelled; reports ``{"healthz": url, "readonly": url, "api": url}``.
    ``configz`` is what the Kubelet API's ``/configz`` answers."""
    urls: dict[str, str] = {}
    config = kubelet.kubelet_config()
    async with trio.open_nursery() as nursery:
        if config.healthz_port:
            url = await nursery.start(_serve_healthz, kubelet)
            if url:
                urls["healthz"] = url
        if config.read_only_port:
            from kubelet_trio.server.app import read_only_app

            urls["readonly"] = await nursery.start(
                partial(serve_app, errors=kubelet.boundary_errors()),
                read_only_app(kubelet),
                config.address,
                config.read_only_port,
            )
            logger.info("read-only server listening", extra=kv(url=urls["readonly"]))
        if config.port:
            urls["api"] = await nursery.start(_serve_kubelet_api, kubelet, configz)
        task_status.started(urls)
