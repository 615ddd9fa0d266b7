"""Command lines written for the Go kubelet: kubeadm's systemd drop-in (with the KubeletConfiguration kubeadm
writes) and a k3s agent's kubelet arguments. Every flag is either accepted, with its meaning, or refused
with a message naming it as an upstream kubelet flag not supported here (exit status 2 from the CLI)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from kubelet_trio.options import NOT_ENFORCED, OptionsError, load_options

UNSUPPORTED = "is an upstream kubelet flag not supported by kubelet-trio"

# kubeadm's /usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf
KUBEADM_DROP_IN = """\
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
"""  # noqa: E501

# /var/lib/kubelet/kubeadm-flags.env: as kubeadm 1.33 writes it, and as 1.23 wrote it (dockershim era)
KUBEADM_FLAGS_ENV = {
    "1.33": 'KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock'
    ' --pod-infra-container-image=registry.k8s.io/pause:3.10"',
    "1.23": 'KUBELET_KUBEADM_ARGS="--container-runtime=remote'
    " --container-runtime-endpoint=unix:///run/containerd/containerd.sock --network-plugin=cni"
    ' --pod-infra-container-image=k8s.gcr.io/pause:3.6"',
}

# /var/lib/kubelet/config.yaml as kubeadm 1.33 writes it: zero values mean "the default" (Go's defaulting).
KUBEADM_CONFIG = """\
apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 0s
    cacheUnauthorizedTTL: 0s
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
crashLoopBackOff: {}
evictionPressureTransitionPeriod: 0s
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
httpCheckFrequency: 0s
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
kind: KubeletConfiguration
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 0s
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: /etc/kubernetes/manifests
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s
"""

# The kubelet arguments a k3s agent passes (k3s pkg/daemons/agent/agent_linux.go, the releases that passed
# them as flags; newer ones move most of them into a --config-dir drop-in), and the logging flags k3s
# forwards.
K3S_ARGS = [
    "--address=0.0.0.0",
    "--allowed-unsafe-sysctls=net.ipv4.ip_forward,net.ipv6.conf.all.forwarding",
    "--anonymous-auth=false",
    "--authentication-token-webhook=true",
    "--authorization-mode=Webhook",
    "--cgroup-driver=cgroupfs",
    "--client-ca-file=/var/lib/rancher/k3s/agent/client-ca.crt",
    "--cloud-provider=external",
    "--cluster-dns=10.43.0.10",
    "--cluster-domain=cluster.local",
    "--container-runtime-endpoint=unix:///run/k3s/containerd/containerd.sock",
    "--containerd=/run/k3s/containerd/containerd.sock",
    "--eviction-hard=imagefs.available<5%,nodefs.available<5%",
    "--eviction-minimum-reclaim=imagefs.available=10%,nodefs.available=10%",
    "--fail-swap-on=false",
    "--feature-gates=CloudDualStackNodeIPs=true",
    "--healthz-bind-address=127.0.0.1",
    "--hostname-override=edge-1",
    "--kubeconfig=/var/lib/rancher/k3s/agent/kubelet.kubeconfig",
    "--kubelet-cgroups=/k3s",
    "--node-ip=10.0.0.5",
    "--node-labels=",
    "--pod-infra-container-image=rancher/mirrored-pause:3.6",
    "--pod-manifest-path=/var/lib/rancher/k3s/agent/pod-manifests",
    "--read-only-port=0",
    "--register-with-taints=node-role.kubernetes.io/edge=true:NoSchedule",
    "--resolv-conf=/run/systemd/resolve/resolv.conf",
    "--root-dir=/var/lib/kubelet",
    "--cert-dir=/var/lib/kubelet/pki",
    "--runtime-cgroups=/k3s",
    "--serialize-image-pulls=false",
    "--tls-cert-file=/var/lib/rancher/k3s/agent/serving-kubelet.crt",
    "--tls-private-key-file=/var/lib/rancher/k3s/agent/serving-kubelet.key",
    "--cpu-cfs-quota=false",
    "--protect-kernel-defaults=true",
    "--image-credential-provider-bin-dir=/var/lib/rancher/credentialprovider/bin",
    "--image-credential-provider-config=/var/lib/rancher/credentialprovider/config.yaml",
    "--v=2",
    "--vmodule=kubelet=4",
    "--log-file=/var/log/k3s-kubelet.log",
    "--alsologtostderr=true",
]

#: The flags above that kubelet-trio refuses, naming them; every other one is accepted.
NOT_SUPPORTED = {
    "cloud-provider",
    "containerd",
    "feature-gates",
    "kubelet-cgroups",
    "runtime-cgroups",
    "vmodule",
    "network-plugin",
    "log-file",
    "alsologtostderr",
}


def _name(flag: str) -> str:
    return flag.removeprefix("--").split("=", 1)[0]


def kubeadm_flags(version: str, config: Path) -> list[str]:
    env = {match[1]: match[2] for match in re.finditer(r'Environment="(\w+)=([^"]*)"', KUBEADM_DROP_IN)}
    name, _, value = KUBEADM_FLAGS_ENV[version].partition("=")
    env[name] = shlex.split(value)[0]
    exec_start = KUBEADM_DROP_IN.splitlines()[-1].removeprefix("ExecStart=/usr/bin/kubelet ")
    flags = shlex.split(" ".join(env.get(var.lstrip("$"), "") for var in exec_start.split()))
    return [f"--config={config}" if flag.startswith("--config=") else flag for flag in flags]


def check_each(flags: list[str], base: list[str]) -> list[str]:
    """Feed each flag on its own (after ``base``); returns the accepted ones."""
    accepted = []
    for flag in flags:
        if _name(flag) in NOT_SUPPORTED:
            with pytest.raises(OptionsError) as caught:
                load_options([*base, flag])
            assert str(caught.value).startswith(f"flag --{_name(flag)} {UNSUPPORTED}"), flag
        else:
            load_options([*base, flag])
            accepted.append(flag)
    return accepted


@pytest.fixture
def kubeadm_config(tmp_path: Path) -> Path:
    config = tmp_path / "config.yaml"
    config.write_text(KUBEADM_CONFIG)
    return config


def test_kubeadm_1_33_drop_in_is_accepted_whole(kubeadm_config: Path) -> None:
    flags = kubeadm_flags("1.33", kubeadm_config)
    assert [_name(flag) for flag in flags] == [
        "bootstrap-kubeconfig",
        "kubeconfig",
        "config",
        "container-runtime-endpoint",
        "pod-infra-container-image",
    ]
    options, warnings = load_options(flags)
    assert options.bootstrap_kubeconfig == "/etc/kubernetes/bootstrap-kubelet.conf"
    assert options.kubeconfig == "/etc/kubernetes/kubelet.conf"
    assert options.container_runtime_endpoint == "unix:///var/run/containerd/containerd.sock"
    # the file kubeadm wrote: its values, and its zero values read as Go's defaults
    assert (options.cgroup_driver, options.cluster_dns, options.cluster_domain) == (
        "systemd",
        ("10.96.0.10",),
        "cluster.local",
    )
    assert (options.authorization_mode, options.authentication_token_webhook, options.anonymous_auth) == (
        "Webhook",
        True,
        False,
    )
    assert options.rotate_certificates is True
    assert options.client_ca_file == "/etc/kubernetes/pki/ca.crt"
    assert (options.sync_frequency, options.runtime_request_timeout, options.file_check_frequency) == (
        60,
        120,
        20,
    )
    assert options.authentication_token_webhook_cache_ttl == 120
    assert options.pod_manifest_path == "/etc/kubernetes/manifests"
    [warning] = warnings  # what kubelet-trio does not read is named, not fatal
    assert warning.message == "ignoring unknown or unsupported configuration keys"
    assert "cpuManagerReconcilePeriod" in warning.fields["keys"] and "memorySwap" in warning.fields["keys"]


def test_kubeadm_1_23_flags_are_accepted_or_named(kubeadm_config: Path) -> None:
    flags = kubeadm_flags("1.23", kubeadm_config)
    accepted = check_each(flags, [])
    assert [_name(flag) for flag in flags if flag not in accepted] == ["network-plugin"]
    options, _ = load_options(accepted)
    assert options.container_runtime == "remote"  # Go's 1.23 spelling of "a CRI runtime at the endpoint"


def test_k3s_agent_flags_are_accepted_or_named() -> None:
    accepted = check_each(K3S_ARGS, [])
    assert {_name(flag) for flag in K3S_ARGS} - {_name(flag) for flag in accepted} == NOT_SUPPORTED - {
        "network-plugin"
    }
    options, warnings = load_options(accepted)  # and all the accepted ones together, with their meaning
    # --protect-kernel-defaults=true is security-relevant and not enforced: accepted, named in a warning
    assert [(w.message, w.fields["setting"], w.fields["value"]) for w in warnings] == [
        (NOT_ENFORCED, "protectKernelDefaults", True)
    ]
    assert (options.anonymous_auth, options.authentication_token_webhook, options.fail_swap_on) == (
        False,
        True,
        False,
    )
    assert (options.cluster_dns, options.cluster_domain, options.node_ip) == (
        ("10.43.0.10",),
        "cluster.local",
        "10.0.0.5",
    )
    assert options.eviction_hard == {"imagefs.available": "5%", "nodefs.available": "5%"}
    assert options.node_labels == {}
    assert options.resolv_conf == "/run/systemd/resolve/resolv.conf"
    assert options.register_with_taints == (
        {"key": "node-role.kubernetes.io/edge", "value": "true", "effect": "NoSchedule"},
    )
    assert (options.verbosity, options.read_only_port, options.node_name) == (2, 0, "edge-1")
    assert options.serialize_image_pulls is False  # k3s pulls in parallel


def test_the_cli_exits_2_naming_an_upstream_flag(capsys: pytest.CaptureFixture[str]) -> None:
    from kubelet_trio.cmd import kubelet

    assert kubelet.main(["--pod-manifest-path=/m", "--runtime=sim", "--feature-gates=A=true"]) == 2
    assert capsys.readouterr().err == f"kubelet-trio: flag --feature-gates {UNSUPPORTED}\n"
