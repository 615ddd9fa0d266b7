"""Each setting is declared once (a :class:`KubeletOptions` field made by ``options.setting``) and the
component configurations are derived from it in one function (``options.component_configs``), which
hands a setting to every component field of its name (``options.component.from_settings``).

The Go defaults checked here are those of ``pkg/kubelet/apis/config/v1beta1/defaults.go`` (and
``defaults_linux.go``) in Kubernetes 1.31 (kubeAPIQPS/kubeAPIBurst are 50/100 since 1.27; 5/10 before).
"""

from __future__ import annotations

import sys
import types
import typing
from pathlib import Path
from typing import Any

import attrs
import pytest

from kubelet_trio.apimode import ApiModeOptions
from kubelet_trio.apiobjects import DEFAULT_TTL
from kubelet_trio.client.ratelimit import TokenBucket
from kubelet_trio.cm.container_manager import NodeConfig
from kubelet_trio.cri.remote import DEFAULT_REQUEST_TIMEOUT
from kubelet_trio.kubelet import KubeletConfig
from kubelet_trio.nodelease.controller import LEASE_DURATION_SECONDS
from kubelet_trio.nodestatus.setters import DEFAULT_EVICTION_HARD, NodeStatusConfig
from kubelet_trio.options import SETTINGS, KubeletOptions, component_configs, load_options
from kubelet_trio.options.component import (
    ApiClientSettings,
    ComponentConfigs,
    CredentialProviderSettings,
    RuntimeSettings,
    SourceSettings,
)
from kubelet_trio.pod_workers import RESYNC_INTERVAL
from kubelet_trio.runonce import RunOnceSettings

#: KubeletConfiguration v1beta1 defaults (Kubernetes 1.31), as written in a configuration file.
GO_DEFAULTS: dict[str, Any] = {
    "staticPodPath": "",
    "staticPodURL": "",
    "staticPodURLHeader": {},
    "syncFrequency": "1m0s",
    "fileCheckFrequency": "20s",
    "httpCheckFrequency": "20s",
    "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",  # 1.27+
    "imageServiceEndpoint": "",
    "runtimeRequestTimeout": "2m0s",
    "podLogsDir": "/var/log/pods",
    "maxPods": 110,
    "podCIDR": "",  # Go: used in standalone mode; here: the managed runtime's bridge subnet
    "allowedUnsafeSysctls": [],
    "containerLogMaxSize": "10Mi",
    "containerLogMaxFiles": 5,
    "containerLogMonitorInterval": "10s",
    "kubeAPIQPS": 50,  # 1.27+ (5 before)
    "kubeAPIBurst": 100,  # 1.27+ (10 before)
    "eventRecordQPS": 50,
    "eventBurst": 100,
    "registerNode": True,
    "registerWithTaints": [],
    "kubeReserved": {},
    "systemReserved": {},
    "nodeStatusUpdateFrequency": "10s",
    "nodeStatusReportFrequency": "5m0s",
    "nodeLeaseDurationSeconds": 40,
    "configMapAndSecretChangeDetectionStrategy": "Watch",
    "healthzPort": 10248,
    "healthzBindAddress": "127.0.0.1",
    "readOnlyPort": 0,
    "address": "0.0.0.0",
    "port": 10250,
    "tlsCertFile": "",
    "tlsPrivateKeyFile": "",
    "authentication.x509.clientCAFile": "",
    "authentication.anonymous.enabled": False,
    "authentication.webhook.enabled": True,
    "authorization.mode": "Webhook",
    "tlsMinVersion": "",
    "tlsCipherSuites": [],
    "authentication.webhook.cacheTTL": "2m0s",
    "authorization.webhook.cacheAuthorizedTTL": "5m0s",
    "authorization.webhook.cacheUnauthorizedTTL": "30s",
    "streamingConnectionIdleTimeout": "4h0m0s",
    "rotateCertificates": False,
    "serverTLSBootstrap": False,
    "cgroupDriver": "cgroupfs",
    "cgroupsPerQOS": True,
    "cgroupRoot": "",
    "enforceNodeAllocatable": ["pods"],
    "podPidsLimit": -1,
    "kubeReservedCgroup": "",
    "systemReservedCgroup": "",
    "cpuCFSQuota": True,
    "cpuCFSQuotaPeriod": "100ms",
    "oomScoreAdj": -999,
    "failSwapOn": True,
    "clusterDNS": [],
    "clusterDomain": "",
    "resolvConf": "/etc/resolv.conf",
    "logging.flushFrequency": "5s",
    "logging.format": "text",
    "logging.verbosity": 0,
    "imageGCHighThresholdPercent": 85,
    "imageGCLowThresholdPercent": 80,
    "imageMinimumGCAge": "2m0s",
    "shutdownGracePeriod": "0s",
    "shutdownGracePeriodCriticalPods": "0s",
    "evictionHard": {"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%"}
    | {"imagefs.available": "15%", "imagefs.inodesFree": "5%"},
    "evictionSoft": {},
    "evictionSoftGracePeriod": {},
    "evictionMinimumReclaim": {},
    "evictionPressureTransitionPeriod": "5m0s",
    "evictionMaxPodGracePeriod": 0,
    "serializeImagePulls": True,  # false when maxParallelImagePulls is set above 1
    "maxParallelImagePulls": None,  # nil: no limit
    "registryPullQPS": 5,
    "registryBurst": 10,
}

