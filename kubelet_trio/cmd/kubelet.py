"""``kubelet-trio [flags]``: the node daemon, or ``--runonce`` (Go: ``cmd/kubelet``).

Settings come from :mod:`kubelet_trio.options` (flags over a ``KubeletConfiguration`` file); :func:`main`
derives the component configurations from them once (``component_configs``) and hands each part to what
it builds. Pods come from a manifest directory and/or URL; the runtime is any CRI runtime at
``--container-runtime-endpoint`` (containerd by default) or the built-in simulated runtime with
``--runtime sim``.

- Daemon: runs until SIGTERM/SIGINT, then stops within moments and leaves its pods running, like the Go
  kubelet (a new process over the same runtime and manifests adopts them). Serves ``/healthz`` and,
  when enabled, the read-only HTTP server. Exit status 0 after a signal, 1 when the node fails.
  The signals are read from the moment the event loop runs, so one that arrives during start-up stops
  it as promptly, logging what start-up was waiting for (one that arrives earlier still, while Python
  loads the daemon's modules, ends the process by its default action: nothing has started then).
- Start-up (:class:`StartUp`): every step that waits on something outside the process logs
  ``waiting for <it>`` after a second and then at doubling intervals (at most 30 s apart) until it is
  done. The container runtime must answer within ``--runtime-request-timeout`` (Go's kubelet gives its
  first ``Version`` call that long and exits without an answer; here it is asked again, with backoff,
  until then), the node's own components must be up within :data:`NODE_START_TIMEOUT`; either failing,
  the daemon exits with status 1 naming what it waited for. The managed containerd (60 s), the TLS
  bootstrap (Go's hour for the certificate) and each image archive (:mod:`kubelet_trio.images.importer`:
  ten minutes, then the node starts without it) have deadlines of their own.
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
import math
import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio
import trio_util

from kubelet_trio.boundary import BoundaryErrors
from kubelet_trio.cm.allocatable import read_node_allocatable
from kubelet_trio.cm.cgroup_manager import CGROUP_ROOT, CgroupError, cgroup_version
from kubelet_trio.cm.oom_score import apply_oom_score_adj
from kubelet_trio.config.file import FileSource, scan_manifest_path
from kubelet_trio.config.podconfig import PodConfig
from kubelet_trio.config.types import FILE_SOURCE, HTTP_SOURCE
from kubelet_trio.configz import configz_body
from kubelet_trio.kubelet import KubeletConfig, PodSource
from kubelet_trio.kubelet_builder import KubeletDeps, open_kubelet
from kubelet_trio.logs import configure_logging, error_text, kv
from kubelet_trio.metrics import KubeletMetrics
from kubelet_trio.nodestatus.addresses import NodeAddressError, resolve_node_ips
from kubelet_trio.options import (
    ApiClientSettings,
    CertificateSettings,
    ComponentConfigs,
    CredentialProviderSettings,
    KubeletOptions,
    OptionsError,
    RuntimeSettings,
    SourceSettings,
    component_configs,
    load_options,
)

# What only some configurations use is imported where it is used: the API client (--kubeconfig), the
# CRI client (not for --runtime sim), the manifest URL source and run-once (h11).
if TYPE_CHECKING:
    from kubelet_trio.api import ManifestError, Pod
    from kubelet_trio.client import ApiClient
    from kubelet_trio.credentialprovider import PluginProvider
    from kubelet_trio.cri.runtime import Runtime
    from kubelet_trio.runonce_report import RunOnceReport

logger = logging.getLogger("kubelet_trio.cmd.kubelet")

#: One attempt to reach the container runtime (run-once's check, and each of the daemon's at start-up).
RUNTIME_CHECK_TIMEOUT = 10.0
#: The daemon's attempts to reach the runtime at start-up: half a second apart, doubling up to 5 s.
RUNTIME_RETRY_FIRST, RUNTIME_RETRY_MAX = 0.5, 5.0
#: How long the node's own components (pod cgroups, the first relist, the servers...) may take to start
#: once the runtime has answered: each of their runtime calls has --runtime-request-timeout (2 min); a
#: start that makes progress is done in seconds, one that has not in ten minutes is stuck.
NODE_START_TIMEOUT = 600.0
#: A start-up step is reported after this long, then at doubling intervals up to STARTUP_REPORT_MAX.
STARTUP_REPORT_FIRST, STARTUP_REPORT_MAX = 1.0, 30.0
#: How long the node's address may take to resolve (a name lookup) before the loopback address is used.
NODE_IP_TIMEOUT = 30.0


class UsageError(Exception):
    """Reported on stderr; exit status 2."""


class CredentialProvidersError(Exception):
    """The credential provider plugins cannot be registered; reported on stderr, exit status 1."""


class StartupTimeout(RuntimeError):
    """A start-up step outlived its deadline; the message names what it waited for (exit status 1)."""


@attrs.define(eq=False)
class StartupStep:
    """One thing start-up waits for: ``what`` (a constant, "the container runtime") and its context."""

    what: str  # a literal: the log line is "waiting for <what>"
    fields: dict[str, Any]
    deadline: float | None
    since: float
    #: Why the last attempt failed, for a step that tries again.
    error: str | None = None

    def context(self) -> dict[str, Any]:
        waited = round(trio.current_time() - self.since, 1)
        return {**self.fields, "waited": waited, **({"error": self.error} if self.error else {})}


@attrs.define(eq=False)
class StartUp:
    """What the daemon's start-up waits for now. Each step that waits on something outside the process
    runs in :meth:`step`; :meth:`watch` names it in the log while it lasts and ends start-up when it
    outlives its deadline, and a signal's log line names it too: a node that does not come up says why."""

    current: trio_util.AsyncValue[StartupStep | None] = attrs.Factory(lambda: trio_util.AsyncValue(None))
    #: Set once every component is up.
    started: bool = False

    @contextlib.contextmanager
    def step(self, what: str, deadline: float | None = None, **fields: Any) -> Iterator[StartupStep]:
        """Mark the block as waiting for ``what``, for ``deadline`` seconds at most (None: the callee
        bounds it). A plain context manager, no cancel scope: a step may open resources that outlive it."""
        step = StartupStep(what, fields, deadline, trio.current_time())
        self.current.value = step
        try:
            yield step
        finally:
            self.current.value = None

    async def watch(self) -> None:
        """Log ``waiting for <step>`` after :data:`STARTUP_REPORT_FIRST`, then at doubling intervals, and
        raise :class:`StartupTimeout` when a step outlives its deadline (which cancels start-up)."""
        while True:
            step = await self.current.wait_value(lambda value: value is not None)
            assert step is not None
            await self._watch_step(step)

    async def _watch_step(self, step: StartupStep) -> None:
        give_up_at = math.inf if step.deadline is None else step.since + step.deadline
        interval = STARTUP_REPORT_FIRST
        report_at = step.since + interval
        while True:
            with trio.move_on_at(min(report_at, give_up_at)):
                await self.current.wait_value(lambda value: value is not step)
                return
            if trio.current_time() >= give_up_at:
                reason = f": {step.error}" if step.error else ""
                where = "".join(f" {key}={value}" for key, value in step.fields.items())
                raise StartupTimeout(
                    f"gave up waiting for {step.what}{where} after {step.deadline:g}s{reason}"
                )
            logger.info(f"waiting for {step.what}", extra=kv(**step.context()))
            interval = min(interval * 2, STARTUP_REPORT_MAX)
            report_at = trio.current_time() + interval


