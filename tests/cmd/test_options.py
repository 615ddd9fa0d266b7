"""Flags + KubeletConfiguration → KubeletOptions (in-process)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelet_trio.options import OptionsError, OptionsWarning, load_options, parse_duration

HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("2m", 120), ("1m30s", 90), ("500ms", 0.5), ("1h0m0s", 3600), ("0", 0), ("1.5s", 1.5), ("10us", 1e-5)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "2", "m", "1x", "1m 2s", "abc"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_defaults_are_the_go_kubelets() -> None:
    options, warnings = load_options(["--pod-manifest-path", "/etc/kubernetes/manifests"])
    assert warnings == []
    assert (options.sync_frequency, options.file_check_frequency, options.http_check_frequency) == (
        60,
        20,
        20,
    )
    assert (options.runtime_request_timeout, options.max_pods) == (120, 110)
    assert (options.healthz_port, options.healthz_bind_address) == (10248, "127.0.0.1")
    assert (options.read_only_port, options.address) == (0, "0.0.0.0")
    assert options.container_runtime_endpoint == "unix:///run/containerd/containerd.sock"
    assert options.explicit == {"pod_manifest_path"}


def test_file_then_flags(tmp_path: Path) -> None:
    config = tmp_path / "kubelet.yaml"
    config.write_text(
        HEADER
        + "staticPodPath: manifests\n"  # relative to the file
        + "podLogsDir: /logs\n"
        + "syncFrequency: 1m30s\n"
        + "runtimeRequestTimeout: 2m\n"
        + "maxPods: 20\n"
        + "healthzPort: 0\n"
        + "readOnlyPort: 10255\n"
        + "staticPodURL: http://example.test/pods\n"
        + "staticPodURLHeader: {X-Token: [a, b]}\n"
        + "containerRuntimeEndpoint: /run/crio/crio.sock\n"
        + "logging: {format: json, verbosity: 2}\n"
    )
    options, warnings = load_options(["--config", str(config), "--max-pods", "7", "--sync-frequency", "45"])
    assert warnings == []
    assert options.pod_manifest_path == str(tmp_path / "manifests")
    assert options.pod_logs_dir == "/logs"
    assert options.sync_frequency == 45  # the flag wins (plain seconds are fine on flags)
    assert options.max_pods == 7
    assert options.runtime_request_timeout == 120
    assert (options.healthz_port, options.read_only_port) == (0, 10255)
    assert options.manifest_url_header == {"X-Token": ["a", "b"]}
    assert options.container_runtime_endpoint == "unix:///run/crio/crio.sock"
    assert (options.logging_format, options.verbosity) == ("json", 2)


def test_unknown_keys_are_named_in_one_warning(tmp_path: Path) -> None:
    config = tmp_path / "kubelet.yaml"
    config.write_text(
        HEADER
        + "cpuManagerPolicy: static\n"
        + "authentication: {anonymous: {enabled: false}, webhook: {cacheTTL: 2m}}\n"
        + "featureGates: {KubeletInUserNamespace: true}\n"
        + "logging: {flushFrequency: 5s, options: {json: {infoBufferSize: '0'}}}\n"
    )
    _, warnings = load_options(["--config", str(config)])
    assert warnings == [
        OptionsWarning(
            "ignoring unknown or unsupported configuration keys",
            {"file": str(config), "keys": "cpuManagerPolicy, featureGates, logging.options"},
        )
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("syncFrequency: soon\n", "invalid value for syncFrequency: 'soon'"),
        ("syncFrequency: 60\n", "invalid value for syncFrequency: 60"),
        ("maxPods: many\n", "invalid value for maxPods: 'many'"),
        ("healthzPort: 70000\n", "invalid value for healthzPort: 70000"),
        ("address: nowhere\n", "invalid value for address: 'nowhere'"),
        ("logging: {format: xml}\n", "invalid value for logging.format: 'xml'"),
    ],
)
def test_invalid_file_values_name_key_and_value(tmp_path: Path, body: str, message: str) -> None:
    config = tmp_path / "kubelet.yaml"
    config.write_text(HEADER + body)
    with pytest.raises(OptionsError, match=message):
        load_options(["--config", str(config)])


def test_file_header_and_syntax_are_checked(tmp_path: Path) -> None:
    config = tmp_path / "kubelet.yaml"
    config.write_text("apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n")
    with pytest.raises(OptionsError, match=r"invalid value for apiVersion: 'kubelet\.config\.k8s\.io/v1'"):
        load_options(["--config", str(config)])
    config.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: Pod\n")
    with pytest.raises(OptionsError, match="invalid value for kind: 'Pod'"):
        load_options(["--config", str(config)])
    config.write_text("a: [")
    with pytest.raises(OptionsError, match="not valid YAML"):
        load_options(["--config", str(config)])
    with pytest.raises(OptionsError, match="cannot read --config"):
        load_options(["--config", str(tmp_path / "missing.yaml")])


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-pods", "lots"], "invalid value 'lots' for --max-pods: expected an integer"),
        (["--sync-frequency", "often"], "invalid value 'often' for --sync-frequency"),
        (["--node-ip", "300.1.1.1"], "invalid value '300.1.1.1' for --node-ip: expected an IP address"),
        (["--container-runtime-endpoint", "tcp://x:1"], "for --container-runtime-endpoint"),
        (["--node-labels", "novalue"], "invalid value 'novalue' for --node-labels"),
    ],
)
def test_invalid_flag_values(flags: list[str], message: str) -> None:
    with pytest.raises(OptionsError, match=message):
        load_options(flags)


def test_repeatable_flags() -> None:
    options, _ = load_options(
        ["--manifest-url-header", "a:hello,b:again", "--manifest-url-header", "b:beautiful",
         "--node-labels", "zone=a,tier=edge", "--node-labels", "kubernetes.io/role=worker"]
    )  # fmt: skip
    assert options.manifest_url_header == {"a": ["hello"], "b": ["again", "beautiful"]}
    assert options.node_labels == {"zone": "a", "tier": "edge", "kubernetes.io/role": "worker"}


def test_node_name_is_the_lower_cased_override() -> None:
    options, _ = load_options(["--hostname-override", "Edge-01"])
    assert options.node_name == "edge-01"


def test_api_mode_settings_from_file_and_flags(tmp_path: Path) -> None:
    defaults, _ = load_options([])
    assert (defaults.kube_api_qps, defaults.kube_api_burst, defaults.register_node) == (50, 100, True)
    assert defaults.eviction_hard == {
        "memory.available": "100Mi",
        "nodefs.available": "10%",
        "nodefs.inodesFree": "5%",
        "imagefs.available": "15%",
        "imagefs.inodesFree": "5%",
    }
    assert (defaults.node_status_update_frequency, defaults.node_status_report_frequency) == (10, 300)
    assert defaults.node_lease_duration_seconds == 40

    config = tmp_path / "kubelet.yaml"
    config.write_text(
        HEADER
        + "kubeAPIQPS: 5\n"
        + "kubeAPIBurst: 10\n"
        + "registerNode: false\n"
        + "registerWithTaints: [{key: dedicated, value: edge, effect: NoSchedule}]\n"
        + "kubeReserved: {cpu: 100m, memory: 256Mi}\n"
        + "evictionHard: {memory.available: 200Mi}\n"
        + "nodeStatusUpdateFrequency: 20s\n"
        + "nodeStatusReportFrequency: 1m\n"
        + "nodeLeaseDurationSeconds: 60\n"
    )
    options, warnings = load_options(
        ["--config", str(config), "--kube-api-qps", "7.5", "--system-reserved", "memory=1Gi,pid=100",
         "--register-with-taints", "gpu:NoExecute,team=a:PreferNoSchedule"]
    )  # fmt: skip
    assert warnings == []
    assert (options.kube_api_qps, options.kube_api_burst, options.register_node) == (7.5, 10, False)
    assert options.register_with_taints == (
        {"key": "gpu", "effect": "NoExecute"},
        {"key": "team", "value": "a", "effect": "PreferNoSchedule"},
    )
    assert options.kube_reserved == {"cpu": "100m", "memory": "256Mi"}
    assert options.system_reserved == {"memory": "1Gi", "pid": "100"}
    assert options.eviction_hard == {"memory.available": "200Mi"}  # replaces the defaults, as in Go
    assert (options.node_status_update_frequency, options.node_status_report_frequency) == (20, 60)
    assert options.node_lease_duration_seconds == 60

    from kubelet_trio.options import component_configs

    mode = component_configs(options).api_mode
    assert (mode.register_node, mode.node_status_update_frequency, mode.node_lease_duration_seconds) == (
        False,
        20,
        60,
    )
    assert mode.register_with_taints == options.register_with_taints
    assert mode.kube_reserved == {"cpu": "100m", "memory": "256Mi"}
    assert mode.eviction_hard == {"memory.available": "200Mi"}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--kube-api-qps", "0"], "for --kube-api-qps: expected a number greater than zero"),
        (["--kube-reserved", "gpu=1"], "for --kube-reserved: unknown resource 'gpu'"),
        (["--kube-reserved", "cpu=lots"], "for --kube-reserved: cpu: 'lots' is not a non-negative quantity"),
        (["--eviction-hard", "memory.available=1Gi"], "expected key<value pairs"),
        (["--eviction-hard", "disk.free<1Gi"], "unknown eviction signal 'disk.free'"),
        (["--eviction-hard", "nodefs.available<120%"], "'120%' is not a quantity or a percentage"),
        (["--register-with-taints", "gpu"], "for --register-with-taints: expected key\\[=value\\]:Effect"),
        (["--register-with-taints", "gpu:Never"], "invalid taint effect 'Never'"),
        (["--register-node=maybe"], "for --register-node: expected true or false"),
    ],
)
def test_invalid_api_mode_flags(flags: list[str], message: str) -> None:
    with pytest.raises(OptionsError, match=message):
        load_options(flags)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("kubeAPIQPS: fast\n", "invalid value for kubeAPIQPS: 'fast'"),
        ("registerWithTaints: {key: a}\n", "invalid value for registerWithTaints"),
        ("kubeReserved: [cpu]\n", "invalid value for kubeReserved: \\['cpu'\\]: expected a map"),
        ("nodeLeaseDurationSeconds: -1\n", "invalid value for nodeLeaseDurationSeconds: -1"),
    ],
)
def test_invalid_api_mode_keys(tmp_path: Path, body: str, message: str) -> None:
    config = tmp_path / "kubelet.yaml"
    config.write_text(HEADER + body)
    with pytest.raises(OptionsError, match=message):
        load_options(["--config", str(config)])