#: Keys whose default deliberately differs from Go's v1beta1 default: key -> (Go's default, why).
DEVIATIONS: dict[str, tuple[Any, str]] = {
    "failCgroupV1": (
        True,
        "Go 1.35+ refuses cgroup v1 hosts unless told otherwise; edge devices (and this project's machines) "
        "run cgroup v1, so kubelet-trio runs there unless asked not to",
    ),
}

#: Configuration keys of this kubelet's own (no KubeletConfiguration field in Go): key -> what it is.
OWN_KEYS: dict[str, str] = {
    "imageImportDir": "image archives imported into containerd (k3s's agent/images)",
}

#: Go's defaults without a --config file, where they differ from v1beta1's (``applyLegacyDefaults`` in
#: ``cmd/kubelet/app/options/options.go``): the flags keep their historical defaults.
LEGACY_FLAG_DEFAULTS: dict[str, Any] = {
    "authentication.anonymous.enabled": True,
    "authentication.webhook.enabled": False,
    "authorization.mode": "AlwaysAllow",
    "readOnlyPort": 10255,
}
#: Legacy flag defaults this kubelet deliberately does not follow: key -> why.
LEGACY_DEVIATIONS: dict[str, str] = {
    "authentication.anonymous.enabled": "closed: with AlwaysAllow any peer could run commands in pods",
    "readOnlyPort": "off, as with a file: an unauthenticated port only when asked for",
}

#: Flag-only settings: not KubeletConfiguration fields in Go either, or this kubelet's own.
FLAG_ONLY = {
    "kubeconfig",
    "hostname_override",
    "node_ip",
    "node_labels",
    "root_dir",
    "pod_infra_container_image",
    "image_credential_provider_config",  # flags in Go 1.33 (KubeletFlags), not configuration keys
    "image_credential_provider_bin_dir",
    "runonce",
    "runtime",  # cri or sim (this kubelet's)
    "runonce_wait",
    "runonce_timeout",
    "runonce_cleanup",
    "output",
    "bootstrap_kubeconfig",
    "cert_dir",
    "container_runtime",  # remote or managed (Go removed the flag in 1.27; managed is this kubelet's)
    # deprecated container GC flags without a KubeletConfiguration field in Go either
    "minimum_container_ttl_duration",
    "maximum_dead_containers_per_container",
    "maximum_dead_containers",
}


def test_every_setting_is_a_field_and_every_field_a_setting() -> None:
    fields = {field.name for field in attrs.fields(KubeletOptions)}
    assert fields - {s.dest for s in SETTINGS} == {"config", "explicit"}
    assert len(SETTINGS) == len(fields) - 2