def _step(startup: StartUp | None, what: str, **fields: Any) -> contextlib.AbstractContextManager[Any]:
    return contextlib.nullcontext() if startup is None else startup.step(what, **fields)


def register_credential_providers(settings: CredentialProviderSettings) -> tuple[PluginProvider, ...]:
    """The plugins of ``--image-credential-provider-config`` in ``--image-credential-provider-bin-dir``
    (none unless one of them is given; Go registers them when either is). Raises
    :class:`CredentialProvidersError` naming the file. Blocking (reads files), at startup."""
    config, bin_dir = settings.config, settings.bin_dir
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


def build_sources(
    settings: SourceSettings, boundary_errors: BoundaryErrors | None = None
) -> tuple[PodConfig, list[PodSource]]:
    """The daemon's pod sources: the manifest path and/or URL, followed until stopped; what they contain
    of a broken manifest is counted in ``boundary_errors``."""
    names = [FILE_SOURCE] * bool(settings.pod_manifest_path) + [HTTP_SOURCE] * bool(settings.manifest_url)
    pod_config = PodConfig(sources=tuple(names))
    sources: list[PodSource] = []
    if settings.pod_manifest_path:
        sources.append(
            FileSource(
                settings.pod_manifest_path,
                settings.node_name,
                pod_config.source_channel(FILE_SOURCE),
                check_period=settings.file_check_frequency,
                boundary_errors=boundary_errors,
            )
        )
    if settings.manifest_url:
        from kubelet_trio.config.http import HttpSource

        sources.append(
            HttpSource(
                settings.manifest_url,
                settings.node_name,
                pod_config.source_channel(HTTP_SOURCE),
                headers=dict(settings.manifest_url_header),
                check_period=settings.http_check_frequency,
                boundary_errors=boundary_errors,
            )
        )
    return pod_config, sources


