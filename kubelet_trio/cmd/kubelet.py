"""``kubelet-trio [flags]``: the node daemon, or ``--runonce`` (Go: ``cmd/kubelet``).

Settings come from :mod:`kubelet_trio.options` (flags over a ``KubeletConfiguration`` file). Pods come from
a manifest directory and/or URL; the runtime is any CRI runtime at ``--container-runtime-endpoint``
(containerd by default) or the built-in simulated runtime with ``--runtime sim``.

- Daemon: runs until SIGTERM/SIGINT, then stops within moments and leaves its pods running, like the Go
  kubelet (a new process over the same runtime and manifests adopts them). Serves ``/healthz`` and,
  when enabled, the read-only HTTP server. Exit status 0 after a signal, 1 when the node fails.
- ``--runonce``: see :mod:`kubelet_trio.runonce`. Progress on stderr, the report on stdout; exit status
  0 when every pod reached its target, 1 otherwise. No HTTP servers.

Exit status 2: invalid flags, configuration or values, or no pod source; and a Kubelet API whose
webhooks (authentication or authorization; a ``--config`` file turns both on by default, as in Go) have no
API server to ask, i.e. no ``--kubeconfig``: refused with Go's error. ``--image-import-dir`` with the
simulated runtime, which has no image store to import into.

``--image-import-dir`` (the managed runtime: ``<root-dir>/containerd/images`` by default) imports the
image archives there before the node starts (:mod:`kubelet_trio.images.importer`); with a remote runtime
that is not containerd the node stops with exit status 1, naming the runtime.

Exit status 1 as well when ``--image-credential-provider-config``/``--image-credential-provider-bin-dir``
is given and the plugins cannot be registered (the file does not read or validate, a binary is missing):
Go's "Failed to register CRI auth plugins", before anything starts.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import trio

from kubelet_trio.boundary import BoundaryErrors
from kubelet_trio.cm.allocatable import read_node_allocatable
from kubelet_trio.config.file import FileSource, scan_manifest_path
from kubelet_trio.config.podconfig import PodConfig
from kubelet_trio.config.types import API_SOURCE, FILE_SOURCE, HTTP_SOURCE
from kubelet_trio.configz import configz_body
from kubelet_trio.kubelet import KubeletConfig, PodSource
from kubelet_trio.kubelet_builder import KubeletDeps, open_kubelet
from kubelet_trio.logs import configure_logging, kv
from kubelet_trio.metrics import KubeletMetrics
from kubelet_trio.nodestatus.addresses import NodeAddressError, resolve_node_ips
from kubelet_trio.options import KubeletOptions, OptionsError, component_configs, load_options

# What only some configurations use is imported where it is used: the API client (--kubeconfig), the
# CRI client (grpclib, asyncio; not for --runtime sim), the manifest URL source and run-once (httpx).
if TYPE_CHECKING:
    from kubelet_trio.api import ManifestError, Pod
    from kubelet_trio.client import ApiClient
    from kubelet_trio.credentialprovider import PluginProvider
    from kubelet_trio.cri.runtime import Runtime
    from kubelet_trio.runonce_report import RunOnceReport

logger = logging.getLogger("kubelet_trio.cmd.kubelet")

RUNTIME_CHECK_TIMEOUT = 10.0


class UsageError(Exception):
    """Reported on stderr; exit status 2."""


class CredentialProvidersError(Exception):
    """The credential provider plugins cannot be registered; reported on stderr, exit status 1."""


def register_credential_providers(options: KubeletOptions) -> tuple[PluginProvider, ...]:
    """The plugins of ``--image-credential-provider-config`` in ``--image-credential-provider-bin-dir``
    (none unless one of them is given; Go registers them when either is). Raises
    :class:`CredentialProvidersError` naming the file. Blocking (reads files), at startup."""
    config, bin_dir = options.image_credential_provider_config, options.image_credential_provider_bin_dir
    if not config and not bin_dir:
        return ()
    from kubelet_trio.credentialprovider import (
        CredentialProviderConfigError,
        register_credential_provider_plugins,
    )

    try:
        providers = register_credential_provider_plugins(config, bin_dir)
    except CredentialProviderConfigError as err:
        raise CredentialProvidersError(
            f"Failed to register CRI auth plugins (--image-credential-provider-config {config!r},"
            f" --image-credential-provider-bin-dir {bin_dir!r}): {err}"
        ) from None
    logger.info(
        "registered credential provider plugins",
        extra=kv(config=config, bin_dir=bin_dir, plugins=[p.name for p in providers]),
    )
    return providers


def kubelet_config(options: KubeletOptions) -> KubeletConfig:
    return component_configs(options).kubelet


def build_sources(
    options: KubeletOptions, boundary_errors: BoundaryErrors | None = None
) -> tuple[PodConfig, list[PodSource]]:
    """The daemon's pod sources: the manifest path and/or URL, followed until stopped; what they contain
    of a broken manifest is counted in ``boundary_errors``."""
    names = [FILE_SOURCE] * bool(options.pod_manifest_path) + [HTTP_SOURCE] * bool(options.manifest_url)
    names += [API_SOURCE] * bool(options.kubeconfig)  # API server mode: the builder adds its source
    pod_config = PodConfig(sources=tuple(names))
    sources: list[PodSource] = []
    if options.pod_manifest_path:
        sources.append(
            FileSource(
                options.pod_manifest_path,
                options.node_name,
                pod_config.source_channel(FILE_SOURCE),
                check_period=options.file_check_frequency,
                boundary_errors=boundary_errors,
            )
        )
    if options.manifest_url:
        from kubelet_trio.config.http import HttpSource

        sources.append(
            HttpSource(
                options.manifest_url,
                options.node_name,
                pod_config.source_channel(HTTP_SOURCE),
                headers=options.manifest_url_header,
                check_period=options.http_check_frequency,
                boundary_errors=boundary_errors,
            )
        )
    return pod_config, sources


@contextlib.asynccontextmanager
async def open_runtime(
    options: KubeletOptions, boundary_errors: BoundaryErrors | None = None
) -> AsyncIterator[Runtime]:
    """The node's runtime; with ``--image-import-dir`` (the managed runtime: always) the image archives
    there are imported before it is yielded, so before any sandbox starts, and followed after."""
    if options.runtime == "sim":
        from kubelet_trio.sim.runtime import SimRuntime

        yield SimRuntime()
        return
    from kubelet_trio.cri.remote import open_cri_runtime
    from kubelet_trio.images.importer import open_image_importer

    if component_configs(options).container_runtime == "managed":  # a containerd of our own
        from kubelet_trio.containerd import open_managed_containerd

        async with (
            open_managed_containerd(
                options.root_dir,
                sandbox_image=options.pod_infra_container_image,
                subnet=options.pod_cidr or None,
            ) as ctrd,
            open_cri_runtime(
                ctrd.endpoint,
                request_timeout=options.runtime_request_timeout,
                boundary_errors=boundary_errors,
            ) as runtime,
            open_image_importer(Path(options.image_import_dir or ctrd.layout.images_dir), ctrd.layout.socket),
        ):
            yield runtime
        return
    async with (
        open_cri_runtime(
            options.container_runtime_endpoint,
            options.image_service_endpoint or None,
            request_timeout=options.runtime_request_timeout,
            boundary_errors=boundary_errors,
        ) as runtime,
        contextlib.AsyncExitStack() as importing,
    ):
        if options.image_import_dir:
            socket = await containerd_socket(runtime, options)
            await importing.enter_async_context(open_image_importer(Path(options.image_import_dir), socket))
        yield runtime


async def containerd_socket(runtime: Runtime, options: KubeletOptions) -> Path:
    """The socket ``ctr`` imports images through: the image service's, when the runtime is containerd
    (whose CRI socket is its main socket). Any other runtime refuses ``--image-import-dir``."""
    endpoint = options.image_service_endpoint or options.container_runtime_endpoint
    await check_runtime(runtime, options)
    with trio.fail_after(RUNTIME_CHECK_TIMEOUT):
        version = await runtime.version()
    if version.runtime_name != "containerd" or not endpoint.startswith("unix://"):
        raise RuntimeError(
            f"--image-import-dir needs containerd: archives are imported with containerd's ctr through its"
            f" own API on the runtime's socket, and the runtime at {endpoint} is"
            f" {version.runtime_name or 'unnamed'} {version.runtime_version}".rstrip()
        )
    return Path(endpoint.removeprefix("unix://"))


async def check_runtime(runtime: Runtime, options: KubeletOptions) -> None:
    """Fail fast (run-once) when the runtime does not answer."""
    try:
        with trio.fail_after(RUNTIME_CHECK_TIMEOUT):
            version = await runtime.version()
    except Exception as err:
        where = "simulated runtime" if options.runtime == "sim" else options.container_runtime_endpoint
        reason = str(err) or type(err).__name__
        raise RuntimeError(f"cannot reach the container runtime at {where}: {reason}") from err
    logger.info("container runtime", extra=kv(name=version.runtime_name, version=version.runtime_version))


# -- daemon ---------------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def open_api(
    options: KubeletOptions, metrics: KubeletMetrics | None = None
) -> AsyncIterator[ApiClient | None]:
    """API server mode: the API client when ``--kubeconfig`` is given, else None; a rotating client
    certificate reports its lifetime and renewal errors on ``metrics``."""
    if not options.kubeconfig:
        yield None
        return
    from kubelet_trio.apimode import open_kubeconfig_client

    certificates = component_configs(options).certificates
    if certificates.bootstrap_kubeconfig or certificates.rotate_certificates:  # TLS bootstrap / rotation
        from kubelet_trio.certificate import open_node_api_client

        async with open_node_api_client(
            certificates, qps=options.kube_api_qps, burst=options.kube_api_burst, metrics=metrics
        ) as client:
            yield client
        return
    async with open_kubeconfig_client(
        options.kubeconfig, qps=options.kube_api_qps, burst=options.kube_api_burst
    ) as client:
        yield client


async def node_config(options: KubeletOptions) -> KubeletConfig:
    """:func:`kubelet_config` with the node's IP chosen as Go chooses it (a name lookup, the routes)."""
    config = kubelet_config(options)
    if config.node_ips:
        return config
    try:  # the node name is the hostname here (no cloud provider)
        ips = await resolve_node_ips(options.node_ip, options.node_name, options.node_name)
    except NodeAddressError as err:  # Go keeps running too, without a usable address
        logger.warning("no node IP; using the loopback address", extra=kv(error=err))
        return attrs.evolve(config, node_ips=("127.0.0.1",))
    return attrs.evolve(config, node_ips=ips)