def test_flags_and_keys_are_unique_and_every_flag_maps_to_a_key() -> None:
    flags = [s.flag for s in SETTINGS if s.flag]
    keys = [s.key for s in SETTINGS if s.key]
    assert len(flags) == len(set(flags))
    assert len(keys) == len(set(keys))
    assert all(s.flag or s.key for s in SETTINGS)
    assert {s.dest for s in SETTINGS if s.key is None} == FLAG_ONLY
    for setting in SETTINGS:
        if setting.flag is not None:
            assert setting.flag == "--" + setting.dest.replace("_", "-") or setting.dest == "verbosity"
    # aliases and shorthands: Go's spelling is the flag, older spellings of this kubelet are aliases
    assert {s.dest: s.aliases for s in SETTINGS if s.aliases} == {"logging_format": ("--log-format",)}
    assert {s.dest: s.shorthand for s in SETTINGS if s.shorthand} == {"verbosity": "v"}


def test_the_default_is_the_declared_one_and_of_the_declared_type() -> None:
    options = KubeletOptions()
    for setting in SETTINGS:
        assert getattr(options, setting.dest) == setting.default, setting.dest
        annotation = KubeletOptions.__annotations__[setting.dest]
        declared, optional = annotation.removesuffix(" | None"), annotation.endswith(" | None")
        base = {"str": str, "int": int, "float": float, "bool": bool, "dict": dict, "tuple": tuple}[
            declared.split("[")[0]
        ]
        assert isinstance(setting.default, base) or (optional and setting.default is None), setting.dest
        if setting.flag and setting.default not in ("", {}, (), None):
            assert setting.parse(_as_flag(setting.default), False) == setting.default, setting.dest


def _as_flag(value: Any) -> Any:
    if isinstance(value, dict):
        return [",".join(f"{k}<{v}" for k, v in value.items())]
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def test_mutable_defaults_are_not_shared() -> None:
    first, second = KubeletOptions(), KubeletOptions()
    first.eviction_hard["pid.available"] = "5%"
    first.node_labels["a"] = "b"
    assert second.eviction_hard == dict(DEFAULT_EVICTION_HARD)
    assert second.node_labels == {}


@pytest.fixture(scope="module")
def empty_config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("config") / "kubelet.yaml"
    path.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
    return path


@pytest.mark.parametrize("setting", [s for s in SETTINGS if s.key], ids=lambda s: s.key)
def test_defaults_match_the_go_kubelets(setting: Any, empty_config_file: Path) -> None:
    """A --config file leaving a key out gets Go's v1beta1 default; without a file the flag's default is
    Go's legacy one where Go has one, else the same."""
    known = [setting.key in GO_DEFAULTS, setting.key in DEVIATIONS, setting.key in OWN_KEYS]
    assert known.count(True) == 1, "decide: Go's default, a reason, or a key of this kubelet's own"
    file_default = setting.default if setting.file_default is None else setting.file_default
    from_file, _ = load_options(["--config", str(empty_config_file)])
    assert getattr(from_file, setting.dest) == file_default  # nothing in the file is needed to get it
    flags_only, _ = load_options([])
    assert getattr(flags_only, setting.dest) == setting.default
    if setting.key in OWN_KEYS:
        assert setting.default == file_default and setting.file_default is None
        return
    if setting.key in DEVIATIONS:
        go_default, _ = DEVIATIONS[setting.key]
        assert setting.parse(go_default, True) != file_default  # still a deviation
        return
    go_default = GO_DEFAULTS[setting.key]
    if go_default is None:  # a nil pointer: unset
        parsed = None
    elif go_default in ("", {}, []):
        parsed = type(setting.default)()
    else:
        parsed = setting.parse(go_default, True)
    assert parsed == file_default
    if setting.key in LEGACY_FLAG_DEFAULTS:
        legacy = setting.parse(LEGACY_FLAG_DEFAULTS[setting.key], True)
        assert (legacy == setting.default) != (setting.key in LEGACY_DEVIATIONS), "Go's or a reason"
    else:
        assert setting.default == file_default
        assert setting.file_default is None  # declared only where Go has two defaults