@contextlib.asynccontextmanager
async def open_runtime(
    settings: RuntimeSettings, boundary_errors: BoundaryErrors | None = None, startup: StartUp | None = None
) -> AsyncIterator[Runtime]:
    """The node's runtime; with ``--image-import-dir`` (the managed runtime: always) the image archives
    there are imported before it is yielded, so before any sandbox starts, and followed after. With the
    daemon's ``startup``, the runtime has answered first (:func:`wait_for_runtime`); run-once checks it
    itself, once."""
    if settings.runtime == "sim":
        from kubelet_trio.sim.runtime import SimRuntime

        yield SimRuntime()
        return
    from kubelet_trio.cri.remote import open_cri_runtime
    from kubelet_trio.images.importer import open_image_importer

    async with contextlib.AsyncExitStack() as stack:
        if settings.container_runtime == "managed":  # a containerd of our own
            from kubelet_trio.containerd import open_managed_containerd

            with _step(startup, "the managed containerd", root_dir=settings.root_dir):
                ctrd = await stack.enter_async_context(
                    open_managed_containerd(
                        settings.root_dir,
                        sandbox_image=settings.sandbox_image,
                        subnet=settings.pod_cidr or None,
                    )
                )
            endpoint = ctrd.endpoint
            runtime = await stack.enter_async_context(
                open_cri_runtime(
                    endpoint, request_timeout=settings.request_timeout, boundary_errors=boundary_errors
                )
            )
            import_dir: str | Path = settings.image_import_dir or ctrd.layout.images_dir
            socket: Path | None = ctrd.layout.socket
        else:
            endpoint = settings.endpoint
            runtime = await stack.enter_async_context(
                open_cri_runtime(
                    endpoint,
                    settings.image_endpoint or None,
                    request_timeout=settings.request_timeout,
                    boundary_errors=boundary_errors,
                )
            )
            import_dir, socket = settings.image_import_dir, None  # containerd's: asked below
        if startup is not None:
            await wait_for_runtime(runtime, endpoint, settings.request_timeout, startup)
        if import_dir:
            socket = socket or await containerd_socket(runtime, settings)
            with _step(startup, "the image archives to import", dir=str(import_dir)):
                await stack.enter_async_context(open_image_importer(Path(import_dir), socket))
        yield runtime


