"""The component configurations: what each of the node's components is built from, derived from
:class:`~kubelet_trio.options.settings.KubeletOptions` in one place (:func:`component_configs`).

Go builds its components from the one ``KubeletConfiguration`` and ``KubeletFlags`` in ``RunKubelet``;
here ``main`` calls :func:`component_configs` once per process and passes the parts down, so no
component reads a raw setting and no setting is copied twice.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

import attrs

from kubelet_trio.apimode import ApiModeOptions
from kubelet_trio.cm.cgroup_manager import CGROUPFS, SYSTEMD
from kubelet_trio.cm.container_manager import NodeConfig
from kubelet_trio.kubelet import KubeletConfig
from kubelet_trio.options.settings import KubeletOptions
from kubelet_trio.runonce import RunOnceSettings

__all__ = [
    "AllocatableSettings",
    "ApiClientSettings",
    "CertificateSettings",
    "ComponentConfigs",
    "CredentialProviderSettings",
    "RuntimeSettings",
    "SourceSettings",
    "component_configs",
]


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


def _concrete_ip(node_ip: str) -> tuple[str, ...]:
    """``--node-ip`` as the node's IPs; none for unset or ``0.0.0.0``/``::`` (a family preference only)."""
    return (node_ip,) if node_ip and not ipaddress.ip_address(node_ip).is_unspecified else ()


def _cgroups(options: KubeletOptions) -> NodeConfig | None:
    """The pod cgroup tree with ``cgroupsPerQOS`` on a real runtime; the simulated runtime runs no
    processes to put in cgroups."""
    if not options.cgroups_per_qos or options.runtime == "sim":
        return None
    return NodeConfig(
        cgroups_per_qos=True,
        cgroup_driver=CGROUPFS if options.cgroup_driver == CGROUPFS else SYSTEMD,
        cgroup_root=options.cgroup_root or "/",
        enforce_node_allocatable=frozenset(options.enforce_node_allocatable),
        pod_pids_limit=options.pod_max_pids,
        kube_reserved=dict(options.kube_reserved),
        system_reserved=dict(options.system_reserved),
        kube_reserved_cgroup=options.kube_reserved_cgroup,
        system_reserved_cgroup=options.system_reserved_cgroup,
        cpu_cfs_quota=options.cpu_cfs_quota,
        cpu_cfs_quota_period=round(options.cpu_cfs_quota_period * 1_000_000),
    )