def test_a_config_file_turns_the_webhooks_on_and_flags_still_win(empty_config_file: Path) -> None:
    options, _ = load_options(["--config", str(empty_config_file)])
    assert (options.authorization_mode, options.authentication_token_webhook, options.anonymous_auth) == (
        "Webhook",
        True,
        False,
    )
    assert {"authorization_mode", "authentication_token_webhook"}.isdisjoint(options.explicit)
    options, _ = load_options(
        [
            "--config",
            str(empty_config_file),
            "--authorization-mode=AlwaysAllow",
            "--authentication-token-webhook=false",
        ]
    )
    assert (options.authorization_mode, options.authentication_token_webhook) == ("AlwaysAllow", False)
    drop_ins = empty_config_file.parent / "drop-ins"
    drop_ins.mkdir(exist_ok=True)
    (drop_ins / "10-port.conf").write_text(empty_config_file.read_text() + "port: 10251\n")
    options, _ = load_options(["--config-dir", str(drop_ins)])  # drop-ins are not defaulted, as in Go
    assert (options.port, options.authorization_mode, options.authentication_token_webhook) == (
        10251,
        "AlwaysAllow",
        False,
    )


def test_no_go_default_without_a_setting() -> None:
    keys = {s.key for s in SETTINGS}
    assert set(GO_DEFAULTS) <= keys
    assert set(DEVIATIONS) <= keys
    assert set(OWN_KEYS) <= keys
    assert not set(OWN_KEYS) & (set(GO_DEFAULTS) | set(DEVIATIONS))
    assert set(LEGACY_DEVIATIONS) <= set(LEGACY_FLAG_DEFAULTS) <= keys


# -- the derived component configurations ---------------------------------------------------------------
# A component field named like a setting gets it by name (options.component.from_settings); these tables
# list the fields component_configs fills by hand: another name, or a value computed from settings.

#: Component class -> {field: the KubeletOptions setting it comes from, under another name}.
RENAMED: dict[type, dict[str, str]] = {
    KubeletConfig: {
        "authentication_cache_ttl": "authentication_token_webhook_cache_ttl",
        "authorized_cache_ttl": "authorization_webhook_cache_authorized_ttl",
        "unauthorized_cache_ttl": "authorization_webhook_cache_unauthorized_ttl",
        "image_gc_high_threshold_percent": "image_gc_high_threshold",
        "image_gc_low_threshold_percent": "image_gc_low_threshold",
        "image_minimum_gc_age": "minimum_image_ttl_duration",
        "registry_pull_qps": "registry_qps",
    },
    ApiModeOptions: {
        "kubelet_port": "port",
        "object_strategy": "config_map_and_secret_change_detection_strategy",
        "event_record_qps": "event_qps",
    },
    RunOnceSettings: {"wait": "runonce_wait", "timeout": "runonce_timeout", "cleanup": "runonce_cleanup"},
    RuntimeSettings: {
        "endpoint": "container_runtime_endpoint",
        "image_endpoint": "image_service_endpoint",
        "request_timeout": "runtime_request_timeout",
        "sandbox_image": "pod_infra_container_image",
    },
    ApiClientSettings: {"qps": "kube_api_qps", "burst": "kube_api_burst"},
    CredentialProviderSettings: {
        "config": "image_credential_provider_config",
        "bin_dir": "image_credential_provider_bin_dir",
    },
    NodeConfig: {"pod_pids_limit": "pod_max_pids"},
}
#: Component class -> fields named like a setting but holding a value computed from it (not the same).
COMPUTED: dict[type, set[str]] = {
    KubeletConfig: {"container_log_max_size"},  # bytes, from the quantity
    SourceSettings: {"manifest_url_header"},  # the lists copied too
    NodeConfig: {  # tests/cmd/test_cgroup_settings.py
        "cgroups_per_qos",
        "cgroup_driver",
        "cgroup_root",
        "enforce_node_allocatable",
        "cpu_cfs_quota_period",  # µs, from the duration
    },
}


def same_named(component: type) -> dict[str, str]:
    """The fields of ``component`` that ``component_configs`` fills by name: field -> setting."""
    settings = {s.dest for s in SETTINGS}
    names = {f.alias for f in attrs.fields(component) if f.init and f.alias in settings}
    return {name: name for name in names - COMPUTED.get(component, set())}


def from_options(component: type) -> dict[str, str]:
    """Every field of ``component`` that holds a setting as it is: field -> setting."""
    return same_named(component) | RENAMED.get(component, {})