async def wait_for_runtime(runtime: Runtime, endpoint: str, deadline: float, startup: StartUp) -> None:
    """The daemon's first runtime call, asked again with backoff until it answers: every component after
    it calls the runtime, and a start against a runtime that is not there would stall in each of them.
    Go's kubelet gives its first ``Version`` call ``deadline`` (``--runtime-request-timeout``) and exits
    without an answer; so does this one (:meth:`StartUp.watch` ends start-up, naming the last error)."""
    delay = RUNTIME_RETRY_FIRST
    with startup.step("the container runtime", deadline, endpoint=endpoint) as step:
        while True:
            try:
                with trio.fail_after(RUNTIME_CHECK_TIMEOUT):
                    version = await runtime.version()
                break
            except trio.TooSlowError:
                step.error = f"no answer within {RUNTIME_CHECK_TIMEOUT:g}s"
            except Exception as err:  # any failure: ask again until the deadline
                step.error = error_text(err)
            await trio.sleep(delay)
            delay = min(delay * 2, RUNTIME_RETRY_MAX)
    logger.info("container runtime", extra=kv(name=version.runtime_name, version=version.runtime_version))


async def containerd_socket(runtime: Runtime, settings: RuntimeSettings) -> Path:
    """The socket ``ctr`` imports images through: the image service's, when the runtime is containerd
    (whose CRI socket is its main socket). Any other runtime refuses ``--image-import-dir``."""
    endpoint = settings.image_endpoint or settings.endpoint
    await check_runtime(runtime, settings)
    with trio.fail_after(RUNTIME_CHECK_TIMEOUT):
        version = await runtime.version()
    if version.runtime_name != "containerd" or not endpoint.startswith("unix://"):
        raise RuntimeError(
            f"--image-import-dir needs containerd: archives are imported with containerd's ctr through its"
            f" own API on the runtime's socket, and the runtime at {endpoint} is"
            f" {version.runtime_name or 'unnamed'} {version.runtime_version}".rstrip()
        )
    return Path(endpoint.removeprefix("unix://"))


async def check_runtime(runtime: Runtime, settings: RuntimeSettings) -> None:
    """Fail fast (run-once) when the runtime does not answer."""
    try:
        with trio.fail_after(RUNTIME_CHECK_TIMEOUT):
            version = await runtime.version()
    except Exception as err:
        where = "simulated runtime" if settings.runtime == "sim" else settings.endpoint
        raise RuntimeError(f"cannot reach the container runtime at {where}: {error_text(err)}") from err
    logger.info("container runtime", extra=kv(name=version.runtime_name, version=version.runtime_version))


# -- daemon ---------------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def open_api(
    settings: ApiClientSettings, certificates: CertificateSettings, metrics: KubeletMetrics | None = None
) -> AsyncIterator[ApiClient | None]:
    """API server mode: the API client when ``--kubeconfig`` is given, else None; a rotating client
    certificate reports its lifetime and renewal errors on ``metrics``."""
    if not settings.kubeconfig:
        yield None
        return
    from kubelet_trio.apimode import open_kubeconfig_client

    if certificates.bootstrap_kubeconfig or certificates.rotate_certificates:  # TLS bootstrap / rotation
        from kubelet_trio.certificate import open_node_api_client

        async with open_node_api_client(
            certificates, qps=settings.qps, burst=settings.burst, metrics=metrics
        ) as client:
            yield client
        return
    async with open_kubeconfig_client(settings.kubeconfig, qps=settings.qps, burst=settings.burst) as client:
        yield client


async def node_config(configs: ComponentConfigs) -> KubeletConfig:
    """The node's configuration with its IP chosen as Go chooses it (a name lookup, the routes) unless
    ``--node-ip`` named one."""
    config = configs.kubelet
    if config.node_ips:
        return config
    try:  # the node name is the hostname here (no cloud provider)
        with trio.fail_after(NODE_IP_TIMEOUT):  # a name lookup that never ends must not stop the node
            ips = await resolve_node_ips(configs.node_ip, config.node_name, config.node_name)
    except (NodeAddressError, trio.TooSlowError) as err:  # Go keeps running too, without a usable address
        logger.warning("no node IP; using the loopback address", extra=kv(error=err))
        return attrs.evolve(config, node_ips=("127.0.0.1",))
    return attrs.evolve(config, node_ips=ips)