@contextlib.asynccontextmanager
async def serving_certificate(
    options: KubeletOptions,
    config: KubeletConfig,
    client: ApiClient | None,
    metrics: KubeletMetrics | None = None,
) -> AsyncIterator[KubeletConfig]:
    """``--rotate-server-certificates`` in API mode: the Kubelet API serves a certificate the cluster
    issued (``kubernetes.io/kubelet-serving``), renewed before it expires; ``config`` otherwise."""
    certificates = component_configs(options).certificates
    if client is None or not certificates.rotate_server_certificates:
        yield config
        return
    from kubelet_trio.certificate import open_serving_certificate

    def addresses() -> tuple[list[str], list[str]]:
        return [config.node_name], list(config.node_ips)

    async with open_serving_certificate(
        client, config.node_name, certificates.cert_dir, addresses, metrics=metrics
    ) as pem:
        yield attrs.evolve(config, tls_cert_file=str(pem), tls_private_key_file=str(pem))


SWAPS = "/proc/swaps"


def check_swap(options: KubeletOptions, swaps: str = SWAPS) -> None:
    """``failSwapOn`` (Go's container manager): refuse to run a node on a machine with swap enabled."""
    try:
        with open(swaps) as file:
            lines = [line for line in file.read().splitlines() if line.strip()]
    except OSError:
        return  # no /proc/swaps: no swap to speak of
    if options.fail_swap_on and len(lines) > 1:  # more than the header: swap is on
        raise RuntimeError(
            "running with swap on is not supported, please disable swap or set --fail-swap-on flag to false"
            f" ({swaps} lists {len(lines) - 1} swap area(s))"
        )