KUBELET_CONFIG = from_options(KubeletConfig)
API_MODE = from_options(ApiModeOptions)
RUN_ONCE = from_options(RunOnceSettings)

CHANGED = [
    "--cluster-dns=10.96.0.10",
    "--cluster-domain=cluster.local",
    "--resolv-conf=/run/systemd/resolve/resolv.conf",
    "--hostname-override=Node-A",
    "--node-ip=10.1.2.3",
    "--pod-logs-dir=/logs",
    "--root-dir=/state",
    "--container-log-max-size=20Mi",
    "--container-log-max-files=3",
    "--sync-frequency=45s",
    "--healthz-port=1",
    "--healthz-bind-address=0.0.0.0",
    "--read-only-port=10255",
    "--port=10251",
    "--tls-cert-file=/c",
    "--tls-private-key-file=/k",
    "--client-ca-file=/ca",
    "--tls-min-version=VersionTLS13",
    "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "--anonymous-auth=true",
    "--authentication-token-webhook=true",
    "--authorization-mode=Webhook",
    "--authentication-token-webhook-cache-ttl=1s",
    "--authorization-webhook-cache-authorized-ttl=2s",
    "--authorization-webhook-cache-unauthorized-ttl=3s",
    "--streaming-connection-idle-timeout=4s",
    "--address=127.0.0.2",
    "--allowed-unsafe-sysctls=kernel.msg*",
    "--register-node=false",
    "--node-labels=a=b",
    "--register-with-taints=k=v:NoSchedule",
    "--max-pods=7",
    "--kube-reserved=cpu=1",
    "--system-reserved=memory=1Gi",
    "--eviction-hard=memory.available<1Gi",
    "--eviction-soft=memory.available<2Gi",
    "--eviction-soft-grace-period=memory.available=1m30s",
    "--eviction-minimum-reclaim=memory.available=100Mi",
    "--eviction-pressure-transition-period=30s",
    "--eviction-max-pod-grace-period=20",
    "--node-status-update-frequency=5s",
    "--runonce-wait=completion",
    "--runonce-timeout=9s",
    "--runonce-cleanup",
    "--image-gc-high-threshold=90",
    "--image-gc-low-threshold=70",
    "--minimum-image-ttl-duration=5m",
    "--minimum-container-ttl-duration=1m",
    "--maximum-dead-containers-per-container=3",
    "--maximum-dead-containers=100",
    "--pod-infra-container-image=registry.k8s.io/pause:3.9",
    "--serialize-image-pulls=false",
    "--registry-qps=2",
    "--registry-burst=3",
    "--container-runtime-endpoint=unix:///run/other.sock",
    "--image-service-endpoint=unix:///run/images.sock",
    "--runtime-request-timeout=30s",
    "--kube-api-qps=7",
    "--kube-api-burst=9",
    "--event-qps=3",
    "--image-credential-provider-config=/etc/kubelet/credential-providers.yaml",
    "--image-credential-provider-bin-dir=/usr/libexec/kubelet-credential-providers",
    "--pod-max-pids=100",
]


def components(configs: ComponentConfigs) -> list[Any]:
    """Every component configuration ``component_configs`` made."""
    parts = [getattr(configs, f.name) for f in attrs.fields(ComponentConfigs)] + [configs.kubelet.cgroups]
    return [part for part in parts if attrs.has(type(part))]


@pytest.mark.parametrize("argv", [[], CHANGED], ids=["defaults", "changed"])
def test_component_configs_carry_every_setting(argv: list[str]) -> None:
    options, _ = load_options(argv)
    if argv:  # and the configuration-file-only settings
        options = attrs.evolve(
            options,
            node_status_report_frequency=60.0,
            node_lease_duration_seconds=20,
            config_map_and_secret_change_detection_strategy="Get",
            container_log_monitor_interval=30.0,
            shutdown_grace_period=30.0,
            shutdown_grace_period_critical_pods=10.0,
            max_parallel_image_pulls=4,
        )
    configs = component_configs(options)
    for part in components(configs):
        for field, dest in from_options(type(part)).items():
            assert getattr(part, field) == getattr(options, dest), f"{type(part).__name__}.{field}"
    assert configs.kubelet.node_name == options.node_name
    assert configs.kubelet.container_log_max_size == options.container_log_max_bytes
    assert configs.kubelet.node_ips == ((options.node_ip,) if options.node_ip else ())
    assert configs.api_mode.hostname == (options.hostname_override or None)
    assert configs.sources.manifest_url_header == options.manifest_url_header
    assert (configs.fail_swap_on, configs.fail_cgroupv1, configs.node_ip) == (
        options.fail_swap_on,
        options.fail_cgroupv1,
        options.node_ip,
    )
    if argv:  # every renamed setting differs from its default, so a dropped copy cannot pass
        defaults_options = KubeletOptions()
        for dest in {dest for renamed in RENAMED.values() for dest in renamed.values()}:
            assert getattr(options, dest) != getattr(defaults_options, dest), dest