@contextlib.asynccontextmanager
async def serving_certificate(
    certificates: CertificateSettings,
    config: KubeletConfig,
    client: ApiClient | None,
    metrics: KubeletMetrics | None = None,
) -> AsyncIterator[KubeletConfig]:
    """``--rotate-server-certificates`` in API mode: the Kubelet API serves a certificate the cluster
    issued (``kubernetes.io/kubelet-serving``), renewed before it expires; ``config`` otherwise."""
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


def check_swap(fail_swap_on: bool, swaps: str = SWAPS) -> None:
    """``failSwapOn`` (Go's container manager): refuse to run a node on a machine with swap enabled."""
    try:
        with open(swaps) as file:
            lines = [line for line in file.read().splitlines() if line.strip()]
    except OSError:
        return  # no /proc/swaps: no swap to speak of
    if fail_swap_on and len(lines) > 1:  # more than the header: swap is on
        raise RuntimeError(
            "running with swap on is not supported, please disable swap or set --fail-swap-on flag to false"
            f" ({swaps} lists {len(lines) - 1} swap area(s))"
        )


def check_cgroup_version(fail_cgroupv1: bool, root: str = CGROUP_ROOT) -> None:
    """``failCgroupV1`` (Go's configuration validation): refuse a cgroup v1 host when asked to."""
    if fail_cgroupv1 and cgroup_version(root) == 1:
        raise RuntimeError(
            "kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is unsupported "
            "and will be removed in a future release"
        )


async def serve(
    options: KubeletOptions, configs: ComponentConfigs, credential_providers: tuple[PluginProvider, ...] = ()
) -> int:
    """The daemon until SIGTERM or SIGINT: read from the first moment, so a signal during start-up stops
    it as promptly as one later (0); a start-up step past its deadline or a failing node raises (1)."""
    startup = StartUp()
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_stop_on_signal, signals, startup, nursery.cancel_scope)
            nursery.start_soon(startup.watch)
            await run_node(options, configs, credential_providers, startup)
    return 0


async def _stop_on_signal(signals: AsyncIterator[int], startup: StartUp, node: trio.CancelScope) -> None:
    async for signum in signals:
        name = signal.Signals(signum).name
        step = startup.current.value
        if startup.started:
            logger.info("stopping, pods are left running", extra=kv(signal=name))
        elif step is not None:
            logger.info(
                "stopping during start-up, pods are left running",
                extra=kv(signal=name, waiting_for=step.what, **step.context()),
            )
        else:
            logger.info("stopping during start-up, pods are left running", extra=kv(signal=name))
        node.cancel()
        return


async def run_node(
    options: KubeletOptions,
    configs: ComponentConfigs,
    credential_providers: tuple[PluginProvider, ...],
    startup: StartUp,
) -> None:
    """Start the node step by step (``startup`` names each), then run it until cancelled."""
    check_swap(configs.fail_swap_on)
    check_cgroup_version(configs.fail_cgroupv1)
    # Go: the kubelet's own oom_score_adj, so the kernel kills pods before the kubelet (when permitted;
    # logged and carried on otherwise)
    await trio.to_thread.run_sync(apply_oom_score_adj, 0, options.oom_score_adj)
    with startup.step("the node's address", node=configs.kubelet.node_name):
        config = await node_config(configs)
    # /metrics is served by the Kubelet API and the read-only server; without them nothing is recorded
    metrics = KubeletMetrics(enabled=bool(config.port or config.read_only_port))
    pod_config, sources = build_sources(configs.sources, metrics.boundary_errors)
    allocatable = configs.allocatable
    async with contextlib.AsyncExitStack() as stack:
        runtime = await stack.enter_async_context(
            open_runtime(configs.runtime, metrics.boundary_errors, startup)
        )
        with startup.step("the API server", kubeconfig=configs.api_client.kubeconfig):
            client = await stack.enter_async_context(
                open_api(configs.api_client, configs.certificates, metrics)
            )
            config = await stack.enter_async_context(
                serving_certificate(configs.certificates, config, client, metrics)
            )
        deps = KubeletDeps(
            runtime=runtime,
            pod_config=pod_config,
            sources=tuple(sources),
            metrics=metrics,
            instrument_runtime=metrics.enabled,
            allocatable=read_node_allocatable(  # the downward API's defaults for unset limits
                allocatable.root_dir,
                reserved=(allocatable.kube_reserved, allocatable.system_reserved),
                eviction_hard=allocatable.eviction_hard,
            ),
            api_client=client,  # API server mode when --kubeconfig is given
            api_options=configs.api_mode,
            configz=configz_body(options),  # /configz on the Kubelet API port
            credential_providers=credential_providers,
        )
        with startup.step("the node's components to start", NODE_START_TIMEOUT, node=config.node_name):
            await stack.enter_async_context(open_kubelet(config, deps))
        startup.started = True
        await trio.sleep_forever()


