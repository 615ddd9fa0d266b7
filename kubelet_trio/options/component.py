"""The component configurations: what each of the node's components is built from, derived from
:class:`~kubelet_trio.options.settings.KubeletOptions` in one place (:func:`component_configs`).

Go builds its components from the one ``KubeletConfiguration`` and ``KubeletFlags`` in ``RunKubelet``;
here ``main`` calls :func:`component_configs` once per process and passes the parts down, so no
component reads a raw setting and no setting is copied twice. A setting reaches every component field
of its name without a line here (:func:`from_settings`): adding a setting that a component needs is
adding the setting and the component's field.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any, TypeVar

import attrs
from attrs import AttrsInstance

from kubelet_trio.apimode import ApiModeOptions
from kubelet_trio.cm.cgroup_manager import CGROUPFS, SYSTEMD
from kubelet_trio.cm.container_manager import NodeConfig
from kubelet_trio.kubelet_config import KubeletConfig, RunOnceSettings
from kubelet_trio.options.settings import KubeletOptions, settings_of

__all__ = [
    "AllocatableSettings",
    "ApiClientSettings",
    "CertificateSettings",
    "ComponentConfigs",
    "CredentialProviderSettings",
    "RuntimeSettings",
    "SourceSettings",
    "component_configs",
    "from_settings",
]

C = TypeVar("C", bound=AttrsInstance)


@attrs.frozen(kw_only=True)
class CertificateSettings:
    """TLS bootstrap and rotation (Go: ``pkg/kubelet/certificate``): what the certificate managers need."""

    kubeconfig: str  # written by the bootstrap when it does not hold valid credentials
    bootstrap_kubeconfig: str  # "" = no bootstrap
    cert_dir: str
    rotate_certificates: bool
    rotate_server_certificates: bool  # serverTLSBootstrap
    node_name: str


@attrs.frozen(kw_only=True)
class SourceSettings:
    """The pod sources (Go: ``pkg/kubelet/config``): the manifest path and URL, and whether the API
    server is one."""

    pod_manifest_path: str  # "" = none
    manifest_url: str  # "" = none
    manifest_url_header: Mapping[str, list[str]]
    file_check_frequency: float
    http_check_frequency: float
    api_server: bool  # --kubeconfig: pods come from the API server too
    node_name: str


@attrs.frozen(kw_only=True)
class RuntimeSettings:
    """The container runtime: the simulated one, a CRI runtime at an endpoint, or a managed containerd."""

    runtime: str  # cri or sim
    container_runtime: str  # remote: the endpoint's runtime; managed: a containerd of our own
    endpoint: str
    image_endpoint: str  # "" = the runtime endpoint
    request_timeout: float
    root_dir: str  # the managed containerd's state lives below it
    sandbox_image: str  # the managed containerd's sandbox image ("" = its default)
    pod_cidr: str  # the managed runtime's bridge subnet ("" = a free one)
    image_import_dir: str  # "" = none (managed: <root-dir>/containerd/images)


@attrs.frozen(kw_only=True)
class ApiClientSettings:
    """The API server client (``--kubeconfig``) and its rate limit."""

    kubeconfig: str  # "" = standalone
    qps: float
    burst: int


@attrs.frozen(kw_only=True)
class AllocatableSettings:
    """What node allocatable is computed from (the downward API's defaults for unset limits)."""

    root_dir: str
    kube_reserved: Mapping[str, str]
    system_reserved: Mapping[str, str]
    eviction_hard: Mapping[str, str]


@attrs.frozen(kw_only=True)
class CredentialProviderSettings:
    """The image credential provider plugins (Go: ``--image-credential-provider-*``); "" = none."""

    config: str
    bin_dir: str


@attrs.frozen(kw_only=True)
class ComponentConfigs:
    """What the node's components are built from, derived from :class:`KubeletOptions` in one place."""

    kubelet: KubeletConfig
    api_mode: ApiModeOptions  # used when --kubeconfig is given
    run_once: RunOnceSettings  # used with --runonce
    certificates: CertificateSettings
    sources: SourceSettings
    runtime: RuntimeSettings
    api_client: ApiClientSettings
    allocatable: AllocatableSettings
    credential_providers: CredentialProviderSettings
    fail_swap_on: bool  # refuse to run a node on a machine with swap on
    fail_cgroupv1: bool  # refuse to run a node on a cgroup v1 host
    #: ``--node-ip`` as given: ``kubelet.node_ips`` holds it when concrete; "" or ``0.0.0.0``/``::``
    #: (a family preference) leave the daemon to resolve the node's address
    node_ip: str

    @property
    def container_runtime(self) -> str:
        """remote (the endpoint's runtime) or managed (a containerd of our own)."""
        return self.runtime.container_runtime


def from_settings(config_class: type[C], options: KubeletOptions, **computed: Any) -> C:
    """A ``config_class`` (an attrs class) whose fields named like a setting of ``options`` get its value
    (mappings copied, lists as tuples), and whose other fields get ``computed`` (also the way to pass a
    setting-named field a value of its own, ``container_log_max_size`` in bytes).

    So a setting reaches a component by name: a component field of the setting's name needs no line here.
    The copies are not type-checked by mypy; ``tests/cmd/test_settings_declared_once.py`` checks each
    value against its field's annotation.
    """
    settings = {setting.dest for setting in settings_of(type(options))}
    values = {
        field.alias: _copied(getattr(options, field.alias))
        for field in attrs.fields(config_class)
        if field.init and field.alias in settings and field.alias not in computed
    }
    return config_class(**values, **computed)


def _copied(value: Any) -> Any:
    """A setting's value for a component that may keep it: a mapping of its own, a list as a tuple."""
    if isinstance(value, Mapping):
        return dict(value)
    return tuple(value) if isinstance(value, list) else value


def _concrete_ip(node_ip: str) -> tuple[str, ...]:
    """``--node-ip`` as the node's IPs; none for unset or ``0.0.0.0``/``::`` (a family preference only)."""
    return (node_ip,) if node_ip and not ipaddress.ip_address(node_ip).is_unspecified else ()


def _cgroups(options: KubeletOptions) -> NodeConfig | None:
    """The pod cgroup tree with ``cgroupsPerQOS`` on a real runtime; the simulated runtime runs no
    processes to put in cgroups."""
    if not options.cgroups_per_qos or options.runtime == "sim":
        return None
    return from_settings(
        NodeConfig,
        options,
        cgroups_per_qos=True,
        cgroup_driver=CGROUPFS if options.cgroup_driver == CGROUPFS else SYSTEMD,
        cgroup_root=options.cgroup_root or "/",
        enforce_node_allocatable=frozenset(options.enforce_node_allocatable),
        pod_pids_limit=options.pod_max_pids,
        cpu_cfs_quota_period=round(options.cpu_cfs_quota_period * 1_000_000),
    )


def component_configs(options: KubeletOptions) -> ComponentConfigs:
    """The component configurations for ``options``: the only place settings are handed to components.

    A component field named like a setting gets it (:func:`from_settings`); the keywords below are the
    fields named otherwise and the values computed from settings. ``kubelet.node_ips`` holds only a
    concrete ``--node-ip``; the daemon resolves the node's address otherwise (a name lookup, the routes)
    before it builds the node.
    """
    kubelet = from_settings(
        KubeletConfig,
        options,
        node_name=options.node_name,
        node_ips=_concrete_ip(options.node_ip),
        container_log_max_size=options.container_log_max_bytes,  # the setting is a quantity ("10Mi")
        authentication_cache_ttl=options.authentication_token_webhook_cache_ttl,
        authorized_cache_ttl=options.authorization_webhook_cache_authorized_ttl,
        unauthorized_cache_ttl=options.authorization_webhook_cache_unauthorized_ttl,
        image_gc_high_threshold_percent=options.image_gc_high_threshold,
        image_gc_low_threshold_percent=options.image_gc_low_threshold,
        image_minimum_gc_age=options.minimum_image_ttl_duration,
        registry_pull_qps=options.registry_qps,
        device_plugins=True,  # Go's DevicePlugins feature gate, on by default
        cgroups=_cgroups(options),
        plugin_registry=True,  # Go's plugin manager (CSI drivers) always runs
    )
    api_mode = from_settings(
        ApiModeOptions,
        options,
        hostname=options.hostname_override or None,
        kubelet_port=options.port,
        object_strategy=options.config_map_and_secret_change_detection_strategy,
        event_record_qps=options.event_qps,
    )
    run_once = from_settings(
        RunOnceSettings,
        options,
        wait=options.runonce_wait,
        timeout=options.runonce_timeout,
        cleanup=options.runonce_cleanup,
    )
    return ComponentConfigs(
        kubelet=kubelet,
        api_mode=api_mode,
        run_once=run_once,
        certificates=from_settings(CertificateSettings, options, node_name=options.node_name),
        sources=from_settings(
            SourceSettings,
            options,
            manifest_url_header={k: list(v) for k, v in options.manifest_url_header.items()},
            api_server=bool(options.kubeconfig),
            node_name=options.node_name,
        ),
        runtime=from_settings(
            RuntimeSettings,
            options,
            endpoint=options.container_runtime_endpoint,
            image_endpoint=options.image_service_endpoint,
            request_timeout=options.runtime_request_timeout,
            sandbox_image=options.pod_infra_container_image,
        ),
        api_client=from_settings(
            ApiClientSettings, options, qps=options.kube_api_qps, burst=options.kube_api_burst
        ),
        allocatable=from_settings(AllocatableSettings, options),
        credential_providers=from_settings(
            CredentialProviderSettings,
            options,
            config=options.image_credential_provider_config,
            bin_dir=options.image_credential_provider_bin_dir,
        ),
        fail_swap_on=options.fail_swap_on,
        fail_cgroupv1=options.fail_cgroupv1,
        node_ip=options.node_ip,
    )