def _annotation(component: type, field: str) -> Any:
    """The evaluated annotation of ``component``'s ``field`` (its module's imports at run time)."""
    annotation = attrs.fields_dict(component)[field].type
    if not isinstance(annotation, str):
        return annotation
    return eval(annotation, vars(sys.modules[component.__module__]))


def _is_instance(value: Any, annotation: Any) -> bool:
    """A shallow isinstance against an annotation (unions, generics by their origin; a float takes an
    int, as mypy's numeric tower does)."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return any(_is_instance(value, arg) for arg in typing.get_args(annotation))
    if annotation is None or annotation is type(None):
        return value is None
    if annotation is float:
        return isinstance(value, int | float)
    return isinstance(value, typing.get_origin(annotation) or annotation)


@pytest.mark.parametrize("argv", [[], CHANGED], ids=["defaults", "changed"])
def test_settings_handed_over_by_name_have_the_fields_type(argv: list[str]) -> None:
    """What mypy cannot see through ``from_settings``: each value a component gets by name (or from a
    renamed setting) is of its field's type."""
    configs = component_configs(load_options(argv)[0])
    for part in components(configs):
        for field in from_options(type(part)):
            value = getattr(part, field)
            annotation = _annotation(type(part), field)
            assert _is_instance(value, annotation), f"{type(part).__name__}.{field}: {value!r} ({annotation})"


def test_the_daemon_serves_device_plugins_and_an_embedded_node_does_not() -> None:
    """Go's DevicePlugins feature gate is on by default: the daemon's node serves the Registration
    socket; a node embedded without the command line shares its machine and leaves it off."""
    assert component_configs(KubeletOptions()).kubelet.device_plugins is True
    assert KubeletConfig(node_name="n").device_plugins is False


def test_component_defaults_agree_with_the_declaration() -> None:
    """Components embedded without the command line default to the same values."""
    options = KubeletOptions()
    api_mode = ApiModeOptions()
    for field, dest in API_MODE.items():
        assert getattr(api_mode, field) == getattr(options, dest), field
    run_once = RunOnceSettings()
    for field, dest in RUN_ONCE.items():
        assert getattr(run_once, field) == getattr(options, dest), field
    status = NodeStatusConfig(node_name="n", kubelet_version="v")
    assert (status.max_pods, status.kubelet_port) == (options.max_pods, options.port)
    assert dict(status.eviction_hard) == options.eviction_hard
    assert options.node_lease_duration_seconds == LEASE_DURATION_SECONDS
    assert RESYNC_INTERVAL == DEFAULT_TTL == options.sync_frequency
    assert options.runtime_request_timeout == DEFAULT_REQUEST_TIMEOUT
    bucket = TokenBucket()
    assert (bucket.qps, bucket.burst) == (options.kube_api_qps, options.kube_api_burst)
    config = KubeletConfig(node_name="n")
    embedded_off = {"healthz_port", "read_only_port", "port"}  # 0 = off unless the CLI turns them on
    embedded_off |= {"max_pods"}  # None: no pod limit unless the CLI sets one (110 by default)
    embedded_off |= {"registry_pull_qps"}  # 0: pulls not rate-limited unless the CLI sets it (5 by default)
    for field, dest in KUBELET_CONFIG.items():
        if field not in embedded_off:
            assert getattr(config, field) == getattr(options, dest), field
    assert config.container_log_max_size == options.container_log_max_bytes