# -- run-once -------------------------------------------------------------------------------------------


async def read_static_sources(
    settings: SourceSettings,
) -> tuple[dict[str, tuple[Pod, ...]], tuple[ManifestError, ...]]:
    """Read the manifest path and the URL once."""
    from kubelet_trio.runonce import fetch_manifest_url

    pods: dict[str, tuple[Pod, ...]] = {}
    errors: list[ManifestError] = []
    if settings.pod_manifest_path:
        scan = await trio.to_thread.run_sync(
            scan_manifest_path, settings.pod_manifest_path, settings.node_name
        )
        pods[FILE_SOURCE] = scan.pods
        errors += scan.errors
    if settings.manifest_url:
        url_pods, url_errors = await fetch_manifest_url(
            settings.manifest_url, settings.node_name, dict(settings.manifest_url_header)
        )
        pods[HTTP_SOURCE] = url_pods
        errors += url_errors
    return pods, tuple(errors)


async def run_once_main(
    options: KubeletOptions, configs: ComponentConfigs, credential_providers: tuple[PluginProvider, ...] = ()
) -> int:
    from kubelet_trio.runonce import run_once

    pods, errors = await read_static_sources(configs.sources)
    for error in errors:
        logger.error("invalid pod manifest", extra=kv(error=error))
    # No HTTP servers, no device plugin socket and no pod cgroups in run-once: it is over in moments and
    # must not collide with a running daemon (whose housekeeping would take the pods' cgroups for
    # orphans, or this run the daemon's). Go's RunOnce does not start its container manager either.
    config = attrs.evolve(
        await node_config(configs),
        healthz_port=0,
        read_only_port=0,
        port=0,
        device_plugins=False,
        cgroups=None,
    )

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    def show(report: RunOnceReport) -> None:
        if options.output == "json":
            print(json.dumps(report.to_json(), indent=2), flush=True)
        else:
            print(report.format_table(), end="", flush=True)

    async with open_runtime(configs.runtime) as runtime:
        await check_runtime(runtime, configs.runtime)
        report = await run_once(
            runtime,
            config,
            pods,
            configs.run_once,
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
    configs = component_configs(options)  # the one derivation of the components' settings
    try:
        credential_providers = register_credential_providers(configs.credential_providers)
    except CredentialProvidersError as err:
        print(f"kubelet-trio: {err}", file=sys.stderr)
        return 1
    try:
        return trio.run(run_once_main if options.runonce else serve, options, configs, credential_providers)
    except KeyboardInterrupt:
        print("kubelet-trio: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # the node failed: say why in one line per cause
        for leaf in _leaves(err):
            if isinstance(leaf, RuntimeError | OSError | CgroupError):
                print(f"kubelet-trio: {error_text(leaf)}", file=sys.stderr)
            else:
                logger.error("kubelet failed", exc_info=leaf)
        return 1


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]
