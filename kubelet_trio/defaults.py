"""The built-in defaults of the kubelet's settings, one constant each (Go:
``pkg/kubelet/apis/config/v1beta1/defaults.go`` and ``defaults_linux.go``, Kubernetes 1.31).

A leaf module: it imports nothing from the package, so any layer may use it. The settings themselves
(flag, configuration key, parser, help) are declared in :mod:`kubelet_trio.options.settings`, whose
``KubeletOptions`` takes its defaults from here; components that need a default when embedded without
the command line (``ApiModeOptions``, ``NodeStatusConfig``, the lease controller, ...) refer to the same
constants rather than repeating the literal. ``tests/cmd/test_settings_declared_once.py`` checks them
against a table of the Go kubelet's defaults, ``tests/cmd/test_literal_defaults.py`` that no module
repeats one as a literal.

Where this kubelet deliberately differs from Go, the constant says so.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "ADDRESS",
    "ANONYMOUS_AUTH",
    "AUTHENTICATION_WEBHOOK",
    "AUTHENTICATION_WEBHOOK_CACHE_TTL",
    "AUTHORIZATION_MODE",
    "AUTHORIZATION_WEBHOOK_CACHE_AUTHORIZED_TTL",
    "AUTHORIZATION_WEBHOOK_CACHE_UNAUTHORIZED_TTL",
    "CERT_DIR",
    "CGROUPS_PER_QOS",
    "CGROUP_DRIVER",
    "CGROUP_ROOT",
    "CHANGE_DETECTION_STRATEGIES",
    "CONFIG_FILE_AUTHENTICATION_WEBHOOK",
    "CONFIG_FILE_AUTHORIZATION_MODE",
    "CONFIG_MAP_AND_SECRET_CHANGE_DETECTION_STRATEGY",
    "CONTAINER_LOG_MAX_FILES",
    "CONTAINER_LOG_MAX_SIZE",
    "CONTAINER_LOG_MAX_SIZE_BYTES",
    "CONTAINER_LOG_MONITOR_INTERVAL",
    "CONTAINER_RUNTIME",
    "CONTAINER_RUNTIME_ENDPOINT",
    "CPU_CFS_QUOTA",
    "CPU_CFS_QUOTA_PERIOD",
    "ENFORCE_NODE_ALLOCATABLE",
    "EVENT_BURST",
    "EVENT_RECORD_QPS",
    "EVICTION_HARD",
    "EVICTION_MAX_POD_GRACE_PERIOD",
    "EVICTION_PRESSURE_TRANSITION_PERIOD",
    "FAIL_CGROUP_V1",
    "FAIL_SWAP_ON",
    "FILE_CHECK_FREQUENCY",
    "HEALTHZ_BIND_ADDRESS",
    "HEALTHZ_PORT",
    "HTTP_CHECK_FREQUENCY",
    "IMAGE_GC_HIGH_THRESHOLD_PERCENT",
    "IMAGE_GC_LOW_THRESHOLD_PERCENT",
    "IMAGE_MINIMUM_GC_AGE",
    "KUBE_API_BURST",
    "KUBE_API_QPS",
    "KUBE_RESERVED_CGROUP",
    "LOGGING_FORMAT",
    "LOGGING_VERBOSITY",
    "LOG_FLUSH_FREQUENCY",
    "MAXIMUM_DEAD_CONTAINERS",
    "MAXIMUM_DEAD_CONTAINERS_PER_CONTAINER",
    "MAX_PODS",
    "MINIMUM_CONTAINER_TTL_DURATION",
    "NODE_LEASE_DURATION_SECONDS",
    "NODE_STATUS_REPORT_FREQUENCY",
    "NODE_STATUS_UPDATE_FREQUENCY",
    "OOM_SCORE_ADJ",
    "OUTPUT",
    "POD_LOGS_DIR",
    "POD_PIDS_LIMIT",
    "PORT",
    "READ_ONLY_PORT",
    "REGISTER_NODE",
    "REGISTRY_BURST",
    "REGISTRY_PULL_QPS",
    "RESOLV_CONF",
    "ROOT_DIR",
    "RUNONCE_TIMEOUT",
    "RUNONCE_WAIT",
    "RUNTIME",
    "RUNTIME_REQUEST_TIMEOUT",
    "SERIALIZE_IMAGE_PULLS",
    "SHUTDOWN_GRACE_PERIOD",
    "SHUTDOWN_GRACE_PERIOD_CRITICAL_PODS",
    "STREAMING_CONNECTION_IDLE_TIMEOUT",
    "SYNC_FREQUENCY",
    "SYSTEM_RESERVED_CGROUP",
    "TLS_MIN_VERSION",
    "VOLUME_STATS_AGG_PERIOD",
]

# -- pod sources and the sync loop ----------------------------------------------------------------------
SYNC_FREQUENCY = 60.0  # syncFrequency 1m
FILE_CHECK_FREQUENCY = 20.0  # fileCheckFrequency 20s
HTTP_CHECK_FREQUENCY = 20.0  # httpCheckFrequency 20s

# -- node -----------------------------------------------------------------------------------------------
ROOT_DIR = "/var/lib/kubelet"  # --root-dir
FAIL_SWAP_ON = True  # failSwapOn
#: failCgroupV1: Go 1.35+ defaults to true and will not start on a cgroup v1 host; kubelet-trio keeps
#: running there unless asked (edge devices and this project's own machines are cgroup v1)
FAIL_CGROUP_V1 = False
CERT_DIR = "/var/lib/kubelet/pki"  # --cert-dir (Go: <default root dir>/pki, not below --root-dir)
POD_LOGS_DIR = "/var/log/pods"  # podLogsDir
MAX_PODS = 110  # maxPods
CONTAINER_LOG_MAX_SIZE = "10Mi"  # containerLogMaxSize
CONTAINER_LOG_MAX_SIZE_BYTES = 10 * 1024 * 1024
CONTAINER_LOG_MAX_FILES = 5  # containerLogMaxFiles
CONTAINER_LOG_MONITOR_INTERVAL = 10.0  # containerLogMonitorInterval 10s
VOLUME_STATS_AGG_PERIOD = 60.0  # volumeStatsAggPeriod 1m: how often persistent volumes are measured

# -- garbage collection and node shutdown -----------------------------------------------------------------
IMAGE_GC_HIGH_THRESHOLD_PERCENT = 85  # imageGCHighThresholdPercent
IMAGE_GC_LOW_THRESHOLD_PERCENT = 80  # imageGCLowThresholdPercent
IMAGE_MINIMUM_GC_AGE = 120.0  # imageMinimumGCAge 2m
MINIMUM_CONTAINER_TTL_DURATION = 0.0  # --minimum-container-ttl-duration (deprecated flag, no config key)
MAXIMUM_DEAD_CONTAINERS_PER_CONTAINER = 1  # --maximum-dead-containers-per-container (deprecated flag)
MAXIMUM_DEAD_CONTAINERS = -1  # --maximum-dead-containers (deprecated flag; negative: no limit)
SHUTDOWN_GRACE_PERIOD = 0.0  # shutdownGracePeriod (0: graceful node shutdown off)
SHUTDOWN_GRACE_PERIOD_CRITICAL_PODS = 0.0  # shutdownGracePeriodCriticalPods

# -- container runtime ----------------------------------------------------------------------------------
CONTAINER_RUNTIME_ENDPOINT = "unix:///run/containerd/containerd.sock"  # containerRuntimeEndpoint
RUNTIME_REQUEST_TIMEOUT = 120.0  # runtimeRequestTimeout 2m
CGROUP_DRIVER = "cgroupfs"  # cgroupDriver
# -- pod cgroups (kubelet_trio.cm) ----------------------------------------------------------------------
CGROUPS_PER_QOS = True  # cgroupsPerQOS (the daemon on a real runtime; embedded nodes keep cgroups off)
CGROUP_ROOT = ""  # cgroupRoot ("": the root cgroup)
ENFORCE_NODE_ALLOCATABLE = ("pods",)  # enforceNodeAllocatable
POD_PIDS_LIMIT = -1  # podPidsLimit (-1: no pod-level limit)
KUBE_RESERVED_CGROUP = ""  # kubeReservedCgroup ("": none; needed to enforce kube-reserved)
SYSTEM_RESERVED_CGROUP = ""  # systemReservedCgroup ("": none; needed to enforce system-reserved)
CPU_CFS_QUOTA = True  # cpuCFSQuota
CPU_CFS_QUOTA_PERIOD = 0.1  # cpuCFSQuotaPeriod 100ms
OOM_SCORE_ADJ = -999  # oomScoreAdj: the kubelet process's own
SERIALIZE_IMAGE_PULLS = True  # serializeImagePulls (false when a file sets maxParallelImagePulls above 1)
REGISTRY_PULL_QPS = 5  # registryPullQPS (0: no limit)
REGISTRY_BURST = 10  # registryBurst
RUNTIME = "cri"  # --runtime: a CRI runtime (this kubelet's; "sim" is the built-in simulated one)
CONTAINER_RUNTIME = "remote"  # --container-runtime: the endpoint's runtime ("managed": our own containerd)
RESOLV_CONF = "/etc/resolv.conf"  # resolvConf
LOG_FLUSH_FREQUENCY = 5.0  # logging.flushFrequency 5s
LOGGING_FORMAT = "text"  # logging.format
LOGGING_VERBOSITY = 0  # logging.verbosity

# -- API server mode ------------------------------------------------------------------------------------
KUBE_API_QPS = 50.0  # kubeAPIQPS (1.27+; 5 before)
KUBE_API_BURST = 100  # kubeAPIBurst (1.27+; 10 before)
EVENT_RECORD_QPS = 50  # eventRecordQPS (0: no limit); events have a client and a rate limit of their own
EVENT_BURST = 100  # eventBurst
NODE_STATUS_UPDATE_FREQUENCY = 10.0  # nodeStatusUpdateFrequency 10s
NODE_STATUS_REPORT_FREQUENCY = 300.0  # nodeStatusReportFrequency 5m
NODE_LEASE_DURATION_SECONDS = 40  # nodeLeaseDurationSeconds
REGISTER_NODE = True  # registerNode
CHANGE_DETECTION_STRATEGIES = ("Watch", "Cache", "Get")
CONFIG_MAP_AND_SECRET_CHANGE_DETECTION_STRATEGY = "Watch"  # configMapAndSecretChangeDetectionStrategy
#: evictionHard (``defaults_linux.go``); only memory.available and nodefs.available are subtracted from
#: allocatable, as in Go.
EVICTION_HARD: Mapping[str, str] = {
    "memory.available": "100Mi",
    "nodefs.available": "10%",
    "nodefs.inodesFree": "5%",
    "imagefs.available": "15%",
    "imagefs.inodesFree": "5%",
}
EVICTION_PRESSURE_TRANSITION_PERIOD = 300.0  # evictionPressureTransitionPeriod 5m
EVICTION_MAX_POD_GRACE_PERIOD = 0  # evictionMaxPodGracePeriod

# -- HTTP servers ---------------------------------------------------------------------------------------
HEALTHZ_PORT = 10248  # healthzPort
HEALTHZ_BIND_ADDRESS = "127.0.0.1"  # healthzBindAddress
ADDRESS = "0.0.0.0"  # address
PORT = 10250  # port
READ_ONLY_PORT = 0  # readOnlyPort (the v1beta1 default; the legacy flag default is 10255)
TLS_MIN_VERSION = ""  # tlsMinVersion ("": TLS 1.2; the newest cliflag.TLSVersion defaults to 1.3)
# Authentication and authorization of the Kubelet API. Go has two sets of defaults: a --config file is
# defaulted as kubelet.config.k8s.io/v1beta1 (Webhook, webhook authentication on, anonymous off), while
# without one the flags keep their legacy defaults (applyLegacyDefaults: AlwaysAllow, webhook off,
# anonymous on). Here anonymous is off in both: open by default, AlwaysAllow would let any peer that
# reaches the port run commands in every pod.
AUTHORIZATION_MODE = "AlwaysAllow"  # --authorization-mode without --config (Go's legacy flag default)
AUTHENTICATION_WEBHOOK = False  # --authentication-token-webhook without --config (legacy flag default)
ANONYMOUS_AUTH = False  # authentication.anonymous.enabled (v1beta1; Go's legacy flag default is true)
CONFIG_FILE_AUTHORIZATION_MODE = "Webhook"  # authorization.mode when --config is given (v1beta1)
CONFIG_FILE_AUTHENTICATION_WEBHOOK = True  # authentication.webhook.enabled when --config is given
AUTHENTICATION_WEBHOOK_CACHE_TTL = 120.0  # authentication.webhook.cacheTTL 2m
AUTHORIZATION_WEBHOOK_CACHE_AUTHORIZED_TTL = 300.0  # authorization.webhook.cacheAuthorizedTTL 5m
AUTHORIZATION_WEBHOOK_CACHE_UNAUTHORIZED_TTL = 30.0  # authorization.webhook.cacheUnauthorizedTTL 30s
STREAMING_CONNECTION_IDLE_TIMEOUT = 4 * 3600.0  # streamingConnectionIdleTimeout 4h

# -- run-once (this kubelet's --runonce flags) ------------------------------------------------------------
RUNONCE_WAIT = "running"  # --runonce-wait: until every container runs
RUNONCE_TIMEOUT = 300.0  # --runonce-timeout 5m
OUTPUT = "table"  # --output: the run-once report's format
