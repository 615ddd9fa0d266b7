"""The Kubelet's settings: what one node is built and run with.

Go: ``pkg/kubelet/apis/config`` ``KubeletConfiguration`` and the flags beside it, as far as the Kubelet and
its builder read them. Its own module so that the Kubelet's method modules (``kubelet_pods.py``,
``kubelet_host.py``) can name the type without importing ``kubelet.py``, which imports them; it is
re-exported there, where callers import it from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs

from kubelet_trio import defaults

if TYPE_CHECKING:
    from kubelet_trio.cm.container_manager import NodeConfig

SYNC_TICK = 1.0
HOUSEKEEPING_PERIOD = 2.0
CONTAINER_GC_PERIOD = 60.0  # Go: ContainerGCPeriod


@attrs.frozen
class KubeletConfig:
    node_name: str
    pod_logs_dir: str = defaults.POD_LOGS_DIR
    root_dir: str = defaults.ROOT_DIR
    node_ips: tuple[str, ...] = ()
    sync_frequency: float = defaults.SYNC_FREQUENCY
    sync_tick: float = SYNC_TICK
    housekeeping_period: float = HOUSEKEEPING_PERIOD
    container_gc_period: float = CONTAINER_GC_PERIOD
    pleg_relist_period: float = 1.0
    pleg_relist_threshold: float = 180.0
    jitter: float = 0.5
    # Go spreads the first probes of workers started with the kubelet over one period; a harness that
    # checks exact probe times turns it off.
    probe_start_jitter: bool = True
    healthz_port: int = 0  # 0 = off (the CLI's default is 10248)
    healthz_bind_address: str = defaults.HEALTHZ_BIND_ADDRESS
    read_only_port: int = 0  # 0 = off, as in the Go kubelet
    address: str = defaults.ADDRESS  # the read-only server's and the Kubelet API's bind address
    port: int = 0  # the Kubelet API (TLS, authenticated); 0 = off (the CLI's default is 10250)
    tls_cert_file: str = ""  # "" with tls_private_key_file "": self-signed under <root_dir>/pki
    tls_private_key_file: str = ""
    client_ca_file: str = ""  # authentication.x509.clientCAFile
    tls_min_version: str = defaults.TLS_MIN_VERSION  # tlsMinVersion: Go's name ("": TLS 1.2)
    tls_cipher_suites: tuple[str, ...] = ()  # tlsCipherSuites: Go's names ((): the TLS library's)
    anonymous_auth: bool = defaults.ANONYMOUS_AUTH  # authentication.anonymous.enabled
    authentication_token_webhook: bool = defaults.AUTHENTICATION_WEBHOOK  # authentication.webhook.enabled
    authorization_mode: str = defaults.AUTHORIZATION_MODE  # authorization.mode: AlwaysAllow or Webhook
    # webhook answer caches: authentication.webhook.cacheTTL, authorization.webhook.cache*TTL
    authentication_cache_ttl: float = defaults.AUTHENTICATION_WEBHOOK_CACHE_TTL
    authorized_cache_ttl: float = defaults.AUTHORIZATION_WEBHOOK_CACHE_AUTHORIZED_TTL
    unauthorized_cache_ttl: float = defaults.AUTHORIZATION_WEBHOOK_CACHE_UNAUTHORIZED_TTL
    streaming_connection_idle_timeout: float = (
        defaults.STREAMING_CONNECTION_IDLE_TIMEOUT
    )  # exec/attach/port-forward streams
    cluster_dns: tuple[str, ...] = ()  # clusterDNS: the nameservers of ClusterFirst pods
    cluster_domain: str = ""  # clusterDomain: search domains and pod FQDNs
    resolv_conf: str = defaults.RESOLV_CONF  # the node's resolver file for dnsPolicy Default ("" = none)
    # secret/downwardAPI/projected volumes on tmpfs, as Go; None: when running as root (an unprivileged
    # embedding writes them to disk). Harnesses on a simulated runtime pass False.
    memory_backed_volumes: bool | None = None
    # container log rotation (kubelet_trio.container_log_manager); a negative max size turns it off
    container_log_max_size: int = defaults.CONTAINER_LOG_MAX_SIZE_BYTES
    container_log_max_files: int = defaults.CONTAINER_LOG_MAX_FILES
    container_log_monitor_interval: float = defaults.CONTAINER_LOG_MONITOR_INTERVAL
    # allowedUnsafeSysctls: sysctls (or prefixes ending in *) pods may set beyond the safe ones
    allowed_unsafe_sysctls: tuple[str, ...] = ()
    # node-pressure eviction (kubelet_trio.eviction): thresholds signal -> quantity or percentage
    eviction_hard: Mapping[str, str] = attrs.Factory(lambda: dict(defaults.EVICTION_HARD))
    eviction_soft: Mapping[str, str] = attrs.Factory(dict)
    eviction_soft_grace_period: Mapping[str, float] = attrs.Factory(dict)  # seconds
    eviction_minimum_reclaim: Mapping[str, str] = attrs.Factory(dict)
    eviction_pressure_transition_period: float = defaults.EVICTION_PRESSURE_TRANSITION_PERIOD
    eviction_max_pod_grace_period: int = defaults.EVICTION_MAX_POD_GRACE_PERIOD
    # image GC (kubelet_trio.images), container GC policy (kuberuntime.gc), graceful node shutdown
    image_gc_high_threshold_percent: int = defaults.IMAGE_GC_HIGH_THRESHOLD_PERCENT
    image_gc_low_threshold_percent: int = defaults.IMAGE_GC_LOW_THRESHOLD_PERCENT
    image_minimum_gc_age: float = defaults.IMAGE_MINIMUM_GC_AGE
    minimum_container_ttl_duration: float = defaults.MINIMUM_CONTAINER_TTL_DURATION
    maximum_dead_containers_per_container: int = defaults.MAXIMUM_DEAD_CONTAINERS_PER_CONTAINER
    maximum_dead_containers: int = defaults.MAXIMUM_DEAD_CONTAINERS
    shutdown_grace_period: float = defaults.SHUTDOWN_GRACE_PERIOD  # seconds; 0: off
    shutdown_grace_period_critical_pods: float = defaults.SHUTDOWN_GRACE_PERIOD_CRITICAL_PODS
    pod_infra_container_image: str = ""  # never garbage collected (besides the runtime's sandbox image)
    # maxPods: standalone admission's pod limit (OutOfpods); None: no limit (the CLI's default is 110). In
    # API mode admission reads the Node's allocatable pods, set from ApiModeOptions.max_pods instead.
    max_pods: int | None = None
    # device plugins (kubelet_trio.cm.devicemanager): serve <root_dir>/device-plugins/kubelet.sock, report the
    # plugins' resources and give their devices to containers. Go always does; off for embedded nodes
    # that share a machine (one socket per root dir)
    device_plugins: bool = False
    # pod cgroups (kubelet_trio.cm): None keeps pods in the runtime's default cgroup, as embedded nodes
    # must (unprivileged, or sharing the machine's kubepods with another kubelet); the daemon on a real
    # runtime sets it from cgroupsPerQOS and the settings around it
    cgroups: NodeConfig | None = None
    # the plugin registry (kubelet_trio.pluginmanager): watch <root_dir>/plugins_registry, where CSI drivers'
    # registrars put their sockets, so that their volumes can be mounted. Go always does; off for embedded
    # nodes, which rarely have drivers (API mode's local and hostPath persistent volumes work without it)
    plugin_registry: bool = False
    # image pulls (kubelet_trio.kuberuntime.images): serializeImagePulls, maxParallelImagePulls (None: no
    # limit), registryPullQPS / registryBurst (a token bucket; 0 = no limit, the embedded default: Go's 5
    # QPS would fail the pulls of a harness that starts many pods at once; the CLI's default is Go's)
    serialize_image_pulls: bool = defaults.SERIALIZE_IMAGE_PULLS
    max_parallel_image_pulls: int | None = None
    registry_pull_qps: float = 0.0
    registry_burst: int = defaults.REGISTRY_BURST


# -- run-once mode (``--runonce``; Go: ``runonce.go``) ----------------------------------------------------

MAX_RETRIES = 10  # runOnceMaxRetries
RETRY_DELAY = 1.0  # runOnceRetryDelay
RETRY_BACKOFF = 2.0  # runOnceRetryDelayBackoff
TARGET_RUNNING = "running"
TARGET_COMPLETION = "completion"


@attrs.frozen
class RunOnceSettings:
    """What ``--runonce`` waits for and how long (:mod:`kubelet_trio.runonce`); declared beside
    :class:`KubeletConfig` so that the options need not import the run-once machinery."""

    wait: str = TARGET_RUNNING  # "running" | "completion"
    timeout: float = defaults.RUNONCE_TIMEOUT
    cleanup: bool = False
    max_pods: int = defaults.MAX_PODS
    retries: int = MAX_RETRIES
    retry_delay: float = RETRY_DELAY
    retry_backoff: float = RETRY_BACKOFF