async def serve(options: KubeletOptions, credential_providers: tuple[PluginProvider, ...] = ()) -> int:
    check_swap(options)
    config = await node_config(options)
    # /metrics is served by the Kubelet API and the read-only server; without them nothing is recorded
    metrics = KubeletMetrics(enabled=bool(config.port or config.read_only_port))
    pod_config, sources = build_sources(options, metrics.boundary_errors)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with (
            open_runtime(options, metrics.boundary_errors) as runtime,
            open_api(options, metrics) as client,
            serving_certificate(options, config, client, metrics) as config,
        ):
            deps = KubeletDeps(
                runtime=runtime,
                pod_config=pod_config,
                sources=tuple(sources),
                metrics=metrics,
                instrument_runtime=metrics.enabled,
                allocatable=read_node_allocatable(  # the downward API's defaults for unset limits
                    options.root_dir,
                    reserved=(options.kube_reserved, options.system_reserved),
                    eviction_hard=options.eviction_hard,
                ),
                api_client=client,  # API server mode when --kubeconfig is given
                api_options=component_configs(options).api_mode,
                configz=configz_body(options),  # /configz on the Kubelet API port
                credential_providers=credential_providers,
            )
            async with open_kubelet(config, deps):
                async for signum in signals:
                    logger.info(
                        "stopping, pods are left running", extra=kv(signal=signal.Signals(signum).name)
                    )
                    break
    return 0


# -- run-once -------------------------------------------------------------------------------------------