def component_configs(options: KubeletOptions) -> ComponentConfigs:
    """The component configurations for ``options``: the only place a setting is copied into one.

    ``kubelet.node_ips`` holds only a concrete ``--node-ip``; the daemon resolves the node's address
    otherwise (a name lookup, the routes) before it builds the node.
    """
    kubelet = KubeletConfig(
        node_name=options.node_name,
        pod_logs_dir=options.pod_logs_dir,
        container_log_max_size=options.container_log_max_bytes,
        container_log_max_files=options.container_log_max_files,
        container_log_monitor_interval=options.container_log_monitor_interval,
        root_dir=options.root_dir,
        node_ips=_concrete_ip(options.node_ip),
        sync_frequency=options.sync_frequency,
        healthz_port=options.healthz_port,
        healthz_bind_address=options.healthz_bind_address,
        read_only_port=options.read_only_port,
        port=options.port,
        tls_cert_file=options.tls_cert_file,
        tls_private_key_file=options.tls_private_key_file,
        client_ca_file=options.client_ca_file,
        tls_min_version=options.tls_min_version,
        tls_cipher_suites=tuple(options.tls_cipher_suites),
        anonymous_auth=options.anonymous_auth,
        authentication_token_webhook=options.authentication_token_webhook,
        authorization_mode=options.authorization_mode,
        authentication_cache_ttl=options.authentication_token_webhook_cache_ttl,
        authorized_cache_ttl=options.authorization_webhook_cache_authorized_ttl,
        unauthorized_cache_ttl=options.authorization_webhook_cache_unauthorized_ttl,
        streaming_connection_idle_timeout=options.streaming_connection_idle_timeout,
        address=options.address,
        allowed_unsafe_sysctls=options.allowed_unsafe_sysctls,
        cluster_dns=options.cluster_dns,
        cluster_domain=options.cluster_domain,
        resolv_conf=options.resolv_conf,
        eviction_hard=dict(options.eviction_hard),
        eviction_soft=dict(options.eviction_soft),
        eviction_soft_grace_period=dict(options.eviction_soft_grace_period),
        eviction_minimum_reclaim=dict(options.eviction_minimum_reclaim),
        eviction_pressure_transition_period=options.eviction_pressure_transition_period,
        eviction_max_pod_grace_period=options.eviction_max_pod_grace_period,
        image_gc_high_threshold_percent=options.image_gc_high_threshold,
        image_gc_low_threshold_percent=options.image_gc_low_threshold,
        image_minimum_gc_age=options.minimum_image_ttl_duration,
        minimum_container_ttl_duration=options.minimum_container_ttl_duration,
        maximum_dead_containers_per_container=options.maximum_dead_containers_per_container,
        maximum_dead_containers=options.maximum_dead_containers,
        shutdown_grace_period=options.shutdown_grace_period,
        shutdown_grace_period_critical_pods=options.shutdown_grace_period_critical_pods,
        pod_infra_container_image=options.pod_infra_container_image,
        max_pods=options.max_pods,
        serialize_image_pulls=options.serialize_image_pulls,
        max_parallel_image_pulls=options.max_parallel_image_pulls,
        registry_pull_qps=options.registry_qps,
        registry_burst=options.registry_burst,
        device_plugins=True,  # Go's DevicePlugins feature gate, on by default
        cgroups=_cgroups(options),
        plugin_registry=True,  # Go's plugin manager (CSI drivers) always runs
    )
    api_mode = ApiModeOptions(
        register_node=options.register_node,
        node_labels=dict(options.node_labels),
        register_with_taints=tuple(options.register_with_taints),
        max_pods=options.max_pods,
        hostname=options.hostname_override or None,
        kubelet_port=options.port,
        kube_reserved=dict(options.kube_reserved),
        system_reserved=dict(options.system_reserved),
        eviction_hard=dict(options.eviction_hard),
        node_status_update_frequency=options.node_status_update_frequency,
        node_status_report_frequency=options.node_status_report_frequency,
        node_lease_duration_seconds=options.node_lease_duration_seconds,
        object_strategy=options.config_map_and_secret_change_detection_strategy,
        event_record_qps=options.event_qps,
        event_burst=options.event_burst,
    )
    run_once = RunOnceSettings(
        wait=options.runonce_wait,
        timeout=options.runonce_timeout,
        cleanup=options.runonce_cleanup,
        max_pods=options.max_pods,
    )
    certificates = CertificateSettings(
        kubeconfig=options.kubeconfig,
        bootstrap_kubeconfig=options.bootstrap_kubeconfig,
        cert_dir=options.cert_dir,
        rotate_certificates=options.rotate_certificates,
        rotate_server_certificates=options.rotate_server_certificates,
        node_name=options.node_name,
    )
    return ComponentConfigs(
        kubelet=kubelet,
        api_mode=api_mode,
        run_once=run_once,
        certificates=certificates,
        sources=SourceSettings(
            pod_manifest_path=options.pod_manifest_path,
            manifest_url=options.manifest_url,
            manifest_url_header={k: list(v) for k, v in options.manifest_url_header.items()},
            file_check_frequency=options.file_check_frequency,
            http_check_frequency=options.http_check_frequency,
            api_server=bool(options.kubeconfig),
            node_name=options.node_name,
        ),
        runtime=RuntimeSettings(
            runtime=options.runtime,
            container_runtime=options.container_runtime,
            endpoint=options.container_runtime_endpoint,
            image_endpoint=options.image_service_endpoint,
            request_timeout=options.runtime_request_timeout,
            root_dir=options.root_dir,
            sandbox_image=options.pod_infra_container_image,
            pod_cidr=options.pod_cidr,
            image_import_dir=options.image_import_dir,
        ),
        api_client=ApiClientSettings(
            kubeconfig=options.kubeconfig, qps=options.kube_api_qps, burst=options.kube_api_burst
        ),
        allocatable=AllocatableSettings(
            root_dir=options.root_dir,
            kube_reserved=dict(options.kube_reserved),
            system_reserved=dict(options.system_reserved),
            eviction_hard=dict(options.eviction_hard),
        ),
        credential_providers=CredentialProviderSettings(
            config=options.image_credential_provider_config,
            bin_dir=options.image_credential_provider_bin_dir,
        ),
        fail_swap_on=options.fail_swap_on,
        fail_cgroupv1=options.fail_cgroupv1,
        node_ip=options.node_ip,
    )
