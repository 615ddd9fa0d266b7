"""The settings table: every setting declared once, as a :class:`KubeletOptions` field.

Each field is made by :func:`setting` with keywords (flag, KubeletConfiguration key, parser, default from
:mod:`kubelet_trio.defaults`, help, group); :data:`SETTINGS` (:func:`settings_of`), the argument parser,
the file reader, the help text and ``/configz`` are derived from the fields, and
:func:`~kubelet_trio.options.component.component_configs` hands each setting to the component fields of
its name. Adding a setting is adding its field here (``tests/cmd/test_adding_a_setting.py``).
:data:`UNENFORCED` lists the security-relevant upstream settings that are accepted but not enforced.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from kubelet_trio import defaults
from kubelet_trio.api import Quantity
from kubelet_trio.options import parsers

__all__ = [
    "CONFIG_API_VERSION",
    "CONFIG_KIND",
    "SETTINGS",
    "UNENFORCED",
    "KubeletOptions",
    "Setting",
    "Unenforced",
    "setting",
    "settings_of",
]

CONFIG_API_VERSION = "kubelet.config.k8s.io/v1beta1"
CONFIG_KIND = "KubeletConfiguration"


@attrs.frozen(kw_only=True)
class Setting:
    """One setting: where it is read from (flag, configuration key), how, its default and its help."""

    dest: str = ""  # the KubeletOptions field (filled in from the field's name)
    flag: str | None = None  # None: configuration file only
    key: str | None = None  # KubeletConfiguration key; dotted for nested ("logging.format"); None: flag only
    parse: Callable[[Any, bool], Any]
    default: Any
    help: str
    group: str
    metavar: str | None = None
    repeatable: bool = False
    path: bool = False  # relative paths in the file are relative to the file
    aliases: tuple[str, ...] = ()  # other spellings of the flag
    shorthand: str = ""  # a one-letter flag (-v)
    #: The default when a --config file is given, where Go's v1beta1 default differs from the flag's
    #: legacy default (None: the same default either way).
    file_default: Any = None

    @property
    def flags(self) -> tuple[str, ...]:
        """The flag and its aliases (none for a configuration-file-only setting)."""
        return (self.flag, *self.aliases) if self.flag is not None else ()

    @property
    def boolean(self) -> bool:
        """A pflag boolean: ``--flag`` alone means true, ``--flag=false`` sets it false."""
        return self.parse is parsers.boolean


G_CONFIG, G_SOURCES, G_RUNTIME, G_NODE, G_API, G_CERTS, G_HTTP, G_RUNONCE, G_LOGS = (
    "configuration",
    "pod sources",
    "container runtime",
    "node",
    "API server mode (--kubeconfig)",
    "TLS bootstrap and certificates",
    "HTTP servers",
    "run-once (--runonce)",
    "logging",
)
G_UNENFORCED = "security-relevant, accepted but not enforced"

_SETTING = "kubelet_trio.options.setting"  # the attrs metadata key of a field's Setting


def setting(
    *,
    flag: str | None = None,
    key: str | None = None,
    parse: Callable[[Any, bool], Any],
    default: Any,
    help: str,
    group: str,
    metavar: str | None = None,
    repeatable: bool = False,
    path: bool = False,
    aliases: tuple[str, ...] = (),
    shorthand: str = "",
    file_default: Any = None,
) -> Any:
    """A :class:`KubeletOptions` field declaring one setting (see :class:`Setting`; ``dest`` is the
    field's name). Mutable defaults are copied per instance."""
    spec = Setting(
        flag=flag,
        key=key,
        parse=parse,
        default=default,
        help=help,
        group=group,
        metavar=metavar,
        repeatable=repeatable,
        path=path,
        aliases=aliases,
        shorthand=shorthand,
        file_default=file_default,
    )
    if isinstance(default, Mapping):
        return attrs.field(factory=lambda: dict(default), metadata={_SETTING: spec})
    return attrs.field(default=default, metadata={_SETTING: spec})


@attrs.frozen(kw_only=True)
class KubeletOptions:
    """The effective settings; ``explicit`` names the settings a flag or the file gave."""

    config: str = ""  # the --config file (not a setting of its own)
    # pod sources
    pod_manifest_path: str = setting(
        flag="--pod-manifest-path",
        key="staticPodPath",
        parse=parsers.string,
        default="",
        help="directory (or file) of static pod manifests",
        group=G_SOURCES,
        metavar="PATH",
        path=True,
    )
    manifest_url: str = setting(
        flag="--manifest-url",
        key="staticPodURL",
        parse=parsers.string,
        default="",
        help="URL serving a Pod, PodList or List",
        group=G_SOURCES,
        metavar="URL",
    )
    manifest_url_header: dict[str, list[str]] = setting(  # noqa: RUF009 - copied per instance
        flag="--manifest-url-header",
        key="staticPodURLHeader",
        parse=parsers.headers,
        default={},
        help="HTTP header for --manifest-url, 'Key:value[,Key2:value2]' (repeatable)",
        group=G_SOURCES,
        metavar="KEY:VALUE",
        repeatable=True,
    )
    file_check_frequency: float = setting(
        flag="--file-check-frequency",
        key="fileCheckFrequency",
        parse=parsers.positive_duration,
        default=defaults.FILE_CHECK_FREQUENCY,
        help="how often the manifest path is re-read (inotify catches changes sooner)",
        group=G_SOURCES,
        metavar="DURATION",
    )
    http_check_frequency: float = setting(
        flag="--http-check-frequency",
        key="httpCheckFrequency",
        parse=parsers.positive_duration,
        default=defaults.HTTP_CHECK_FREQUENCY,
        help="how often the manifest URL is fetched",
        group=G_SOURCES,
        metavar="DURATION",
    )
    kubeconfig: str = setting(
        flag="--kubeconfig",
        parse=parsers.string,
        default="",
        help="kubeconfig of the API server: pods come from it, node and pod status go to it",
        group=G_SOURCES,
        metavar="PATH",
    )
    # runtime
    runtime: str = setting(
        flag="--runtime",
        parse=parsers.choice("cri", "sim"),
        default=defaults.RUNTIME,
        help="cri: a CRI runtime at --container-runtime-endpoint; sim: the built-in simulated runtime",
        group=G_RUNTIME,
        metavar="{cri,sim}",
    )
    container_runtime_endpoint: str = setting(
        flag="--container-runtime-endpoint",
        key="containerRuntimeEndpoint",
        parse=parsers.endpoint,
        default=defaults.CONTAINER_RUNTIME_ENDPOINT,
        help="CRI runtime socket",
        group=G_RUNTIME,
        metavar="unix:///SOCKET",
    )
    image_service_endpoint: str = setting(
        flag="--image-service-endpoint",
        key="imageServiceEndpoint",
        parse=parsers.endpoint,
        default="",
        help="CRI image service socket (default: the runtime endpoint)",
        group=G_RUNTIME,
        metavar="unix:///SOCKET",
    )
    runtime_request_timeout: float = setting(
        flag="--runtime-request-timeout",
        key="runtimeRequestTimeout",
        parse=parsers.positive_duration,
        default=defaults.RUNTIME_REQUEST_TIMEOUT,
        help="timeout of every CRI call except pulls",
        group=G_RUNTIME,
        metavar="DURATION",
    )
    container_runtime: str = setting(
        flag="--container-runtime",
        parse=parsers.choice("remote", "managed"),
        default=defaults.CONTAINER_RUNTIME,
        help="remote: use the CRI runtime at --container-runtime-endpoint; managed: start and supervise a"
        " containerd of this kubelet's own (state under --root-dir)",
        group=G_RUNTIME,
        metavar="{remote,managed}",
    )
    pod_cidr: str = setting(
        flag="--pod-cidr",
        key="podCIDR",
        parse=parsers.cidr,
        default="",
        help="the pod subnet of the managed runtime's bridge (default: a free /24 of 198.18.0.0/15, a range"
        " no other network uses); refused when it overlaps a route of this host",
        group=G_RUNTIME,
        metavar="CIDR",
    )
    pod_infra_container_image: str = setting(
        flag="--pod-infra-container-image",
        parse=parsers.string,
        default="",
        help="the sandbox (pause) image, never garbage collected; with --container-runtime managed it is the"
        " managed containerd's sandbox image, else the CRI runtime's own setting decides",
        group=G_RUNTIME,
        metavar="IMAGE",
    )
    image_credential_provider_config: str = setting(
        flag="--image-credential-provider-config",
        parse=parsers.string,
        default="",
        help="the CredentialProviderConfig file (or directory of them) naming the exec plugins that supply"
        " registry credentials for image pulls; read at startup, an invalid one stops the kubelet",
        group=G_RUNTIME,
        metavar="PATH",
    )
    image_credential_provider_bin_dir: str = setting(
        flag="--image-credential-provider-bin-dir",
        parse=parsers.string,
        default="",
        help="the directory of the credential provider plugins' executables",
        group=G_RUNTIME,
        metavar="PATH",
    )
    serialize_image_pulls: bool = setting(
        flag="--serialize-image-pulls",
        key="serializeImagePulls",
        parse=parsers.boolean,
        default=defaults.SERIALIZE_IMAGE_PULLS,
        help="pull images one at a time (false: in parallel, at most maxParallelImagePulls at once; a"
        " configuration file setting maxParallelImagePulls above 1 makes false the default, as in Go)",
        group=G_RUNTIME,
        metavar="BOOL",
    )
    max_parallel_image_pulls: int | None = setting(
        key="maxParallelImagePulls",
        parse=parsers.optional_int,
        default=None,
        help="the most image pulls at once when serializeImagePulls is false (unset: no limit; at least 1)",
        group=G_RUNTIME,
    )
    registry_qps: int = setting(
        flag="--registry-qps",
        key="registryPullQPS",
        parse=parsers.integer,
        default=defaults.REGISTRY_PULL_QPS,
        help="image pulls started per second (a token bucket; a pull beyond it fails with 'pull QPS"
        " exceeded' and is retried after the pull backoff; 0: no limit)",
        group=G_RUNTIME,
        metavar="QPS",
    )
    registry_burst: int = setting(
        flag="--registry-burst",
        key="registryBurst",
        parse=parsers.integer,
        default=defaults.REGISTRY_BURST,
        help="image pulls that may start at once beyond --registry-qps (used when it is above 0)",
        group=G_RUNTIME,
        metavar="N",
    )
    image_import_dir: str = setting(
        flag="--image-import-dir",
        key="imageImportDir",
        parse=parsers.string,
        default="",
        help="a directory of image archives (*.tar, *.tar.gz, *.tar.zst; OCI or Docker, as `ctr images"
        " export` writes them) imported into containerd's k8s.io namespace before the first pod starts and"
        " again when one is added, for nodes without a registry (k3s's agent/images); needs containerd (its"
        " ctr reaches the runtime's socket); default with --container-runtime managed:"
        " <root-dir>/containerd/images",
        group=G_RUNTIME,
        metavar="DIR",
        path=True,
    )
    cgroup_driver: str = setting(
        flag="--cgroup-driver",
        key="cgroupDriver",
        parse=parsers.choice("cgroupfs", "systemd"),
        default=defaults.CGROUP_DRIVER,
        help="how cgroups are named and made: the runtime's cgroup driver, checked against it at start",
        group=G_RUNTIME,
        metavar="{cgroupfs,systemd}",
    )
    cgroups_per_qos: bool = setting(
        flag="--cgroups-per-qos",
        key="cgroupsPerQOS",
        parse=parsers.boolean,
        default=defaults.CGROUPS_PER_QOS,
        help="run pods in a cgroup each, under kubepods/{burstable,besteffort} by QoS class, with their"
        " requests and limits at pod level (needs root and a real runtime; --runtime sim has no cgroups)",
        group=G_NODE,
        metavar="BOOL",
    )
    cgroup_root: str = setting(
        flag="--cgroup-root",
        key="cgroupRoot",
        parse=parsers.string,
        default=defaults.CGROUP_ROOT,
        help="the cgroup kubepods is made in (it must exist; default: the root cgroup)",
        group=G_NODE,
        metavar="CGROUP",
    )
    enforce_node_allocatable: tuple[str, ...] = setting(
        flag="--enforce-node-allocatable",
        key="enforceNodeAllocatable",
        parse=parsers.strings,
        default=defaults.ENFORCE_NODE_ALLOCATABLE,
        help="what node allocatable is enforced on with cgroups: pods (kubepods limited to allocatable),"
        " system-reserved and kube-reserved (their cgroups limited to the reservations), or none",
        group=G_NODE,
        metavar="LEVELS",
        repeatable=True,
    )
    kube_reserved_cgroup: str = setting(
        flag="--kube-reserved-cgroup",
        key="kubeReservedCgroup",
        parse=parsers.string,
        default=defaults.KUBE_RESERVED_CGROUP,
        help="the existing cgroup of the Kubernetes daemons, limited to --kube-reserved when"
        " --enforce-node-allocatable names kube-reserved (an absolute cgroupfs path, or a slice name with"
        " the systemd driver)",
        group=G_NODE,
        metavar="CGROUP",
    )
    system_reserved_cgroup: str = setting(
        flag="--system-reserved-cgroup",
        key="systemReservedCgroup",
        parse=parsers.string,
        default=defaults.SYSTEM_RESERVED_CGROUP,
        help="the existing cgroup of the OS daemons, limited to --system-reserved when"
        " --enforce-node-allocatable names system-reserved",
        group=G_NODE,
        metavar="CGROUP",
    )
    pod_max_pids: int = setting(
        flag="--pod-max-pids",
        key="podPidsLimit",
        parse=parsers.integer,
        default=defaults.POD_PIDS_LIMIT,
        help="the most processes a pod's cgroup may hold (-1: no pod-level limit)",
        group=G_NODE,
        metavar="N",
    )
    cpu_cfs_quota: bool = setting(
        flag="--cpu-cfs-quota",
        key="cpuCFSQuota",
        parse=parsers.boolean,
        default=defaults.CPU_CFS_QUOTA,
        help="enforce CPU limits with CFS quota (containers and pods)",
        group=G_NODE,
        metavar="BOOL",
    )
    cpu_cfs_quota_period: float = setting(
        flag="--cpu-cfs-quota-period",
        key="cpuCFSQuotaPeriod",
        parse=parsers.duration,
        default=defaults.CPU_CFS_QUOTA_PERIOD,
        help="the CFS quota period of pod cgroups (1ms to 1s)",
        group=G_NODE,
        metavar="DURATION",
    )
    oom_score_adj: int = setting(
        flag="--oom-score-adj",
        key="oomScoreAdj",
        parse=parsers.integer,
        default=defaults.OOM_SCORE_ADJ,
        help="the kubelet process's oom_score_adj, in [-1000, 1000] (set when permitted)",
        group=G_NODE,
        metavar="N",
    )
    # node
    fail_swap_on: bool = setting(
        flag="--fail-swap-on",
        key="failSwapOn",
        parse=parsers.boolean,
        default=defaults.FAIL_SWAP_ON,
        help="refuse to start the node daemon when swap is enabled on the machine",
        group=G_NODE,
        metavar="BOOL",
    )
    fail_cgroupv1: bool = setting(
        flag="--fail-cgroupv1",
        key="failCgroupV1",
        parse=parsers.boolean,
        default=defaults.FAIL_CGROUP_V1,
        help="refuse to start the node daemon on a host using cgroup v1 (Go 1.35+ defaults to true)",
        group=G_NODE,
        metavar="BOOL",
    )
    cluster_dns: tuple[str, ...] = setting(
        flag="--cluster-dns",
        key="clusterDNS",
        parse=parsers.ip_list,
        default=(),
        help="DNS server IPs of pods with dnsPolicy ClusterFirst, comma-separated (repeatable)",
        group=G_NODE,
        metavar="IPS",
        repeatable=True,
    )
    cluster_domain: str = setting(
        flag="--cluster-domain",
        key="clusterDomain",
        parse=parsers.string,
        default="",
        help="the cluster's DNS domain: pods search it in addition to the host's search domains",
        group=G_NODE,
        metavar="DOMAIN",
    )
    resolv_conf: str = setting(
        flag="--resolv-conf",
        key="resolvConf",
        parse=parsers.string,
        default=defaults.RESOLV_CONF,
        help='the resolver file pods with dnsPolicy Default copy ("" = none)',
        group=G_NODE,
        metavar="PATH",
        path=True,
    )
    hostname_override: str = setting(
        flag="--hostname-override",
        parse=parsers.string,
        default="",
        help="node name (default: the hostname, lower-cased)",
        group=G_NODE,
        metavar="NAME",
    )
    node_ip: str = setting(
        flag="--node-ip",
        parse=parsers.ip,
        default="",
        help="the node's IP address, reported as InternalIP and hostIP (default: a non-loopback address of"
        " the node name, else the default-route interface's; 0.0.0.0 or :: only picks the preferred family)",
        group=G_NODE,
        metavar="IP",
    )
    node_labels: dict[str, str] = setting(  # noqa: RUF009 - copied per instance
        flag="--node-labels",
        parse=parsers.labels,
        default={},
        help="labels for the node object, key=value[,key=value] (used in API server mode)",
        group=G_NODE,
        metavar="LABELS",
        repeatable=True,
    )
    root_dir: str = setting(
        flag="--root-dir",
        parse=parsers.string,
        default=defaults.ROOT_DIR,
        help="the kubelet's state directory",
        group=G_NODE,
        metavar="DIR",
    )
    pod_logs_dir: str = setting(
        flag="--pod-logs-dir",
        key="podLogsDir",
        parse=parsers.string,
        default=defaults.POD_LOGS_DIR,
        help="root of the container log files",
        group=G_NODE,
        metavar="DIR",
        path=True,
    )
    sync_frequency: float = setting(
        flag="--sync-frequency",
        key="syncFrequency",
        parse=parsers.positive_duration,
        default=defaults.SYNC_FREQUENCY,
        help="how often a running pod is re-synced",
        group=G_NODE,
        metavar="DURATION",
    )
    max_pods: int = setting(
        flag="--max-pods",
        key="maxPods",
        parse=parsers.non_negative_int,
        default=defaults.MAX_PODS,
        help="the most pods this node runs (enforced at admission)",
        group=G_NODE,
        metavar="N",
    )
    allowed_unsafe_sysctls: tuple[str, ...] = setting(
        flag="--allowed-unsafe-sysctls",
        key="allowedUnsafeSysctls",
        parse=parsers.sysctl_patterns,
        default=(),
        help="sysctls (or prefixes ending in *, e.g. kernel.msg*,net.core.somaxconn) pods may set beyond the"
        " safe ones; each must be namespaced (repeatable)",
        group=G_NODE,
        metavar="SYSCTLS",
        repeatable=True,
    )
    container_log_max_size: str = setting(
        flag="--container-log-max-size",
        key="containerLogMaxSize",
        parse=parsers.log_max_size,
        default=defaults.CONTAINER_LOG_MAX_SIZE,
        help="size (a quantity such as 10Mi) at which a container's log file is rotated (negative: never)",
        group=G_NODE,
        metavar="SIZE",
    )
    container_log_max_files: int = setting(
        flag="--container-log-max-files",
        key="containerLogMaxFiles",
        parse=parsers.log_max_files,
        default=defaults.CONTAINER_LOG_MAX_FILES,
        help="the most log files kept per container, the current one included (at least 2)",
        group=G_NODE,
        metavar="N",
    )
    container_log_monitor_interval: float = setting(
        key="containerLogMonitorInterval",
        parse=parsers.log_monitor_interval,
        default=defaults.CONTAINER_LOG_MONITOR_INTERVAL,
        help="how often container log sizes are checked for rotation (at least 3s)",
        group=G_NODE,
    )
    image_gc_high_threshold: int = setting(
        flag="--image-gc-high-threshold",
        key="imageGCHighThresholdPercent",
        parse=parsers.percent,
        default=defaults.IMAGE_GC_HIGH_THRESHOLD_PERCENT,
        help="image filesystem usage (percent) at which unused images are removed, least recently used first"
        " (100: never)",
        group=G_NODE,
        metavar="PERCENT",
    )
    image_gc_low_threshold: int = setting(
        flag="--image-gc-low-threshold",
        key="imageGCLowThresholdPercent",
        parse=parsers.percent,
        default=defaults.IMAGE_GC_LOW_THRESHOLD_PERCENT,
        help="image filesystem usage (percent) image garbage collection frees down to (at most the high one)",
        group=G_NODE,
        metavar="PERCENT",
    )
    minimum_image_ttl_duration: float = setting(
        flag="--minimum-image-ttl-duration",
        key="imageMinimumGCAge",
        parse=parsers.duration,
        default=defaults.IMAGE_MINIMUM_GC_AGE,
        help="how long an unused image is kept at least before it may be garbage collected",
        group=G_NODE,
        metavar="DURATION",
    )
    minimum_container_ttl_duration: float = setting(
        flag="--minimum-container-ttl-duration",
        parse=parsers.duration,
        default=defaults.MINIMUM_CONTAINER_TTL_DURATION,
        help="how long a dead container is kept at least before it may be garbage collected (deprecated in"
        " Go)",
        group=G_NODE,
        metavar="DURATION",
    )
    maximum_dead_containers_per_container: int = setting(
        flag="--maximum-dead-containers-per-container",
        parse=parsers.integer,
        default=defaults.MAXIMUM_DEAD_CONTAINERS_PER_CONTAINER,
        help="dead instances kept per container (negative: no limit; deprecated in Go)",
        group=G_NODE,
        metavar="N",
    )
    maximum_dead_containers: int = setting(
        flag="--maximum-dead-containers",
        parse=parsers.integer,
        default=defaults.MAXIMUM_DEAD_CONTAINERS,
        help="dead containers kept on the node in all, spread evenly over pods (negative: no limit;"
        " deprecated in Go)",
        group=G_NODE,
        metavar="N",
    )
    shutdown_grace_period: float = setting(
        key="shutdownGracePeriod",
        parse=parsers.duration,
        default=defaults.SHUTDOWN_GRACE_PERIOD,
        help="graceful node shutdown: how long the node's shutdown waits for pods (0: off; trigger:"
        " kubelet-trio shutdown-node)",
        group=G_NODE,
    )
    shutdown_grace_period_critical_pods: float = setting(
        key="shutdownGracePeriodCriticalPods",
        parse=parsers.duration,
        default=defaults.SHUTDOWN_GRACE_PERIOD_CRITICAL_PODS,
        help="the part of shutdownGracePeriod reserved for critical pods, stopped after the others",
        group=G_NODE,
    )
    # API server mode
    kube_api_qps: float = setting(
        flag="--kube-api-qps",
        key="kubeAPIQPS",
        parse=parsers.positive_number,
        default=defaults.KUBE_API_QPS,
        help="requests per second to the API server (client-side token bucket)",
        group=G_API,
        metavar="QPS",
    )
    kube_api_burst: int = setting(
        flag="--kube-api-burst",
        key="kubeAPIBurst",
        parse=parsers.positive_int,
        default=defaults.KUBE_API_BURST,
        help="burst of the API client's rate limit",
        group=G_API,
        metavar="N",
    )
    event_qps: int = setting(
        flag="--event-qps",
        key="eventRecordQPS",
        parse=parsers.non_negative_int,
        default=defaults.EVENT_RECORD_QPS,
        help="event creations per second (a rate limit of their own, apart from --kube-api-qps; 0: no limit)",
        group=G_API,
        metavar="QPS",
    )
    event_burst: int = setting(
        flag="--event-burst",
        key="eventBurst",
        parse=parsers.positive_int,
        default=defaults.EVENT_BURST,
        help="burst of the event rate limit",
        group=G_API,
        metavar="N",
    )
    register_node: bool = setting(
        flag="--register-node",
        key="registerNode",
        parse=parsers.boolean,
        default=defaults.REGISTER_NODE,
        help="create the Node object (false: only update one that exists)",
        group=G_API,
        metavar="BOOL",
    )
    register_with_taints: tuple[dict[str, str], ...] = setting(
        flag="--register-with-taints",
        key="registerWithTaints",
        parse=parsers.taints,
        default=(),
        help="taints of the Node when it is registered, key[=value]:Effect[,...] (repeatable)",
        group=G_API,
        metavar="TAINTS",
        repeatable=True,
    )
    kube_reserved: dict[str, str] = setting(  # noqa: RUF009 - copied per instance
        flag="--kube-reserved",
        key="kubeReserved",
        parse=parsers.reserved,
        default={},
        help="resources reserved for Kubernetes daemons, e.g. cpu=100m,memory=256Mi (less allocatable)",
        group=G_API,
        metavar="RESOURCES",
        repeatable=True,
    )
    system_reserved: dict[str, str] = setting(  # noqa: RUF009 - copied per instance
        flag="--system-reserved",
        key="systemReserved",
        parse=parsers.reserved,
        default={},
        help="resources reserved for the OS, e.g. cpu=100m,memory=256Mi (less allocatable)",
        group=G_API,
        metavar="RESOURCES",
        repeatable=True,
    )
    eviction_hard: dict[str, str] = setting(  # noqa: RUF009 - copied per instance
        flag="--eviction-hard",
        key="evictionHard",
        parse=parsers.eviction,
        default=defaults.EVICTION_HARD,
        help="hard eviction thresholds, e.g. memory.available<100Mi,nodefs.available<10% (replace the"
        " defaults; subtracted from allocatable)",
        group=G_API,
        metavar="THRESHOLDS",
        repeatable=True,
    )
    eviction_soft: dict[str, str] = setting(  # noqa: RUF009 - copied per instance
        flag="--eviction-soft",
        key="evictionSoft",
        parse=parsers.eviction,
        default={},
        help="soft eviction thresholds, e.g. memory.available<1.5Gi (each needs a grace period)",
        group=G_NODE,
        metavar="THRESHOLDS",
        repeatable=True,
    )
    eviction_soft_grace_period: dict[str, float] = setting(  # noqa: RUF009 - copied per instance
        flag="--eviction-soft-grace-period",
        key="evictionSoftGracePeriod",
        parse=parsers.eviction_grace_periods,
        default={},
        help="how long each soft threshold must hold before a pod is evicted, e.g. memory.available=1m30s",
        group=G_NODE,
        metavar="PERIODS",
        repeatable=True,
    )
    eviction_minimum_reclaim: dict[str, str] = setting(  # noqa: RUF009 - copied per instance
        flag="--eviction-minimum-reclaim",
        key="evictionMinimumReclaim",
        parse=parsers.eviction_reclaims,
        default={},
        help="how far past its threshold a signal must recover before eviction stops, e.g."
        " nodefs.available=500Mi",
        group=G_NODE,
        metavar="AMOUNTS",
        repeatable=True,
    )
    eviction_pressure_transition_period: float = setting(
        flag="--eviction-pressure-transition-period",
        key="evictionPressureTransitionPeriod",
        parse=parsers.duration,
        default=defaults.EVICTION_PRESSURE_TRANSITION_PERIOD,
        help="how long a pressure condition stays reported after its threshold was last met",
        group=G_NODE,
        metavar="DURATION",
    )
    eviction_max_pod_grace_period: int = setting(
        flag="--eviction-max-pod-grace-period",
        key="evictionMaxPodGracePeriod",
        parse=parsers.integer,
        default=defaults.EVICTION_MAX_POD_GRACE_PERIOD,
        help="the longest grace period (seconds) a pod evicted for a soft threshold gets",
        group=G_NODE,
        metavar="SECONDS",
    )
    node_status_update_frequency: float = setting(
        flag="--node-status-update-frequency",
        key="nodeStatusUpdateFrequency",
        parse=parsers.positive_duration,
        default=defaults.NODE_STATUS_UPDATE_FREQUENCY,
        help="how often the node status is computed and posted when it changed",
        group=G_API,
        metavar="DURATION",
    )
    config_map_and_secret_change_detection_strategy: str = setting(
        key="configMapAndSecretChangeDetectionStrategy",
        parse=parsers.choice(*defaults.CHANGE_DETECTION_STRATEGIES),
        default=defaults.CONFIG_MAP_AND_SECRET_CHANGE_DETECTION_STRATEGY,
        help="how ConfigMaps and Secrets pods use are kept current: Watch, Cache (TTL) or Get (every sync)",
        group=G_API,
    )
    node_status_report_frequency: float = setting(
        key="nodeStatusReportFrequency",
        parse=parsers.positive_duration,
        default=defaults.NODE_STATUS_REPORT_FREQUENCY,
        help="how often the node status is posted when nothing changed",
        group=G_API,
    )
    node_lease_duration_seconds: int = setting(
        key="nodeLeaseDurationSeconds",
        parse=parsers.positive_int,
        default=defaults.NODE_LEASE_DURATION_SECONDS,
        help="the node Lease's leaseDurationSeconds (renewed every quarter of it)",
        group=G_API,
    )
    # TLS bootstrap and certificate rotation
    bootstrap_kubeconfig: str = setting(
        flag="--bootstrap-kubeconfig",
        parse=parsers.string,
        default="",
        help="kubeconfig with bootstrap credentials: used to request a client certificate (CSR) when"
        " --kubeconfig does not exist yet; the kubeconfig is then written there",
        group=G_CERTS,
        metavar="PATH",
    )
    cert_dir: str = setting(
        flag="--cert-dir",
        parse=parsers.string,
        default=defaults.CERT_DIR,
        help="directory of the TLS certificates and keys (client certificate from bootstrap, serving"
        " certificate)",
        group=G_CERTS,
        metavar="DIR",
    )
    rotate_certificates: bool = setting(
        flag="--rotate-certificates",
        key="rotateCertificates",
        parse=parsers.boolean,
        default=False,
        help="request a new client certificate from the API server as the current one nears expiry",
        group=G_CERTS,
        metavar="BOOL",
    )
    rotate_server_certificates: bool = setting(
        flag="--rotate-server-certificates",
        key="serverTLSBootstrap",
        parse=parsers.boolean,
        default=False,
        help="request the serving certificate from the API server (kubernetes.io/kubelet-serving CSR) and"
        " rotate it",
        group=G_CERTS,
        metavar="BOOL",
    )
    # http
    healthz_port: int = setting(
        flag="--healthz-port",
        key="healthzPort",
        parse=parsers.port,
        default=defaults.HEALTHZ_PORT,
        help="port of the /healthz server (0 = off)",
        group=G_HTTP,
        metavar="PORT",
    )
    healthz_bind_address: str = setting(
        flag="--healthz-bind-address",
        key="healthzBindAddress",
        parse=parsers.ip,
        default=defaults.HEALTHZ_BIND_ADDRESS,
        help="address of the /healthz server",
        group=G_HTTP,
        metavar="IP",
    )
    read_only_port: int = setting(
        flag="--read-only-port",
        key="readOnlyPort",
        parse=parsers.port,
        default=defaults.READ_ONLY_PORT,
        help="port of the unauthenticated read-only server: /pods, /runningpods, /metrics, /stats/summary,"
        " /containerLogs (0 = off)",
        group=G_HTTP,
        metavar="PORT",
    )
    address: str = setting(
        flag="--address",
        key="address",
        parse=parsers.ip,
        default=defaults.ADDRESS,
        help="address of the read-only server and the Kubelet API",
        group=G_HTTP,
        metavar="IP",
    )
    port: int = setting(
        flag="--port",
        key="port",
        parse=parsers.port,
        default=defaults.PORT,
        help="port of the Kubelet API (TLS, authenticated): the read-only server's endpoints (0 = off)",
        group=G_HTTP,
        metavar="PORT",
    )
    tls_cert_file: str = setting(
        flag="--tls-cert-file",
        key="tlsCertFile",
        parse=parsers.string,
        default="",
        help="the Kubelet API's serving certificate (default: self-signed under <root-dir>/pki)",
        group=G_HTTP,
        metavar="PATH",
        path=True,
    )
    tls_private_key_file: str = setting(
        flag="--tls-private-key-file",
        key="tlsPrivateKeyFile",
        parse=parsers.string,
        default="",
        help="the key of --tls-cert-file",
        group=G_HTTP,
        metavar="PATH",
        path=True,
    )
    client_ca_file: str = setting(
        flag="--client-ca-file",
        key="authentication.x509.clientCAFile",
        parse=parsers.string,
        default="",
        help="CA bundle verifying Kubelet API client certificates (user = CN, groups = O)",
        group=G_HTTP,
        metavar="PATH",
        path=True,
    )
    anonymous_auth: bool = setting(
        flag="--anonymous-auth",
        key="authentication.anonymous.enabled",
        parse=parsers.boolean,
        default=defaults.ANONYMOUS_AUTH,
        help="let unauthenticated Kubelet API requests in as system:anonymous (off by default, also without"
        " --config, where Go's legacy flag default is on)",
        group=G_HTTP,
        metavar="BOOL",
    )
    authentication_token_webhook: bool = setting(
        flag="--authentication-token-webhook",
        key="authentication.webhook.enabled",
        parse=parsers.boolean,
        default=defaults.AUTHENTICATION_WEBHOOK,
        help="check Kubelet API bearer tokens with TokenReview (needs --kubeconfig)",
        group=G_HTTP,
        metavar="BOOL",
        file_default=defaults.CONFIG_FILE_AUTHENTICATION_WEBHOOK,
    )
    authentication_token_webhook_cache_ttl: float = setting(
        flag="--authentication-token-webhook-cache-ttl",
        key="authentication.webhook.cacheTTL",
        parse=parsers.duration,
        default=defaults.AUTHENTICATION_WEBHOOK_CACHE_TTL,
        help="how long TokenReview answers are cached (0 = not cached)",
        group=G_HTTP,
        metavar="DURATION",
    )
    authorization_mode: str = setting(
        flag="--authorization-mode",
        key="authorization.mode",
        parse=parsers.choice("AlwaysAllow", "Webhook"),
        default=defaults.AUTHORIZATION_MODE,
        help="Kubelet API authorization: AlwaysAllow or Webhook (SubjectAccessReview; needs --kubeconfig)",
        group=G_HTTP,
        metavar="MODE",
        file_default=defaults.CONFIG_FILE_AUTHORIZATION_MODE,
    )
    authorization_webhook_cache_authorized_ttl: float = setting(
        flag="--authorization-webhook-cache-authorized-ttl",
        key="authorization.webhook.cacheAuthorizedTTL",
        parse=parsers.duration,
        default=defaults.AUTHORIZATION_WEBHOOK_CACHE_AUTHORIZED_TTL,
        help="how long an allowing SubjectAccessReview answer is cached (0 = not cached)",
        group=G_HTTP,
        metavar="DURATION",
    )
    authorization_webhook_cache_unauthorized_ttl: float = setting(
        flag="--authorization-webhook-cache-unauthorized-ttl",
        key="authorization.webhook.cacheUnauthorizedTTL",
        parse=parsers.duration,
        default=defaults.AUTHORIZATION_WEBHOOK_CACHE_UNAUTHORIZED_TTL,
        help="how long a denying SubjectAccessReview answer is cached (0 = not cached)",
        group=G_HTTP,
        metavar="DURATION",
    )
    tls_min_version: str = setting(
        flag="--tls-min-version",
        key="tlsMinVersion",
        parse=parsers.tls_min_version,
        default=defaults.TLS_MIN_VERSION,
        help="the oldest TLS version the Kubelet API accepts: VersionTLS10, VersionTLS11, VersionTLS12 or"
        " VersionTLS13 (default: TLS 1.2)",
        group=G_HTTP,
        metavar="VERSION",
    )
    tls_cipher_suites: tuple[str, ...] = setting(
        flag="--tls-cipher-suites",
        key="tlsCipherSuites",
        parse=parsers.tls_cipher_suites,
        default=(),
        help="the Kubelet API's TLS 1.0-1.2 cipher suites, Go's names, comma-separated (repeatable; default:"
        " the TLS library's). TLS 1.3 suites are not configurable, as in Go",
        group=G_HTTP,
        metavar="NAMES",
        repeatable=True,
    )
    streaming_connection_idle_timeout: float = setting(
        flag="--streaming-connection-idle-timeout",
        key="streamingConnectionIdleTimeout",
        parse=parsers.duration,
        default=defaults.STREAMING_CONNECTION_IDLE_TIMEOUT,
        help="close exec/attach/port-forward streams after this long without traffic",
        group=G_HTTP,
        metavar="DURATION",
    )
    # run-once
    runonce: bool = setting(
        flag="--runonce",
        parse=parsers.boolean,
        default=False,
        help="start the pods of the static sources, wait, report, exit (0: every pod reached the target)",
        group=G_RUNONCE,
    )
    runonce_wait: str = setting(
        flag="--runonce-wait",
        parse=parsers.choice("running", "completion"),
        default=defaults.RUNONCE_WAIT,
        help="running: until every container runs; completion: pods with restartPolicy Never/OnFailure"
        " until they finish",
        group=G_RUNONCE,
        metavar="{running,completion}",
    )
    runonce_timeout: float = setting(
        flag="--runonce-timeout",
        parse=parsers.positive_duration,
        default=defaults.RUNONCE_TIMEOUT,
        help="overall deadline; pods not at the target by then fail",
        group=G_RUNONCE,
        metavar="DURATION",
    )
    runonce_cleanup: bool = setting(
        flag="--runonce-cleanup",
        parse=parsers.boolean,
        default=False,
        help="stop and remove the pods after the report (default: leave them, like the Go kubelet)",
        group=G_RUNONCE,
    )
    output: str = setting(
        flag="--output",
        parse=parsers.choice("table", "json"),
        default=defaults.OUTPUT,
        help="report format",
        group=G_RUNONCE,
        metavar="{table,json}",
    )
    # logging
    verbosity: int = setting(
        flag="--v",
        key="logging.verbosity",
        parse=parsers.verbosity,
        default=defaults.LOGGING_VERBOSITY,
        help="log verbosity: messages of V-level up to this are shown (V(4) is debug; run-once shows only"
        " warnings unless -v is given)",
        group=G_LOGS,
        metavar="LEVEL",
        shorthand="v",
    )
    logging_format: str = setting(
        flag="--logging-format",
        key="logging.format",
        parse=parsers.choice("text", "json"),
        default=defaults.LOGGING_FORMAT,
        help="klog's text layout or its JSON layout (one object per line)",
        group=G_LOGS,
        metavar="{text,json}",
        aliases=("--log-format",),
    )
    log_flush_frequency: float = setting(
        flag="--log-flush-frequency",
        key="logging.flushFrequency",
        parse=parsers.positive_duration,
        default=defaults.LOG_FLUSH_FREQUENCY,
        help="accepted for compatibility: every log line is written when it is logged",
        group=G_LOGS,
        metavar="DURATION",
    )
    explicit: frozenset[str] = frozenset()

    @property
    def container_log_max_bytes(self) -> int:
        return Quantity(self.container_log_max_size).int_value()

    @property
    def node_name(self) -> str:
        return (self.hostname_override or socket.gethostname()).strip().lower()


def settings_of(options_class: type[KubeletOptions]) -> tuple[Setting, ...]:
    """The settings ``options_class`` declares, in declaration (and help) order: the flag parser, the
    file reader, ``--help`` and ``/configz`` are made from them, so a subclass declaring one more
    setting gets its flag, key, default and help line from that field alone."""
    if (known := _SETTINGS_OF.get(options_class)) is not None:
        return known
    defaults_ = options_class()  # defaults made by a factory are this instance's copies
    settings = _SETTINGS_OF[options_class] = tuple(
        attrs.evolve(spec, dest=field.name, default=getattr(defaults_, field.name))
        for field in attrs.fields(options_class)
        if (spec := field.metadata.get(_SETTING)) is not None
    )
    return settings


#: settings_of's answers (not functools.cache: mypy takes an attrs class for unhashable)
_SETTINGS_OF: dict[type[KubeletOptions], tuple[Setting, ...]] = {}


#: Every setting of :class:`KubeletOptions`, in declaration (and help) order.
SETTINGS: tuple[Setting, ...] = settings_of(KubeletOptions)


# -- security-relevant settings accepted but not enforced ---------------------------------------------


@attrs.frozen(kw_only=True)
class Unenforced:
    """An upstream setting that protects the node or its pods, which this kubelet does not enforce.

    Its flag and its key are treated alike: the value is checked, and when it asks for the protection
    (``requests``) the kubelet starts with a warning of its own naming the setting and what stays
    unprotected (``effect``), apart from the one warning for harmless keys. A value that asks for
    nothing is what this kubelet does anyway and is accepted without a word. (Refusing them instead would
    refuse the files and command lines deployment tools write, and would be no safer than running with
    the protection named as missing: the operator decides.)
    """

    flag: str
    key: str
    parse: Callable[[Any, bool], Any]
    requests: Callable[[Any], bool]
    effect: str

    @property
    def boolean(self) -> bool:
        return self.parse is parsers.boolean


#: Go's KubeletConfiguration fields (with their flags) that guard the node or its pods and that this
#: kubelet does not implement.
UNENFORCED: tuple[Unenforced, ...] = (
    Unenforced(
        flag="--protect-kernel-defaults",
        key="protectKernelDefaults",
        parse=parsers.boolean,
        requests=lambda value: value is True,
        effect="the kernel tunables the kubelet depends on (vm.overcommit_memory, vm.panic_on_oom,"
        " kernel.panic, kernel.panic_on_oops, kernel.keys.*) are neither checked nor refused when they"
        " differ",
    ),
    Unenforced(
        flag="--seccomp-default",
        key="seccompDefault",
        parse=parsers.boolean,
        requests=lambda value: value is True,
        effect="containers without a seccompProfile run as the runtime starts them, not with RuntimeDefault",
    ),
    Unenforced(
        flag="--enable-debugging-handlers",
        key="enableDebuggingHandlers",
        parse=parsers.boolean,
        requests=lambda value: value is False,
        effect="exec, attach, port-forward, run and containerLogs stay on the Kubelet API (port: 0 turns it"
        " off)",
    ),
    Unenforced(
        flag="--enable-server",
        key="enableServer",
        parse=parsers.boolean,
        requests=lambda value: value is False,
        effect="the Kubelet API still serves on its port (port: 0 / --port 0 turns it off)",
    ),
)