async def read_static_sources(
    options: KubeletOptions,
) -> tuple[dict[str, tuple[Pod, ...]], tuple[ManifestError, ...]]:
    """Read the manifest path and the URL once."""
    from kubelet_trio.runonce import fetch_manifest_url

    pods: dict[str, tuple[Pod, ...]] = {}
    errors: list[ManifestError] = []
    if options.pod_manifest_path:
        scan = await trio.to_thread.run_sync(scan_manifest_path, options.pod_manifest_path, options.node_name)
        pods[FILE_SOURCE] = scan.pods
        errors += scan.errors
    if options.manifest_url:
        url_pods, url_errors = await fetch_manifest_url(
            options.manifest_url, options.node_name, options.manifest_url_header
        )
        pods[HTTP_SOURCE] = url_pods
        errors += url_errors
    return pods, tuple(errors)


async def run_once_main(
    options: KubeletOptions, credential_providers: tuple[PluginProvider, ...] = ()
) -> int:
    from kubelet_trio.runonce import run_once

    pods, errors = await read_static_sources(options)
    for error in errors:
        logger.error("invalid pod manifest", extra=kv(error=error))
    settings = component_configs(options).run_once
    # No HTTP servers in run-once: it is over in moments and must not collide with a running daemon.
    config = attrs.evolve(await node_config(options), healthz_port=0, read_only_port=0, port=0)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    def show(report: RunOnceReport) -> None:
        if options.output == "json":
            print(json.dumps(report.to_json(), indent=2), flush=True)
        else:
            print(report.format_table(), end="", flush=True)

    async with open_runtime(options) as runtime:
        await check_runtime(runtime, options)
        report = await run_once(
            runtime,
            config,
            pods,
            settings,
            errors=errors,
            progress=progress,
            on_report=show,
            credential_providers=credential_providers,
        )
    return 0 if report.ok else 1


# -- entry point ----------------------------------------------------------------------------------------


def _validate(options: KubeletOptions) -> None:
    if options.kubeconfig and options.runonce:
        raise UsageError("--runonce runs manifests only; it does not use --kubeconfig")
    if not options.pod_manifest_path and not options.manifest_url and not options.kubeconfig:
        raise UsageError(
            "no pod source: give --kubeconfig, --pod-manifest-path and/or --manifest-url (or staticPodPath)"
        )
    if options.runonce and options.pod_manifest_path and not os.path.exists(options.pod_manifest_path):
        raise UsageError(f"--pod-manifest-path {options.pod_manifest_path} does not exist")
    if options.image_import_dir and options.runtime == "sim":
        raise UsageError(
            "--image-import-dir imports image archives into containerd with ctr; the simulated runtime"
            " (--runtime sim) has no image store to import into"
        )
    _validate_webhooks(options)


WEBHOOK_HINT = (
    "the Kubelet API's webhooks ask the API server of --kubeconfig; without one, set"
    " authentication.webhook.enabled: false (--authentication-token-webhook=false) and authorization.mode:"
    " AlwaysAllow (--authorization-mode AlwaysAllow), which a --config file turns on by default, or turn the"
    " Kubelet API off with port: 0 (--port 0)"
)


def _validate_webhooks(options: KubeletOptions) -> None:
    """Go's ``BuildAuth`` refuses webhooks without an API client; so does this kubelet, before it starts
    anything (run-once and a node without the Kubelet API serve nothing that needs them)."""
    if options.kubeconfig or options.runonce or not options.port:
        return
    if not options.authentication_token_webhook and options.authorization_mode != "Webhook":
        return
    from kubelet_trio.server.auth import webhook_client_error

    error = webhook_client_error(options.authentication_token_webhook, options.authorization_mode)
    raise UsageError(f"failed to run Kubelet: {error} ({WEBHOOK_HINT})")


def main(argv: list[str]) -> int:
    try:
        options, warnings = load_options(argv)
        _validate(options)
    except (OptionsError, UsageError) as err:
        print(f"kubelet-trio: {err}", file=sys.stderr)
        return 2
    quiet = options.runonce and "verbosity" not in options.explicit
    configure_logging(options.verbosity, options.logging_format, level=logging.WARNING if quiet else None)
    for warning in warnings:
        logger.warning(warning.message, extra=kv(**warning.fields))
    if options.pod_manifest_path and not os.path.exists(options.pod_manifest_path):
        logger.warning("pod manifest path does not exist (yet)", extra=kv(path=options.pod_manifest_path))
    try:
        credential_providers = register_credential_providers(options)
    except CredentialProvidersError as err:
        print(f"kubelet-trio: {err}", file=sys.stderr)
        return 1
    try:
        return trio.run(run_once_main if options.runonce else serve, options, credential_providers)
    except KeyboardInterrupt:
        print("kubelet-trio: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # the node failed: say why in one line per cause
        for leaf in _leaves(err):
            if isinstance(leaf, RuntimeError | OSError):
                print(f"kubelet-trio: {leaf}", file=sys.stderr)
            else:
                logger.error("kubelet failed", exc_info=leaf)
        return 1


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]
